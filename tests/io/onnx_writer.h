// A minimal protobuf encoder for writing ONNX ModelProtos by hand in tests:
// a node, a tensor, a value_info at a time, with the field numbers of onnx.proto.
#pragma once
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::testing::onnx_writer {

// TensorProto.DataType values.
constexpr int kF32 = 1, kI64 = 7;

struct Pb {
  std::string s;
  void raw_varint(uint64_t v) {
    while (v >= 0x80) {
      s += char(v | 0x80);
      v >>= 7;
    }
    s += char(v);
  }
  Pb& varint(int field, uint64_t v) {
    raw_varint(uint64_t(field) << 3);
    raw_varint(v);
    return *this;
  }
  Pb& bytes(int field, std::string_view b) {
    raw_varint(uint64_t(field) << 3 | 2);
    raw_varint(b.size());
    s += b;
    return *this;
  }
  Pb& msg(int field, const Pb& m) { return bytes(field, m.s); }
  Pb& f32(int field, float f) {
    raw_varint(uint64_t(field) << 3 | 5);
    s.append(reinterpret_cast<const char*>(&f), 4);
    return *this;
  }
};

inline Pb tensor(const std::string& name, std::vector<int64_t> dims, int type, std::string raw) {
  Pb t;
  for (int64_t d : dims) t.varint(1, uint64_t(d));
  t.varint(2, uint64_t(type)).bytes(8, name).bytes(9, raw);
  return t;
}

inline std::string floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
inline std::string int64s(std::vector<int64_t> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8);
}

// ValueInfoProto: dims as numbers, or strings for dim_param.
inline Pb value_info(const std::string& name, int type, std::vector<std::string> dims) {
  Pb shape;
  for (const auto& d : dims) {
    Pb dim;
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
      dim.varint(1, std::stoull(d));
    else if (!d.empty())
      dim.bytes(2, d);
    shape.msg(1, dim);
  }
  Pb tt;
  tt.varint(1, uint64_t(type)).msg(2, shape);
  Pb tp;
  tp.msg(1, tt);
  Pb v;
  v.bytes(1, name).msg(2, tp);
  return v;
}

inline Pb node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
               std::vector<Pb> attrs = {}) {
  Pb n;
  for (const auto& i : in) n.bytes(1, i);
  for (const auto& o : out) n.bytes(2, o);
  n.bytes(3, op + "_node").bytes(4, op);
  for (const auto& a : attrs) n.msg(5, a);
  return n;
}

inline Pb int_attr(const std::string& name, int64_t v) {
  Pb a;
  a.bytes(1, name).varint(20, 2).varint(3, uint64_t(v));
  return a;
}

inline Pb float_attr(const std::string& name, float v) {
  Pb a;
  a.bytes(1, name).varint(20, 1).f32(2, v);
  return a;
}

inline Pb str_attr(const std::string& name, const std::string& v) {
  Pb a;
  a.bytes(1, name).varint(20, 3).bytes(4, v);
  return a;
}

inline Pb graph_attr(const std::string& name, const Pb& g) {
  Pb a;
  a.bytes(1, name).varint(20, 5).msg(6, g);
  return a;
}

inline Pb floats_attr(const std::string& name, const std::vector<float>& v) {
  Pb a;
  a.bytes(1, name).varint(20, 6);
  for (float x : v) a.f32(7, x);
  return a;
}

inline Pb ints_attr(const std::string& name, const std::vector<int64_t>& v) {
  Pb a;
  a.bytes(1, name).varint(20, 7);
  for (int64_t x : v) a.varint(8, uint64_t(x));
  return a;
}

inline std::string model(const Pb& graph, int64_t opset = 17) {
  Pb op;
  op.bytes(1, "").varint(2, uint64_t(opset));
  Pb m;
  m.varint(1, 8).bytes(2, "rlx-test").msg(7, graph).msg(8, op);
  return m.s;
}

}  // namespace rlx::testing::onnx_writer
