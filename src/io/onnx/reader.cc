// ONNX ModelProto reader: protobuf parsing with a nesting limit and a size
// limit, then conversion to the plain structs of model.h.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <climits>
#include <filesystem>

#include "io/onnx/convert.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace fs = std::filesystem;
namespace pb = google::protobuf;

std::string Attribute::kind_name() const {
  static const char* names[] = {"UNDEFINED", "FLOAT",  "INT",  "STRING",  "TENSOR",
                                "GRAPH",     "FLOATS", "INTS", "STRINGS", "other"};
  return names[kind];
}

const Attribute* Node::attr(std::string_view n) const {
  for (const auto& a : attributes)
    if (a.name == n) return &a;
  return nullptr;
}

std::string Node::label(size_t index) const {
  return (name.empty() ? "node #" + std::to_string(index) : "node '" + name + "'") + " (" +
         (domain.empty() || domain == "ai.onnx" ? "" : domain + ".") + op_type + ")";
}

int64_t Model::opset() const {
  auto it = opsets.find("");
  if (it == opsets.end()) it = opsets.find("ai.onnx");
  return it == opsets.end() ? 1 : it->second;
}

namespace {

// Parses one message from memory with the nesting and size limits.
void parse(pb::MessageLite& msg, const void* data, size_t size, const std::string& what) {
  RLX_CHECK(size <= size_t(INT_MAX), what, ": ", size,
            " bytes is above protobuf's 2 GiB limit (large models keep weights as external data)");
  pb::io::ArrayInputStream raw(data, int(size));
  pb::io::CodedInputStream in(&raw);
  in.SetRecursionLimit(kMaxNesting);
  RLX_CHECK(msg.ParseFromCodedStream(&in) && in.ConsumedEntireMessage(), what, ": not a valid ",
            msg.GetTypeName(), " (truncated, corrupt, or nested deeper than ", kMaxNesting,
            " levels)");
}

ValueInfo to_value_info(const rlx_onnx::ValueInfoProto& v) {
  ValueInfo r;
  r.name = v.name();
  if (!v.type().has_tensor_type()) return r;
  const auto& tt = v.type().tensor_type();
  r.elem_type = tt.elem_type();
  r.has_shape = tt.has_shape();
  RLX_CHECK(tt.shape().dim_size() <= kMaxRank, "value '", v.name(), "': rank ",
            tt.shape().dim_size(), " above ", kMaxRank);
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (d.has_dim_value()) {
      RLX_CHECK(d.dim_value() >= 0 && d.dim_value() <= kMaxElements, "value '", v.name(), "': dim ",
                i, " is ", d.dim_value());
      r.dims.emplace_back(d.dim_value());
    } else {  // named, or unknown and unnamed: a symbol of its own
      std::string name = d.has_dim_param() && !d.dim_param().empty()
                             ? d.dim_param()
                             : v.name() + "." + std::to_string(i);
      // '%' starts the importer's own names for dims computed at run time (ops_shape.cc).
      if (name[0] == '%') name.insert(0, "_");
      r.dims.push_back(Dim::symbol(std::move(name)));
    }
  }
  return r;
}

Graph to_graph(const rlx_onnx::GraphProto& gp, const std::string& base_dir);

Attribute to_attribute(const rlx_onnx::AttributeProto& a, const std::string& base_dir) {
  Attribute r;
  r.name = a.name();
  using A = rlx_onnx::AttributeProto;
  // Old files may leave `type` unset; infer it from the field present.
  A::AttributeType type = a.type();
  if (type == A::UNDEFINED) {
    if (a.has_f())
      type = A::FLOAT;
    else if (a.has_i())
      type = A::INT;
    else if (a.has_s())
      type = A::STRING;
    else if (a.has_t())
      type = A::TENSOR;
    else if (a.has_g())
      type = A::GRAPH;
    else if (a.floats_size())
      type = A::FLOATS;
    else if (a.ints_size())
      type = A::INTS;
    else if (a.strings_size())
      type = A::STRINGS;
  }
  switch (type) {
    case A::FLOAT:
      r.kind = Attribute::Float;
      r.f = a.f();
      break;
    case A::INT:
      r.kind = Attribute::Int;
      r.i = a.i();
      break;
    case A::STRING:
      r.kind = Attribute::String;
      r.s = a.s();
      break;
    case A::TENSOR:
      r.kind = Attribute::TensorK;
      r.t = to_tensor(a.t(), base_dir);
      break;
    case A::GRAPH:
      r.kind = Attribute::GraphK;
      r.g = std::make_shared<Graph>(to_graph(a.g(), base_dir));
      break;
    case A::FLOATS:
      r.kind = Attribute::Floats;
      r.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case A::INTS:
      r.kind = Attribute::Ints;
      r.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case A::STRINGS:
      r.kind = Attribute::Strings;
      r.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case A::UNDEFINED:
      r.kind = Attribute::Undefined;
      break;
    default:
      r.kind = Attribute::Other;
      break;
  }
  return r;
}

Graph to_graph(const rlx_onnx::GraphProto& gp, const std::string& base_dir) {
  Graph g;
  g.name = gp.name();
  g.nodes.reserve(size_t(gp.node_size()));
  for (int k = 0; k < gp.node_size(); ++k) {
    const auto& np = gp.node(k);
    Node n;
    n.name = np.name();
    n.op_type = np.op_type();
    n.domain = np.domain();
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    try {
      for (const auto& a : np.attribute()) n.attributes.push_back(to_attribute(a, base_dir));
    } catch (const Error& e) {
      throw e.with_context(n.label(size_t(k)));
    }
    g.nodes.push_back(std::move(n));
  }
  for (const auto& tp : gp.initializer()) {
    RLX_CHECK(!tp.name().empty(), "an initializer has no name");
    g.initializers.emplace_back(tp.name(), to_tensor(tp, base_dir));
  }
  for (const auto& v : gp.input()) g.inputs.push_back(to_value_info(v));
  for (const auto& v : gp.output()) g.outputs.push_back(to_value_info(v));
  for (const auto& v : gp.value_info()) g.value_info.push_back(to_value_info(v));
  return g;
}

}  // namespace

Model parse_model(const void* data, size_t size, const std::string& source_name,
                  const std::string& base_dir) {
  try {
    rlx_onnx::ModelProto mp;
    parse(mp, data, size, "model");
    RLX_CHECK(mp.has_graph(), "the model has no graph");
    Model m;
    m.path = source_name;
    m.ir_version = mp.ir_version();
    m.producer =
        mp.producer_name() + (mp.producer_version().empty() ? "" : " " + mp.producer_version());
    for (const auto& o : mp.opset_import()) m.opsets[o.domain()] = o.version();
    m.graph = to_graph(mp.graph(), base_dir);
    return m;
  } catch (const Error& e) {
    throw e.with_context(source_name);
  }
}

Model read_model(const std::string& path) {
  auto buf = map_file(path);
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return parse_model(buf->data(), buf->size(), path, dir);
}

Tensor parse_tensor(const void* data, size_t size, const std::string& source_name,
                    std::string* name) {
  try {
    rlx_onnx::TensorProto tp;
    parse(tp, data, size, "tensor");
    if (name) *name = tp.name();
    return to_tensor(tp, "");
  } catch (const Error& e) {
    throw e.with_context(source_name);
  }
}

Tensor read_tensor(const std::string& path, std::string* name) {
  auto buf = map_file(path);
  return parse_tensor(buf->data(), buf->size(), path, name);
}

}  // namespace rlx::onnx
