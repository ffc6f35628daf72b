// Per-op-family import tests: tests/frontends/torch_op_modules.py exports one
// small module per family at every decomposition level (one Python process
// for the whole binary), and every export must import, compile, run and match
// PyTorch's eager outputs within the family's tolerance.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "frontends/torch/lowering.h"
#include "rlx/model.h"
#include "rlx/runtime.h"
#include "support/testing.h"

namespace rlx {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

struct Export {
  std::string name, family, dir, error;
  std::vector<std::string> ops;
};

const std::vector<Export>& exports() {
  static const std::vector<Export> all = [] {
    fs::path out = fs::temp_directory_path() / ("rlx_torch_ops_" + std::to_string(getpid()));
    fs::remove_all(out);
    std::string cmd = std::string("/usr/bin/python3 ") + RLX_SOURCE_DIR +
                      "/tests/frontends/torch_op_modules.py " + out.string() + " 2>" +
                      (out.string() + ".log");
    int rc = std::system(cmd.c_str());
    std::vector<Export> v;
    std::ifstream f(out / "manifest.json");
    if (rc != 0 || !f) {
      v.push_back({"python", "", "", "exporter failed: see " + out.string() + ".log", {}});
      return v;
    }
    json m = json::parse(f);
    // Everything is loaded lazily per case: remove the exports at exit.
    static const std::string keep = out.string();
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(keep, ec);
      fs::remove(keep + ".log", ec);
    });
    for (const auto& e : m) {
      Export x;
      x.name = e.at("name");
      x.family = e.value("family", "");
      x.dir = e.value("dir", "");
      x.error = e.value("error", "");
      if (e.contains("ops")) x.ops = e["ops"].get<std::vector<std::string>>();
      v.push_back(std::move(x));
    }
    return v;
  }();
  return all;
}

struct Tol {
  double atol, rtol, min_cos;
};

// Shape/indexing/creation ops move values: exact. Transcendentals differ
// from libm/Sleef by a few ulp; accumulations (matmul, norms, reductions,
// interpolation weights) differ in summation order: ~1e-5 relative.
Tol tolerance(const std::string& family) {
  static const std::map<std::string, Tol> t = {
      {"shape", {0, 0, 1}},
      {"creation", {0, 0, 1}},
      {"indexing", {0, 0, 1}},
      {"unary", {2e-6, 2e-6, 0.999999}},
      {"binary", {1e-6, 2e-6, 0.999999}},
      {"promotion", {1e-6, 1e-6, 0.999999}},
      {"matmul", {1e-5, 1e-5, 0.999999}},
      {"reduce", {1e-5, 1e-5, 0.999999}},
      {"norm", {1e-5, 1e-5, 0.999999}},
      {"resample", {1e-5, 1e-5, 0.999999}},
      {"pool", {1e-6, 1e-6, 0.999999}},
  };
  auto it = t.find(family);
  return it == t.end() ? Tol{1e-5, 1e-5, 0.99999} : it->second;
}

double cosine(const Tensor& a, const Tensor& b) {
  double dot = 0, na = 0, nb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.item_as_double(i), y = b.item_as_double(i);
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return na == 0 && nb == 0 ? 1 : dot / std::sqrt(na * nb);
}

// Runs one export on its reference inputs; returns "" or the failures.
::testing::AssertionResult check_export(const Export& e) {
  if (!e.error.empty()) return ::testing::AssertionFailure() << "export failed:\n" << e.error;
  Model m = load_model(e.dir);
  TensorMap ref = read_safetensors((fs::path(e.dir) / "reference.safetensors").string());
  TensorMap inputs;
  for (NodeId id : m.graph.inputs()) {
    const std::string& name = m.graph.node(id).name;
    inputs[name] = ref.at("in::" + name);
  }
  Session s(Executable::compile(m.graph, m.weights));
  TensorMap got = s.run(inputs);
  Tol tol = tolerance(e.family);
  std::string failures;
  int outputs = 0;
  for (const auto& [k, want] : ref) {
    if (k.rfind("out::", 0) != 0) continue;
    ++outputs;
    auto it = got.find(k);
    if (it == got.end()) {
      failures += "\n  " + k + ": missing";
      continue;
    }
    const Tensor& g = it->second;
    if (g.dtype() != want.dtype()) {
      failures += "\n  " + k + ": dtype " + g.shape().str() + " vs reference " + want.shape().str();
      continue;
    }
    auto close = testing::all_close(g, want, tol.atol, tol.rtol);
    if (!close) {
      failures += "\n  " + k + ": " + close.message();
      continue;
    }
    if (is_float(want.dtype()) && cosine(g, want) < tol.min_cos)
      failures += "\n  " + k + ": cosine " + std::to_string(cosine(g, want));
  }
  if (outputs == 0) failures += "\n  no reference outputs";
  if (!failures.empty()) return ::testing::AssertionFailure() << failures;
  return ::testing::AssertionSuccess();
}

