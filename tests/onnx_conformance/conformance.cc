// ONNX node conformance: every case under Debian's libonnx-testdata
// (data/node/<case>/model.onnx + test_data_set_*/input_*.pb, output_*.pb) is
// imported with load_model, compiled for the CPU backend and run; outputs are
// compared with the expected TensorProtos. Each case runs in a child process,
// so a crash is a result ("crash: signal 11"), not the end of the run.
//
//   rlx_onnx_conformance DATA_DIR EXPECTED_FILE [--update] [--filter SUBSTR] [-v]
//
// EXPECTED_FILE lists every case: "name<TAB>pass" or "name<TAB>reason". The
// run fails (exit 1) when a case listed as passing no longer passes; cases
// that newly pass are printed (rerun with --update to record them). Exit 77
// (ctest: skipped) when DATA_DIR does not exist.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "frontends/onnx/import.h"
#include "io/onnx/model.h"
#include "rlx/model.h"
#include "rlx/runtime.h"

namespace fs = std::filesystem;
using namespace rlx;

namespace {

std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\t' || ch == '\r') ch = ' ';
  if (s.size() > 300) s = s.substr(0, 297) + "...";
  return s;
}

// Classifies an error message into a reason that names its kind.
std::string reason_of(const std::string& stage, const std::string& msg) {
  std::string kind = stage;
  if (msg.find("unsupported op kind") != std::string::npos)
    kind = "unsupported op";
  else if (msg.find("rlx does not support") != std::string::npos ||
           msg.find("is not supported by rlx") != std::string::npos ||
           msg.find("rlx has no such dtype") != std::string::npos)
    kind = "dtype";
  else if (msg.find("unsupported:") != std::string::npos ||
           msg.find("is not supported") != std::string::npos)
    kind = "unsupported attribute";
  return kind + ": " + one_line(msg);
}

bool near(double got, double want, DType t) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  if (!is_float(t)) return got == want;
  // The ONNX backend test's own tolerances (onnx/backend/test/runner:
  // rtol 1e-3, atol 1e-7); the node tests' expected values are float32
  // results of NumPy references, some rounded to 4 digits.
  const double rtol = t == DType::F16 || t == DType::BF16 ? 1e-2 : 1e-3;
  const double atol = t == DType::F16 || t == DType::BF16 ? 1e-3 : 1e-7;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

std::vector<fs::path> sorted_pb(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> r;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) r.push_back(e.path());
  std::sort(r.begin(), r.end(), [&](const fs::path& a, const fs::path& b) {
    auto num = [&](const fs::path& p) {
      return std::stoi(p.stem().string().substr(prefix.size()));
    };
    return num(a) < num(b);
  });
  return r;
}

// The graph inputs a case's data sets feed, in file order (initializers excluded).
std::vector<std::string> declared_inputs(const onnx::Model& om) {
  std::vector<std::string> r;
  for (const auto& vi : om.graph.inputs) {
    bool init = false;
    for (const auto& [n, t] : om.graph.initializers) init = init || n == vi.name;
    if (!init) r.push_back(vi.name);
  }
  return r;
}

// Inputs that act as parameters rather than data: not the first input of any
// node (axes, pads, shapes, scales, k, ...; NonMaxSuppression's scores are data), any input of
// Range, ConstantOfShape and the window functions (their size), or a Loop's trip count and
// condition; and, through any chain of nodes, values used only to compute such parameters (a window
// function's size goes through Cast and Sub before it reaches Range). The
// retry freezes the graph inputs among them to the data set's values.
std::set<std::string> parameter_inputs(const onnx::Model& om) {
  const auto& nodes = om.graph.nodes;
  std::set<std::string> outputs;
  for (const auto& o : om.graph.outputs) outputs.insert(o.name);
  std::vector<bool> param_only(nodes.size(), false);  // nodes computing parameters only
  std::set<std::string> data, param;
  for (bool grew = true; grew;) {
    data.clear();
    param.clear();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const auto& n = nodes[i];
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        const bool slot_is_data =
            n.op_type == "Loop" ? k >= 2
                                : (k == 0 || (k == 1 && n.op_type == "NonMaxSuppression")) &&
                                      n.op_type != "Range" && n.op_type != "ConstantOfShape" &&
                                      n.op_type.find("Window") == std::string::npos;
        (slot_is_data && !param_only[i] ? data : param).insert(n.inputs[k]);
      }
    }
    grew = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (param_only[i] || nodes[i].outputs.empty()) continue;
      bool only = true;
      for (const auto& o : nodes[i].outputs)
        only = only && param.count(o) && !data.count(o) && !outputs.count(o);
      if (only) param_only[i] = grew = true;
    }
  }
  std::set<std::string> r;
  for (const auto& p : param)
    if (!data.count(p)) r.insert(p);
  return r;
}

