// Driver: coverage check, IR -> MIL lowering, model description and the
// .mlpackage writer (Manifest.json, model.mlmodel, weights/weight.bin).
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <nlohmann/json.hpp>
#include <set>

#include "io/atomic_write.h"
#include "lower.h"
#include "model.pb.h"
#include "rlx/coreml.h"
#include "rlx/error.h"

namespace rlx::coreml {

namespace spec = ::CoreML::Specification;

int parse_opset(const std::string& s) {
  for (int v = 5; v <= 8; ++v)
    if (s == opset_name(v)) return v;
  throw make_error("coreml: unknown opset '", s, "' (expected CoreML5..CoreML8)");
}
std::string opset_name(int opset) { return "CoreML" + std::to_string(opset); }
int spec_version_for(int opset) { return opset + 1; }

const LowerTable& lower_table() {
  static const LowerTable t = [] {
    LowerTable t{};
    register_elementwise(t);
    register_shape(t);
    register_nn(t);
    register_grad(t);
    register_indexing(t);
    register_rope(t);
    register_resample(t);
    register_quant(t);
    register_sequence(t);
    return t;
  }();
  return t;
}

Support supports(const Node& n) {
  if (n.op == Op::Input || n.op == Op::Result || lower_table().has(n.op)) return Support::yes();
  return Support::no("no MIL lowering");
}

std::map<std::string, int> unsupported_ops(const Graph& g) {
  std::map<std::string, int> missing;
  for (const Node& n : g.nodes())
    if (!supports(n)) ++missing[op_name(n.op)];
  return missing;
}

std::vector<std::string> supported_op_names() {
  std::vector<std::string> r{"input"};
  for (int i = 0; i < num_ops(); ++i)
    if (lower_table().has(Op(i)) || Op(i) == Op::Result) r.push_back(op_name(Op(i)));
  return r;
}

// ---- Lowering helpers

pb::DataType Lowering::dtype(DType t) const {
  switch (t) {
    case DType::F32:
    case DType::F64:
    case DType::BF16:
      return fp16 ? pb::FLOAT16 : pb::FLOAT32;
    case DType::F16:
      return pb::FLOAT16;
    case DType::Bool:
      return pb::BOOL;
    default:
      return pb::INT32;  // MIL computes integers in int32
  }
}

Type Lowering::type_of(const Shape& s) const {
  Type t{dtype(s.dtype), {}};
  for (const Dim& d : s.dims) t.dims.push_back(d.is_static() ? d.value : -1);
  return t;
}

Type broadcast_type(const Type& a, const Type& b, pb::DataType dt) {
  Type r{dt, {}};
  const int n = std::max(a.rank(), b.rank());
  for (int i = 0; i < n; ++i) {
    int ia = i - (n - a.rank()), ib = i - (n - b.rank());
    int64_t da = ia >= 0 ? a.dims[size_t(ia)] : 1, db = ib >= 0 ? b.dims[size_t(ib)] : 1;
    r.dims.push_back(da == 1 ? db : db == 1 ? da : (da < 0 ? db : da));
  }
  return r;
}

Val Lowering::unary(const std::string& type, const Val& x, const std::string& h) {
  return b.op(type, {{"x", x}}, x.type, h);
}

Val Lowering::binary(const std::string& type, const Val& x, const Val& y, const std::string& h) {
  static const std::set<std::string> cmp{"equal",      "not_equal", "less",
                                         "less_equal", "greater",   "greater_equal"};
  return b.op(type, {{"x", x}, {"y", y}},
              broadcast_type(x.type, y.type, cmp.count(type) ? pb::BOOL : x.type.dt), h);
}

Val Lowering::reduce(const std::string& type, const Val& x, std::vector<int64_t> axes, bool keep,
                     const std::string& h) {
  Type t{x.type.dt, {}};
  std::vector<bool> red(size_t(x.type.rank()), false);
  for (auto& a : axes) red[size_t(normalize_axis(a, x.type.rank()))] = true;
  for (int i = 0; i < x.type.rank(); ++i)
    if (!red[size_t(i)] || keep) t.dims.push_back(red[size_t(i)] ? 1 : x.type.dims[size_t(i)]);
  return b.op(
      type,
      {{"x", x}, {"axes", b.ints(axes, h + "_axes")}, {"keep_dims", b.boolean(keep, h + "_keep")}},
      t, h);
}

Val Lowering::reshape(const Val& x, const std::vector<int64_t>& shape, const std::string& h) {
  Type t{x.type.dt, shape};
  if (x.type.is_static())  // resolve a -1 so the declared type is exact
    for (auto& d : t.dims)
      if (d < 0) {
        int64_t known = 1;
        for (int64_t e : shape) known *= e < 0 ? 1 : e;
        d = known ? x.type.numel() / known : 0;
      }
  return b.op("reshape", {{"x", x}, {"shape", b.ints(shape, h + "_shape")}}, t, h);
}

Val Lowering::activation(Epilogue act, const Val& x, const std::string& h) {
  auto gelu = [&](const char* mode) {
    return b.op("gelu", {{"x", x}, {"mode", b.string(mode, h + "_mode")}}, x.type, h);
  };
  switch (act) {
    case Epilogue::none:
      return b.op("identity", {{"x", x}}, x.type, h);
    case Epilogue::relu:
      return unary("relu", x, h);
    case Epilogue::relu6:
      return b.op("clip",
                  {{"x", x},
                   {"alpha", scalar_like(0, x, h + "_lo")},
                   {"beta", scalar_like(6, x, h + "_hi")}},
                  x.type, h);
    case Epilogue::gelu:
      return gelu("EXACT");
    case Epilogue::gelu_tanh:
      return gelu("TANH_APPROXIMATION");
    case Epilogue::silu:
      return unary("silu", x, h);
    case Epilogue::sigmoid:
      return unary("sigmoid", x, h);
    case Epilogue::tanh:
      return unary("tanh", x, h);
    case Epilogue::hard_swish: {  // x * sigmoid_hard(x, 1/6, 1/2), as the hard_swish op lowers
      Val s = b.op("sigmoid_hard",
                   {{"x", x},
                    {"alpha", scalar_like(1.0 / 6, x, h + "_alpha")},
                    {"beta", scalar_like(0.5, x, h + "_beta")}},
                   x.type, h + "_hs");
      return b.op("mul", {{"x", x}, {"y", s}}, x.type, h);
    }
  }
  throw make_error("coreml: bad epilogue");
}

Val Lowering::cast(const Val& x, pb::DataType dt, const std::string& h) {
  return b.op("cast", {{"x", x}, {"dtype", b.string(mil_dtype_name(dt), h + "_dtype")}},
              Type{dt, x.type.dims}, h);
}

Val Lowering::normalize(const Val& x, const std::vector<int64_t>& axes, double eps,
                        const std::string& h) {
  Val mean = reduce("reduce_mean", x, axes, true, h + "_mean");
  Val d = binary("sub", x, mean, h + "_centered");
  Val var = reduce("reduce_mean", binary("mul", d, d, h + "_sq"), axes, true, h + "_var");
  Val inv = b.op("rsqrt",
                 {{"x", binary("add", var, scalar_like(eps, x, h + "_eps"), h + "_ve")},
                  {"epsilon", scalar_like(0, x, h + "_eps0")}},
                 var.type, h + "_inv");
  return binary("mul", d, inv, h + "_norm");
}

// ---- driver

namespace {

spec::ArrayFeatureType::ArrayDataType array_dtype(pb::DataType dt) {
  switch (dt) {
    case pb::FLOAT32:
      return spec::ArrayFeatureType::FLOAT32;
    case pb::FLOAT16:
      return spec::ArrayFeatureType::FLOAT16;
    case pb::INT32:
      return spec::ArrayFeatureType::INT32;
    default:
      throw make_error("coreml: model inputs/outputs cannot be ", mil_dtype_name(dt));
  }
}

void describe(spec::FeatureDescription* f, const std::string& name, const Type& t) {
  f->set_name(name);
  auto* a = f->mutable_type()->mutable_multiarraytype();
  a->set_datatype(array_dtype(t.dt));
  bool flexible = !t.is_static();
  for (int64_t d : t.dims) a->add_shape(d < 0 ? 1 : d);  // default shape: symbolic dims at 1
  if (flexible)
    for (int64_t d : t.dims) {
      auto* r = a->mutable_shaperange()->add_sizeranges();
      r->set_lowerbound(d < 0 ? 1 : uint64_t(d));
      r->set_upperbound(d < 0 ? -1 : d);
    }
}

std::string serialize(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream s(&out);
    google::protobuf::io::CodedOutputStream c(&s);
    c.SetSerializationDeterministic(true);  // sorted map keys: byte-identical packages
    m.SerializeToCodedStream(&c);
  }
  return out;
}

// A UUID-shaped identifier derived from content (FNV-1a), so packages are reproducible.
std::string content_id(const std::string& salt, const std::string& a, const std::string& b) {
  auto fnv = [](uint64_t h, const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
  };
  uint64_t h1 = fnv(fnv(fnv(0xcbf29ce484222325ull, salt), a), b);
  uint64_t h2 = fnv(fnv(fnv(h1 ^ 0x9e3779b97f4a7c15ull, b), a), salt);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08X-%04X-4%03X-8%03X-%012llX", uint32_t(h1 >> 32),
                uint32_t(h1 >> 16) & 0xffff, uint32_t(h1) & 0xfff, uint32_t(h2 >> 48) & 0xfff,
                (unsigned long long)(h2 & 0xffffffffffffull));
  return buf;
}

}  // namespace