TEST(TorchOps, EveryFamilyMatchesEager) {
  struct Row {
    int cases = 0, pass = 0;
  };
  std::map<std::string, Row> table;
  for (const Export& e : exports()) {
    SCOPED_TRACE(e.name);
    Row& row = table[e.family];
    ++row.cases;
    bool ok = false;
    try {
      auto r = check_export(e);
      EXPECT_TRUE(r) << e.name;
      ok = bool(r);
    } catch (const std::exception& ex) {
      ADD_FAILURE() << e.name << ": " << ex.what();
    }
    row.pass += ok;
  }
  std::printf("%-10s %6s %6s %10s %10s\n", "family", "cases", "pass", "atol", "rtol");
  for (const auto& [f, row] : table)
    std::printf("%-10s %6d %6d %10.0e %10.0e\n", f.c_str(), row.cases, row.pass, tolerance(f).atol,
                tolerance(f).rtol);
}

// Every op the brief's registry list names (reshape, flatten, linear, ...
// are CompositeImplicit: make_fx always records their decompositions) is produced by at least one
// export, so a registered lowering is never untested by accident.
TEST(TorchOps, ExportsCoverTheRegistryList) {
  std::set<std::string> seen;
  for (const Export& e : exports())
    for (const auto& op : e.ops) {
      std::string base = op.substr(0, op.rfind('.'));  // drop the overload
      seen.insert(base);
    }
  const char* wanted[] = {"view",
                          "_unsafe_view",
                          "unsqueeze",
                          "squeeze",
                          "permute",
                          "transpose",
                          "t",
                          "expand",
                          "slice",
                          "cat",
                          "stack",
                          "clone",
                          "_to_copy",
                          "select",
                          "split_with_sizes",
                          "split",
                          "unbind",
                          "full",
                          "full_like",
                          "scalar_tensor",
                          "constant_pad_nd",
                          "zeros",
                          "zeros_like",
                          "new_zeros",
                          "ones",
                          "ones_like",
                          "new_ones",
                          "empty",
                          "empty_like",
                          "new_empty",
                          "mm",
                          "bmm",
                          "addmm",
                          "baddbmm",
                          "add",
                          "sub",
                          "mul",
                          "div",
                          "rsub",
                          "pow",
                          "clamp",
                          "clamp_min",
                          "clamp_max",
                          "reciprocal",
                          "gelu",
                          "relu",
                          "silu",
                          "sigmoid",
                          "tanh",
                          "exp",
                          "log",
                          "sqrt",
                          "rsqrt",
                          "neg",
                          "abs",
                          "sin",
                          "cos",
                          "erf",
                          "floor",
                          "ceil",
                          "round",
                          "sign",
                          "leaky_relu",
                          "hardtanh",
                          "hardsigmoid",
                          "hardswish",
                          "elu",
                          "softplus",
                          "mish",
                          "le",
                          "ge",
                          "lt",
                          "gt",
                          "eq",
                          "ne",
                          "logical_and",
                          "logical_or",
                          "logical_not",
                          "bitwise_not",
                          "where",
                          "arange",
                          "gather",
                          "index_select",
                          "masked_fill",
                          "tril",
                          "triu",
                          "native_layer_norm",
                          "native_group_norm",
                          "embedding",
                          "_softmax",
                          "_log_softmax",
                          "index",
                          "upsample_nearest2d",
                          "upsample_bilinear2d",
                          "upsample_bicubic2d",
                          "_upsample_bilinear2d_aa",
                          "pixel_shuffle",
                          "pixel_unshuffle",
                          "grid_sampler_2d",
                          "max_pool2d_with_indices",
                          "avg_pool2d",
                          "_adaptive_avg_pool2d",
                          "mean",
                          "sum",
                          "amax",
                          "amin",
                          "var",
                          "var_mean",
                          "cumsum",
                          "topk",
                          "repeat",
                          "roll",
                          "flip"};
  std::string missing;
  for (const char* op : wanted)
    if (!seen.count(std::string("aten.") + op)) missing += std::string(" ") + op;
  EXPECT_TRUE(missing.empty()) << "no export produced:" << missing;
}