std::string compare(const Graph& g, const TensorMap& got, const std::vector<Tensor>& want) {
  const auto& outs = g.outputs();
  if (outs.size() != want.size())
    return "mismatch: " + std::to_string(outs.size()) + " outputs, expected " +
           std::to_string(want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const Tensor& t = got.at(outs[k].name);
    const Tensor& w = want[k];
    if (t.dims() != w.dims())
      return "mismatch: output " + outs[k].name + " is " + t.shape().str() + ", expected " +
             w.shape().str();
    if (t.dtype() != w.dtype())
      return "mismatch: output " + outs[k].name + " dtype " + std::string(dtype_name(t.dtype())) +
             ", expected " + std::string(dtype_name(w.dtype()));
    for (int64_t i = 0; i < w.numel(); ++i)
      if (!near(t.item_as_double(i), w.item_as_double(i), w.dtype())) {
        std::ostringstream os;
        os.precision(9);
        os << "mismatch: output " << outs[k].name << " element " << i << " is "
           << t.item_as_double(i) << ", expected " << w.item_as_double(i);
        return os.str();
      }
  }
  return "pass";
}

// Runs one case in this process: "pass" or the reason it does not. The
// model is imported as a user would (load_model); when that fails because a
// parameter (axes, a shape, ...) is a graph input, the case is retried with
// those inputs frozen to each data set's values ("pass (frozen inputs: ...)").
std::string run_case(const fs::path& dir) {
  const std::string model_path = (dir / "model.onnx").string();
  bool freeze = false;
  Model m;
  try {
    m = load_model(model_path);
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    if (msg.find("known at import") == std::string::npos) return reason_of("import", msg);
    freeze = true;
  }
  onnx::Model om;
  std::vector<std::string> declared;
  std::set<std::string> params;
  try {
    om = onnx::read_model(model_path);
    declared = declared_inputs(om);
    params = parameter_inputs(om);
  } catch (const std::exception& e) {
    return reason_of("import", e.what());
  }
  std::shared_ptr<Executable> exe;
  if (!freeze) {
    try {
      exe = Executable::compile(m.graph, m.weights);
    } catch (const std::exception& e) {
      return reason_of("compile", e.what());
    }
  }
  std::string frozen_names;
  int sets = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_directory() || e.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
    ++sets;
    TensorMap feeds, frozen;
    std::vector<Tensor> want;
    try {
      auto ins = sorted_pb(e.path(), "input_");
      for (size_t k = 0; k < ins.size() && k < declared.size(); ++k) {
        Tensor t = onnx::read_tensor(ins[k].string());
        (freeze && params.count(declared[k]) ? frozen : feeds)[declared[k]] = t;
      }
      for (const auto& p : sorted_pb(e.path(), "output_"))
        want.push_back(onnx::read_tensor(p.string()));
    } catch (const std::exception& ex) {
      return reason_of("test data", ex.what());
    }
    if (freeze) {
      try {
        m = import_onnx(om, LoadOptions{.frozen_inputs = frozen});
      } catch (const std::exception& ex) {
        return reason_of("import", ex.what());
      }
      try {
        exe = Executable::compile(m.graph, m.weights);
      } catch (const std::exception& ex) {
        return reason_of("compile", ex.what());
      }
      frozen_names.clear();
      for (const auto& [n, t] : frozen) frozen_names += (frozen_names.empty() ? "" : ", ") + n;
    }
    // rlx drops inputs no node reads (an omitted optional input): feed only its own.
    std::set<std::string> graph_inputs;
    for (NodeId id : m.graph.inputs()) graph_inputs.insert(m.graph.node(id).name);
    for (auto it = feeds.begin(); it != feeds.end();)
      it = graph_inputs.count(it->first) ? std::next(it) : feeds.erase(it);
    TensorMap got;
    try {
      Session s(exe);
      got = s.run(feeds);
    } catch (const std::exception& ex) {
      return reason_of("run", ex.what());
    }
    const std::string r = compare(m.graph, got, want);
    if (r != "pass") return r;
  }
  if (!sets) return "test data: no test_data_set_*";
  return freeze ? "pass (frozen inputs: " + frozen_names + ")" : "pass";
}