void export_package(const Graph& g, const TensorMap& weights, const std::string& dir,
                    const ExportOptions& opts) {
  RLX_CHECK(opts.opset >= 5 && opts.opset <= 8, "coreml: opset must be CoreML5..CoreML8, got ",
            opts.opset);
  auto missing = unsupported_ops(g);
  if (!missing.empty()) {
    std::string list;
    int total = 0;
    for (const auto& [op, c] : missing) {
      list += (list.empty() ? "" : ", ") + op + " x" + std::to_string(c);
      total += c;
    }
    throw make_error("coreml: cannot lower ", total, " node(s) of ", missing.size(),
                     " op kind(s): ", list);
  }
  spec::Model model;
  model.set_specificationversion(spec_version_for(opts.opset));
  auto* fn = &(*model.mutable_mlprogram()->mutable_functions())["main"];
  model.mutable_mlprogram()->set_version(1);
  fn->set_opset(opset_name(opts.opset));
  pb::Block* block = &(*fn->mutable_block_specializations())[opset_name(opts.opset)];
  BlobWriter blobs;
  Builder b(block, &blobs, opts.opset);
  Lowering L{g,
             weights,
             b,
             opts.fp16,
             std::vector<Val>(g.size()),
             std::vector<std::vector<Val>>(g.size())};
  auto* desc = model.mutable_description();

  // Function inputs keep their graph names; fp16 programs take fp32 and cast.
  for (NodeId id : g.inputs()) {
    const Node& n = g.node(id);
    std::string name = sanitize_name(n.name);
    RLX_CHECK(!name.empty() && name == n.name, "coreml: input name '", n.name,
              "' is not a valid MIL identifier");
    b.reserve(name);
    Type t = L.type_of(n);
    RLX_CHECK(t.dt != pb::BOOL, "coreml: bool input '", n.name, "' is not supported");
    Type io = t;
    if (io.dt == pb::FLOAT16) io.dt = pb::FLOAT32;
    auto* nv = fn->add_inputs();
    nv->set_name(name);
    set_type(nv->mutable_type(), io);
    describe(desc->add_input(), name, io);
    L.vals[size_t(id)] = Val{name, io};
    if (io.dt != t.dt) L.vals[size_t(id)] = L.cast(Val{name, io}, t.dt, name + "_fp16");
  }
  for (const auto& out : g.outputs()) b.reserve(sanitize_name(out.name));
  for (const Node& n : g.nodes()) {
    if (n.op == Op::Input) continue;
    try {
      if (n.op == Op::Result)  // its node made every output
        L.vals[size_t(n.id)] =
            L.results.at(size_t(n.inputs[0])).at(size_t(n.attrs_as<ResultAttrs>().index));
      else if (has_results(n.op))
        L.results[size_t(n.id)] = lower_table().many[size_t(n.op)](L, n);
      else
        L.vals[size_t(n.id)] = lower_table().one[size_t(n.op)](L, n);
    } catch (const Error& e) {
      throw make_error("coreml: lowering ", node_context(g, n), ": ", e.what());
    }
  }
  // Outputs: named after the graph outputs; fp16 goes back to fp32 and bool to int32.
  std::set<std::string> out_names;
  for (const auto& out : g.outputs()) {
    std::string name = sanitize_name(out.name);
    RLX_CHECK(out_names.insert(name).second, "coreml: output name '", out.name, "' is used twice");
    b.release(name);  // reserved above so no temporary takes it
    const Val& v = L.vals[size_t(out.node)];
    pb::DataType dt = v.type.dt == pb::FLOAT16 ? pb::FLOAT32
                      : v.type.dt == pb::BOOL  ? pb::INT32
                                               : v.type.dt;
    Type t{dt, v.type.dims};
    Val o = dt == v.type.dt
                ? b.op("identity", {{"x", v}}, t, name)
                : b.op("cast", {{"x", v}, {"dtype", b.string(mil_dtype_name(dt), name + "_dtype")}},
                       t, name);
    RLX_CHECK(o.name == name, "coreml: output name '", out.name, "' collides with another value");
    block->add_outputs(o.name);
    describe(desc->add_output(), o.name, t);
  }
  desc->mutable_metadata()->set_author("rlx");
  (*desc->mutable_metadata()->mutable_userdefined())["com.github.rlx.opset"] =
      opset_name(opts.opset);

  const std::string model_bytes = serialize(model), weight_bytes = blobs.bytes();
  const std::string model_id = content_id("model", model_bytes, weight_bytes);
  const std::string weights_id = content_id("weights", model_bytes, weight_bytes);
  nlohmann::json manifest = {{"fileFormatVersion", "1.0.0"},
                             {"itemInfoEntries",
                              {{model_id,
                                {{"author", "com.apple.CoreML"},
                                 {"description", "CoreML Model Specification"},
                                 {"name", "model.mlmodel"},
                                 {"path", "com.apple.CoreML/model.mlmodel"}}},
                               {weights_id,
                                {{"author", "com.apple.CoreML"},
                                 {"description", "CoreML Model Weights"},
                                 {"name", "weights"},
                                 {"path", "com.apple.CoreML/weights"}}}}},
                             {"rootModelIdentifier", model_id}};

  // Written as a whole or not at all: a failure midway leaves neither a
  // partial package nor a damaged previous one.
  const std::string manifest_text = manifest.dump(2) + "\n";
  io::write_dir_atomic(dir, {{"Manifest.json", manifest_text},
                             {"Data/com.apple.CoreML/model.mlmodel", model_bytes},
                             {"Data/com.apple.CoreML/weights/weight.bin", weight_bytes}});
}

}  // namespace rlx::coreml