// ---- ops torch 1.13 cannot export: hand-written documents, scalar references.

json tensor_meta(const Dims& d) { return {{"shape", d}, {"dtype", "f32"}}; }

// One-node document `op(args..., kwargs)` over f32 inputs named in `inputs`.
TensorMap run_one_node(const std::string& op,
                       const std::vector<std::pair<std::string, Dims>>& inputs, const json& args,
                       const json& kwargs, const Dims& out, const TensorMap& feed) {
  json doc = {{"format", "rlx-torch-ir"}, {"version", 1}, {"decomposition", "core"}};
  doc["inputs"] = json::array();
  for (const auto& [id, d] : inputs) {
    json in = tensor_meta(d);
    in["id"] = id;
    in["dtype"] = std::string(dtype_name(feed.at(id).dtype()));
    doc["inputs"].push_back(in);
  }
  doc["nodes"] = {
      {{"id", "y"}, {"op", op}, {"args", args}, {"kwargs", kwargs}, {"out", tensor_meta(out)}}};
  doc["outputs"] = {{{"ref", "y"}}};
  fs::path dir = fs::temp_directory_path() / ("rlx_torch_hand_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "torch-ir.json") << doc.dump();
  Model m = load_model(dir.string());
  fs::remove_all(dir);
  Session s(Executable::compile(m.graph, m.weights));
  return s.run(feed);
}

json ref(const char* id) { return {{"ref", id}}; }
json num(double v) { return {{"float", v}}; }
json ints(const std::vector<int64_t>& v) {
  json l = json::array();
  for (int64_t x : v) l.push_back({{"int", x}});
  return {{"list", l}};
}
const json kNone = {{"none", true}};

TEST(TorchOpsHandWritten, RmsNorm) {
  Tensor x = testing::random_tensor({2, 3, 8}, DType::F32, 11, -2, 2);
  Tensor w = testing::random_tensor({8}, DType::F32, 12);
  struct Case {
    std::vector<int64_t> norm;
    bool weight;
    std::optional<double> eps;
  };
  for (const Case& k :
       {Case{{8}, true, 1e-6}, Case{{8}, false, std::nullopt}, Case{{3, 8}, false, 1e-3}}) {
    SCOPED_TRACE(k.norm.size());
    json args = {ref("x"), ints(k.norm), k.weight ? ref("w") : kNone, k.eps ? num(*k.eps) : kNone};
    std::vector<std::pair<std::string, Dims>> ins{{"x", {2, 3, 8}}};
    TensorMap feed{{"x", x}};
    if (k.weight) {
      ins.push_back({"w", {8}});
      feed["w"] = w;
    }
    Tensor y = run_one_node("aten.rms_norm.default", ins, args, json::object(), {2, 3, 8}, feed)
                   .at("out::0");
    double eps = k.eps ? *k.eps : 1.1920928955078125e-07;  // finfo(f32).eps
    int64_t n = 1;
    for (int64_t d : k.norm) n *= d;
    Tensor want({2, 3, 8}, DType::F32);
    const float* xp = x.data<float>();
    for (int64_t r = 0; r < 48 / n; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(xp[r * n + i]) * xp[r * n + i];
      double inv = 1 / std::sqrt(ss / n + eps);
      for (int64_t i = 0; i < n; ++i)
        want.data<float>()[r * n + i] =
            float(xp[r * n + i] * inv * (k.weight ? w.data<float>()[i % 8] : 1.0));
    }
    EXPECT_TRUE(testing::all_close(y, want, 1e-6, 1e-5));
  }
}

// softmax(q k^T * scale + mask) v over [B, H, L, E] with k/v [B, H, S, E].
Tensor sdpa_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor* mask,
                      bool causal, double scale) {
  Dims qd = q.dims();
  int64_t L = qd[qd.size() - 2], E = qd.back(), S = k.dims()[k.dims().size() - 2];
  int64_t BH = q.numel() / (L * E);
  Tensor out(qd, DType::F32);
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(static_cast<size_t>(S));
      double mx = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e)
          dot +=
              double(q.data<float>()[(bh * L + i) * E + e]) * k.data<float>()[(bh * S + j) * E + e];
        dot *= scale;
        if (mask && mask->dtype() == DType::Bool)
          dot = mask->data<bool>()[i * S + j] ? dot : -INFINITY;
        else if (mask)
          dot += mask->data<float>()[i * S + j];
        if (causal && j > i) dot = -INFINITY;
        s[size_t(j)] = dot;
        mx = std::max(mx, dot);
      }
      double z = 0;
      for (auto& x : s) z += (x = std::exp(x - mx));
      for (int64_t e = 0; e < E; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < S; ++j)
          acc += s[size_t(j)] / z * v.data<float>()[(bh * S + j) * E + e];
        out.data<float>()[(bh * L + i) * E + e] = float(acc);
      }
    }
  return out;
}