// run_case in a child process with a time limit.
std::string run_isolated(const fs::path& dir) {
  int fds[2];
  if (pipe(fds) != 0) return "runner: pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(20);
    std::string r;
    try {
      r = run_case(dir);
    } catch (const std::exception& e) {
      r = "runner: " + one_line(e.what());
    }
    (void)!write(fds[1], r.data(), r.size());
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    return WTERMSIG(status) == SIGALRM ? "timeout: over 20 s"
                                       : "crash: signal " + std::to_string(WTERMSIG(status));
  return out.empty() ? "runner: no result" : out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr
        << "usage: rlx_onnx_conformance DATA_DIR EXPECTED_FILE [--update] [--filter S] [-v]\n";
    return 2;
  }
  const fs::path data(argv[1]);
  const std::string expected_file = argv[2];
  bool update = false, verbose = false;
  std::string filter;
  for (int k = 3; k < argc; ++k) {
    const std::string a = argv[k];
    if (a == "--update")
      update = true;
    else if (a == "-v")
      verbose = true;
    else if (a == "--filter" && k + 1 < argc)
      filter = argv[++k];
  }
  if (!fs::is_directory(data)) {
    std::cout << "skipped: " << data << " does not exist (apt-get install libonnx-testdata)\n";
    return 77;
  }
  std::map<std::string, std::string> expected;
  {
    std::ifstream f(expected_file);
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      const auto tab = line.find('\t');
      if (tab != std::string::npos) expected[line.substr(0, tab)] = line.substr(tab + 1);
    }
  }
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(data))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        e.path().filename().string().find(filter) != std::string::npos)
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());

  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, std::string> results;
  std::map<std::string, int> by_kind;
  int passed = 0, frozen_passes = 0, unsupported_op = 0, regressions = 0, improvements = 0;
  for (const auto& dir : cases) {
    const std::string name = dir.filename().string();
    std::string r = run_isolated(dir);
    // Messages name files relative to DATA_DIR, so the list does not depend on where it lives.
    const std::string prefix = (data / "").string();
    for (size_t at; (at = r.find(prefix)) != std::string::npos;) r.erase(at, prefix.size());
    results[name] = r;
    const std::string kind =
        r.rfind("pass (", 0) == 0 ? "pass (frozen inputs)" : r.substr(0, r.find(':'));
    ++by_kind[kind];
    passed += r.rfind("pass", 0) == 0;
    frozen_passes += r.rfind("pass (", 0) == 0;
    unsupported_op += kind == "unsupported op";
    auto it = expected.find(name);
    const bool was_pass = it != expected.end() && it->second.rfind("pass", 0) == 0;
    const bool is_pass = r.rfind("pass", 0) == 0;
    if (was_pass && !is_pass) {
      ++regressions;
      std::cout << "REGRESSION " << name << ": " << r << "\n";
    } else if (!was_pass && is_pass) {
      ++improvements;
      std::cout << "newly passing " << name << "\n";
    } else if (verbose) {
      std::cout << name << ": " << r << "\n";
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int total = int(cases.size()), in_scope = total - unsupported_op;
  std::cout << "ONNX node conformance: " << passed << " passed / " << in_scope
            << " in scope (every op has a lowering) / " << total << " cases (" << frozen_passes
            << " of the passes with parameter inputs frozen at import), " << secs << " s\n";
  for (const auto& [kind, count] : by_kind) std::cout << "  " << kind << ": " << count << "\n";
  if (update) {
    std::ofstream f(expected_file);
    f << "# ONNX node conformance (libonnx-testdata "
      << "1.12): every case and its result.\n"
      << "# Regenerate: build/tests/rlx_onnx_conformance /usr/share/libonnx-testdata/data/node "
         "tests/onnx_conformance/expected.txt --update\n"
      << "# " << passed << " passed / " << in_scope << " in scope / " << total << " cases; "
      << frozen_passes << " passes froze parameter inputs (axes, shapes, ...) at import\n";
    for (const auto& [name, r] : results) f << name << "\t" << r << "\n";
    std::cout << "wrote " << expected_file << "\n";
    return 0;
  }
  if (improvements) std::cout << improvements << " case(s) newly pass: rerun with --update\n";
  if (regressions) {
    std::cout << regressions << " case(s) listed as passing fail now\n";
    return 1;
  }
  return 0;
}
