// Running control nodes (if, loop). Their bodies are graphs of their own, compiled once on the
// backend of the graph that holds them and run by sessions this runner keeps, so a body's
// arena and plans serve every iteration and every run.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/runtime.h"

namespace rlx::runtime {

struct ControlResult {
  std::vector<Tensor> outputs;
  int64_t count = 0;  // the node's data-dependent dim: the branch taken (1 then, 0 else), or trips
};

class ControlRunner {
 public:
  using Compile = std::function<std::shared_ptr<const Executable>(const Graph& body)>;
  ControlRunner(Compile compile, SessionOptions options)
      : compile_(std::move(compile)), options_(options) {}
  ControlResult run(const Node& n, std::span<const Tensor> in);

 private:
  std::vector<Tensor> run_body(const Graph& body, std::span<const Tensor> args);
  ControlResult run_if(const Node& n, std::span<const Tensor> in);
  ControlResult run_loop(const Node& n, std::span<const Tensor> in);
  Compile compile_;
  SessionOptions options_;
  struct Body {
    std::unique_ptr<Session> session;
    std::vector<std::string> inputs;  // by position; empty: dropped by the compiled body
  };
  std::map<const Graph*, Body> bodies_;
};

// Binds the symbols of n's output dims that only its run told (rlx/ops.def: If, Loop) to the
// dims of `outputs`, checking the rest against them.
void bind_run_dims(const Node& n, std::span<const Tensor> in, std::span<const Tensor> outputs,
                   std::map<std::string, int64_t>& counts);

}  // namespace rlx::runtime
