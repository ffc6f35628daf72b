// Helpers for pass tests: the graph after one pass of a real compile, and
// running a graph with some passes disabled (op counts: count_op in
// support/testing.h).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "support/testing.h"

namespace rlx::testing {

// Compiles with `disabled` passes off; the optimized graph.
inline Graph compiled_graph(const Graph& g, const TensorMap& weights,
                            std::vector<std::string> disabled = {}) {
  CompileOptions o;
  o.disabled_passes = std::move(disabled);
  o.verify_each = true;
  return Executable::compile(g, weights, o)->graph();
}

// Compiles and runs with `disabled` passes off.
inline TensorMap run_without(const Graph& g, const TensorMap& inputs, const TensorMap& weights,
                             std::vector<std::string> disabled) {
  CompileOptions o;
  o.disabled_passes = std::move(disabled);
  o.verify_each = true;
  Session s(Executable::compile(g, weights, o));
  return s.run(inputs);
}

// Outputs with and without pass `pass` are bit-identical (`off`: passes off in both runs).
inline ::testing::AssertionResult same_with_and_without(const Graph& g, const TensorMap& inputs,
                                                        const TensorMap& weights,
                                                        const std::string& pass,
                                                        std::vector<std::string> off = {}) {
  TensorMap with = run_without(g, inputs, weights, off);
  off.push_back(pass);
  TensorMap without = run_without(g, inputs, weights, off);
  if (with.size() != without.size()) return ::testing::AssertionFailure() << "output count";
  for (const auto& [name, t] : with) {
    auto r = all_equal(t, without.at(name));
    if (!r) return r << " (output '" << name << "', pass " << pass << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace rlx::testing