TEST(TorchOpsHandWritten, ScaledDotProductAttention) {
  struct Case {
    const char* name;
    Dims q, kv;
    int mask;  // 0 none, 1 float [L,S], 2 bool [L,S]
    bool causal;
    std::optional<double> scale;
  };
  for (const Case& k : {Case{"plain", {2, 2, 4, 8}, {2, 2, 5, 8}, 0, false, std::nullopt},
                        Case{"causal", {1, 3, 5, 4}, {1, 3, 5, 4}, 0, true, std::nullopt},
                        Case{"causal_rect", {1, 2, 3, 4}, {1, 2, 6, 4}, 0, true, std::nullopt},
                        Case{"float_mask", {2, 2, 4, 8}, {2, 2, 5, 8}, 1, false, std::nullopt},
                        Case{"bool_mask", {2, 2, 4, 8}, {2, 2, 5, 8}, 2, false, 0.3},
                        Case{"rank3", {3, 4, 8}, {3, 6, 8}, 0, false, std::nullopt}}) {
    SCOPED_TRACE(k.name);
    Tensor q = testing::random_tensor(k.q, DType::F32, 21);
    Tensor kk = testing::random_tensor(k.kv, DType::F32, 22);
    Tensor v = testing::random_tensor(k.kv, DType::F32, 23);
    int64_t L = k.q[k.q.size() - 2], S = k.kv[k.kv.size() - 2];
    std::vector<std::pair<std::string, Dims>> ins{{"q", k.q}, {"k", k.kv}, {"v", k.kv}};
    TensorMap feed{{"q", q}, {"k", kk}, {"v", v}};
    Tensor mask;
    json margs = kNone;
    if (k.mask) {
      mask = k.mask == 1 ? testing::random_tensor({L, S}, DType::F32, 24, -3, 3)
                         : testing::random_tensor({L, S}, DType::Bool, 25);
      if (k.mask == 2)
        for (int64_t i = 0; i < L; ++i) mask.data<bool>()[i * S] = true;  // no empty rows
      feed["m"] = mask;
      margs = ref("m");
    }
    json args = {ref("q"), ref("k"), ref("v"), margs, num(0.0), {{"bool", k.causal}}};
    json kwargs = json::object();
    if (k.scale) kwargs["scale"] = num(*k.scale);
    if (k.mask) {
      ins.push_back({"m", {L, S}});
    }
    TensorMap got =
        run_one_node("aten.scaled_dot_product_attention.default", ins, args, kwargs, k.q, feed);
    double scale = k.scale ? *k.scale : 1 / std::sqrt(double(k.q.back()));
    Tensor want = sdpa_reference(q, kk, v, k.mask ? &mask : nullptr, k.causal, scale);
    EXPECT_TRUE(testing::all_close(got.at("out::0"), want, 1e-5, 1e-5));
  }
}

}  // namespace
}  // namespace rlx
