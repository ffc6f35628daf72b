// Structural checker for .mlpackage directories (rlx coreml-check).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/json_depth.h"
#include "mil.h"
#include "model.pb.h"
#include "rlx/coreml.h"

namespace rlx::coreml {
namespace {

namespace fs = std::filesystem;
namespace spec = ::CoreML::Specification;

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

template <typename T>
T get(const std::string& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

struct Checker {
  std::vector<std::string> problems;
  std::string weights;
  bool have_weights = false;
  std::map<std::string, bool> consts;  // bool scalar consts (matmul's transpose flags)
  template <typename... A>
  void bad(const A&... a) {
    std::ostringstream s;
    (s << ... << a);
    problems.push_back(s.str());
  }

  void check_value(const std::string& where, const pb::Value& v) {
    Type t = get_type(v.type());
    if (v.has_blobfilevalue()) {
      const auto& bf = v.blobfilevalue();
      if (bf.filename() != kWeightFile)
        return bad(where, ": blob file '", bf.filename(), "' is not ", kWeightFile);
      if (!have_weights) return bad(where, ": refers to weight.bin, which is missing");
      const uint64_t off = bf.offset();
      if (off % 64 || off + 64 > weights.size())
        return bad(where, ": blob record offset ", off, " is misaligned or outside weight.bin (",
                   weights.size(), " bytes)");
      if (get<uint32_t>(weights, off) != kBlobSentinel)
        return bad(where, ": blob record at ", off, " has a bad sentinel");
      const uint32_t dt = get<uint32_t>(weights, size_t(off + 4));
      const uint64_t size = get<uint64_t>(weights, size_t(off + 8)),
                     data = get<uint64_t>(weights, size_t(off + 16));
      if (dt != blob_dtype_for(t.dt))
        bad(where, ": blob dtype ", dt, " does not match ", type_str(t));
      if (t.is_static() && size != uint64_t(t.numel()) * mil_dtype_size(t.dt))
        bad(where, ": blob holds ", size, " bytes, ", type_str(t), " needs ",
            uint64_t(t.numel()) * mil_dtype_size(t.dt));
      if (data % 64 || data != off + 64)
        bad(where, ": blob data offset ", data, " is not 64-aligned after its record");
      if (data > weights.size() || size > weights.size() - data)
        bad(where, ": blob data [", data, ", +", size, ") runs past the end of weight.bin");
      return;
    }
    if (!v.has_immediatevalue() || !v.immediatevalue().has_tensor())
      return bad(where, ": value has no data");
    const auto& tv = v.immediatevalue().tensor();
    int64_t n = -1;
    if (tv.has_floats()) n = tv.floats().values_size();
    if (tv.has_ints()) n = tv.ints().values_size();
    if (tv.has_bools()) n = tv.bools().values_size();
    if (tv.has_strings()) n = tv.strings().values_size();
    if (tv.has_longints()) n = tv.longints().values_size();
    if (tv.has_bytes())
      n = mil_dtype_size(t.dt) ? int64_t(tv.bytes().values().size() / mil_dtype_size(t.dt)) : -1;
    if (t.is_static() && n != t.numel())
      bad(where, ": inline value has ", n, " elements, ", type_str(t), " needs ", t.numel());
  }

  void check_model(const spec::Model& m) {
    if (!m.has_mlprogram()) return bad("model.mlmodel: not an ML program");
    if (m.specificationversion() < 6)
      bad("model.mlmodel: specificationVersion ", m.specificationversion(),
          " < 6 (ML programs need iOS15)");
    const auto& prog = m.mlprogram();
    if (prog.version() != 1) bad("program version ", prog.version(), " (expected 1)");
    auto it = prog.functions().find("main");
    if (it == prog.functions().end()) return bad("program has no function 'main'");
    const pb::Function& fn = it->second;
    auto bs = fn.block_specializations().find(fn.opset());
    if (bs == fn.block_specializations().end())
      return bad("opset '", fn.opset(), "' has no block specialization");
    int opset = 0;
    try {
      opset = parse_opset(fn.opset());
    } catch (const std::exception& e) {
      bad(e.what());
    }
    if (opset && m.specificationversion() < spec_version_for(opset))
      bad("opset ", fn.opset(), " needs specificationVersion >= ", spec_version_for(opset),
          ", got ", m.specificationversion());
    static const std::regex ident("[A-Za-z_][A-Za-z0-9_@]*");
    std::map<std::string, Type> defined;
    for (const auto& in : fn.inputs()) defined[in.name()] = get_type(in.type());
    const auto& d = m.description();
    if (d.input_size() != fn.inputs_size())
      bad("description has ", d.input_size(), " inputs, main has ", fn.inputs_size());
    for (int i = 0; i < std::min(d.input_size(), fn.inputs_size()); ++i) {
      if (d.input(i).name() != fn.inputs(i).name())
        bad("description input ", i, " is '", d.input(i).name(), "', main's is '",
            fn.inputs(i).name(), "'");
      check_feature("input", d.input(i), get_type(fn.inputs(i).type()));
    }
    for (const auto& op : bs->second.operations()) {
      std::string oname = op.outputs_size() ? op.outputs(0).name() : "?";
      std::string where = op.type() + " '" + oname + "'";
      if (!op.attributes().count("name")) bad(where, ": no name attribute");
      if (op.type() == "const") {
        auto v = op.attributes().find("val");
        if (v != op.attributes().end() && v->second.has_immediatevalue() &&
            v->second.immediatevalue().tensor().has_bools() &&
            v->second.immediatevalue().tensor().bools().values_size() == 1)
          consts[oname] = v->second.immediatevalue().tensor().bools().values(0);
        if (v == op.attributes().end())
          bad(where, ": const without val");
        else
          check_value(where, v->second);
        if (!op.inputs().empty()) bad(where, ": const with inputs");
      }
      if (op.type() == "constexpr_affine_dequantize") {  // int8 weights: parameters as attributes
        if (opset < 6) bad(where, ": needs opset CoreML6");
        for (const char* k : {"quantized_data", "zero_point", "scale", "axis"}) {
          auto v = op.attributes().find(k);
          if (v == op.attributes().end())
            bad(where, ": no ", k, " attribute");
          else
            check_value(where + " " + k, v->second);
        }
        if (!op.inputs().empty()) bad(where, ": constexpr op with inputs");
      }
      if (op.type() == "scaled_dot_product_attention" && opset < 8)
        bad(where, ": needs opset CoreML8");
      std::vector<Type> ins;
      for (const auto& [key, arg] : op.inputs())
        for (const auto& bnd : arg.arguments()) {
          if (bnd.has_value()) continue;
          auto f = defined.find(bnd.name());
          if (f == defined.end())
            bad(where, ": input ", key, " uses '", bnd.name(), "' before it is defined");
          else if (key == "x")
            ins.push_back(f->second);
        }
      for (const auto& o : op.outputs()) {
        if (!std::regex_match(o.name(), ident))
          bad(where, ": output name '", o.name(), "' is not a valid identifier");
        if (defined.count(o.name())) bad(where, ": '", o.name(), "' is defined twice");
        defined[o.name()] = get_type(o.type());
      }
      check_types(op, where, defined);
    }
    const auto& outs = bs->second.outputs();
    if (outs.size() != d.output_size())
      bad("block has ", outs.size(), " outputs, description ", d.output_size());
    for (int i = 0; i < outs.size(); ++i) {
      if (!defined.count(outs[i])) bad("block output '", outs[i], "' is never defined");
      if (i < d.output_size() && d.output(i).name() != outs[i])
        bad("description output ", i, " is '", d.output(i).name(), "', block output is '", outs[i],
            "'");
      if (i < d.output_size() && defined.count(outs[i]))
        check_feature("output", d.output(i), defined.at(outs[i]));
    }
  }

  // A model description entry against the program's type: dtype, rank, static dims and
  // ranges (symbolic dims need a range).
  void check_feature(const char* kind, const spec::FeatureDescription& f, const Type& t) {
    const auto& a = f.type().multiarraytype();
    const std::string where = std::string("description ") + kind + " '" + f.name() + "'";
    static const std::map<int, pb::DataType> dts{{spec::ArrayFeatureType::FLOAT32, pb::FLOAT32},
                                                 {spec::ArrayFeatureType::FLOAT16, pb::FLOAT16},
                                                 {spec::ArrayFeatureType::INT32, pb::INT32},
                                                 {spec::ArrayFeatureType::DOUBLE, pb::FLOAT64}};
    auto it = dts.find(int(a.datatype()));
    if (it == dts.end() || it->second != t.dt)
      bad(where, ": data type ", int(a.datatype()), " vs program ", type_str(t));
    if (a.shape_size() != t.rank())
      return bad(where, ": rank ", a.shape_size(), " vs program ", type_str(t));
    const bool ranged = a.has_shaperange();
    if (ranged && a.shaperange().sizeranges_size() != t.rank())
      bad(where, ": shape range rank differs");
    for (int i = 0; i < t.rank(); ++i) {
      const int64_t dim = t.dims[size_t(i)];
      if (dim >= 0 && a.shape(i) != dim)
        bad(where, ": dim ", i, " is ", a.shape(i), ", program has ", dim);
      if (dim < 0 && !ranged) bad(where, ": symbolic dim ", i, " without a shape range");
    }
  }

  // Declared output types against the inputs, for the ops whose rule is simple.
  void check_types(const pb::Operation& op, const std::string& where,
                   const std::map<std::string, Type>& defined) {
    auto arg = [&](const char* k) -> const Type* {
      auto it = op.inputs().find(k);
      if (it == op.inputs().end() || it->second.arguments_size() != 1) return nullptr;
      auto d = defined.find(it->second.arguments(0).name());
      return d == defined.end() ? nullptr : &d->second;
    };
    if (op.outputs_size() != 1) return;
    const Type out = get_type(op.outputs(0).type());
    static const std::set<std::string> same{
        "relu", "sigmoid", "tanh",    "exp",      "sqrt",       "abs",   "sin", "cos",
        "silu", "gelu",    "softmax", "identity", "layer_norm", "rsqrt", "log", "erf"};
    static const std::set<std::string> bcast{"add",     "sub",     "mul", "real_div",
                                             "maximum", "minimum", "pow"};
    static const std::set<std::string> cmp{"equal",      "not_equal", "less",
                                           "less_equal", "greater",   "greater_equal"};
    const Type* x = arg("x");
    if (same.count(op.type()) && x && (x->dt != out.dt || x->dims != out.dims))
      bad(where, ": declared ", type_str(out), " but input x is ", type_str(*x));
    const Type* y = arg("y");
    if ((bcast.count(op.type()) || cmp.count(op.type())) && x && y) {
      if (x->dt != y->dt) bad(where, ": x is ", type_str(*x), ", y is ", type_str(*y));
      Type want = x->rank() >= y->rank() ? *x : *y;
      want.dims.clear();
      const int n = std::max(x->rank(), y->rank());
      for (int i = 0; i < n; ++i) {
        int ia = i - (n - x->rank()), ib = i - (n - y->rank());
        int64_t a = ia >= 0 ? x->dims[size_t(ia)] : 1, b = ib >= 0 ? y->dims[size_t(ib)] : 1;
        if (a >= 0 && b >= 0 && a != b && a != 1 && b != 1)
          bad(where, ": ", type_str(*x), " and ", type_str(*y), " do not broadcast");
        want.dims.push_back(a == 1 ? b : b == 1 ? a : (a < 0 ? b : a));
      }
      want.dt = cmp.count(op.type()) ? pb::BOOL : x->dt;
      if (want.dt != out.dt || want.dims != out.dims)
        bad(where, ": declared ", type_str(out), ", inputs give ", type_str(want));
    }
    if (op.type() == "reshape" && x && x->is_static() && out.is_static() &&
        x->numel() != out.numel())
      bad(where, ": reshape ", type_str(*x), " to ", type_str(out), " changes the element count");
    // matmul: [..., M, K] x [..., K, N] (transposes per the flags) -> [..., M, N].
    if (op.type() == "matmul" && x && y && x->rank() >= 2 && y->rank() >= 2) {
      auto flag = [&](const char* k) {
        auto it = op.inputs().find(k);
        if (it == op.inputs().end() || !it->second.arguments_size()) return false;
        auto c = consts.find(it->second.arguments(0).name());
        return c != consts.end() && c->second;
      };
      const bool tx = flag("transpose_x"), ty = flag("transpose_y");
      const int64_t m = x->dims[size_t(x->rank() - (tx ? 1 : 2))],
                    kx = x->dims[size_t(x->rank() - (tx ? 2 : 1))];
      const int64_t ky = y->dims[size_t(y->rank() - (ty ? 1 : 2))],
                    n = y->dims[size_t(y->rank() - (ty ? 2 : 1))];
      if (kx >= 0 && ky >= 0 && kx != ky)
        bad(where, ": inner dims differ, ", type_str(*x), " x ", type_str(*y));
      if (x->dt != out.dt || out.rank() != std::max(x->rank(), y->rank()) ||
          (m >= 0 && out.dims[size_t(out.rank() - 2)] != m) ||
          (n >= 0 && out.dims[size_t(out.rank() - 1)] != n))
        bad(where, ": declared ", type_str(out), " for ", type_str(*x), " x ", type_str(*y));
    }
  }
};

}  // namespace

std::vector<std::string> check_package(const std::string& dir) {
  Checker c;
  const fs::path root(dir);
  nlohmann::json man;
  try {
    const std::string text = read_all(root / "Manifest.json");
    check_json_depth(text, "Manifest.json");
    man = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    c.bad("Manifest.json: cannot read or parse (", e.what(), ")");
    return c.problems;
  }
  for (const char* k : {"fileFormatVersion", "itemInfoEntries", "rootModelIdentifier"})
    if (!man.contains(k)) c.bad("Manifest.json: missing key '", k, "'");
  if (!c.problems.empty()) return c.problems;
  std::string root_id =
      man["rootModelIdentifier"].is_string() ? man["rootModelIdentifier"].get<std::string>() : "";
  const auto& entries = man["itemInfoEntries"];
  if (!entries.is_object() || !entries.contains(root_id))
    c.bad("Manifest.json: rootModelIdentifier '", root_id, "' has no entry");
  std::string model_path;
  if (entries.is_object())
    for (const auto& [id, e] : entries.items()) {
      for (const char* k : {"author", "description", "name", "path"})
        if (!e.contains(k) || !e[k].is_string())
          c.bad("Manifest.json: entry ", id, " lacks '", k, "'");
      if (!e.contains("path") || !e["path"].is_string()) continue;
      fs::path p = root / "Data" / e["path"].get<std::string>();
      if (!fs::exists(p))
        c.bad("Manifest.json: entry ", id, " path ", e["path"].get<std::string>(),
              " does not exist");
      if (id == root_id) model_path = p.string();
    }
  if (model_path.empty()) return c.problems;
  fs::path wpath = fs::path(model_path).parent_path() / "weights" / "weight.bin";
  if (fs::exists(wpath)) {
    c.weights = read_all(wpath);
    c.have_weights = true;
    if (c.weights.size() < 64 || get<uint32_t>(c.weights, 4) != 2)
      c.bad("weight.bin: missing MILBlob v2 header");
  }
  spec::Model m;
  if (!m.ParseFromString(read_all(model_path))) {
    c.bad("model.mlmodel: not a valid CoreML model protobuf");
    return c.problems;
  }
  c.check_model(m);
  return c.problems;
}

}  // namespace rlx::coreml
