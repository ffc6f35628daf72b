#include "mil.h"

#include <cstring>

#include "rlx/error.h"

namespace rlx::coreml {

bool Type::is_static() const {
  for (int64_t d : dims)
    if (d < 0) return false;
  return true;
}

int64_t Type::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string mil_dtype_name(pb::DataType dt) {
  switch (dt) {
    case pb::FLOAT16:
      return "fp16";
    case pb::FLOAT32:
      return "fp32";
    case pb::FLOAT64:
      return "fp64";
    case pb::INT8:
      return "int8";
    case pb::INT16:
      return "int16";
    case pb::INT32:
      return "int32";
    case pb::INT64:
      return "int64";
    case pb::UINT8:
      return "uint8";
    case pb::BOOL:
      return "bool";
    case pb::STRING:
      return "string";
    default:
      return "dtype" + std::to_string(int(dt));
  }
}

size_t mil_dtype_size(pb::DataType dt) {
  switch (dt) {
    case pb::FLOAT16:
    case pb::BFLOAT16:
    case pb::INT16:
      return 2;
    case pb::FLOAT32:
    case pb::INT32:
      return 4;
    case pb::FLOAT64:
    case pb::INT64:
      return 8;
    case pb::INT8:
    case pb::UINT8:
    case pb::BOOL:
      return 1;
    default:
      return 0;
  }
}

void set_type(pb::ValueType* vt, const Type& t) {
  auto* tt = vt->mutable_tensortype();
  tt->set_datatype(t.dt);
  tt->set_rank(t.rank());
  for (int64_t d : t.dims) {
    auto* dim = tt->add_dimensions();
    if (d >= 0)
      dim->mutable_constant()->set_size(uint64_t(d));
    else
      dim->mutable_unknown()->set_variadic(false);
  }
}

Type get_type(const pb::ValueType& vt) {
  Type t;
  t.dt = vt.tensortype().datatype();
  for (const auto& d : vt.tensortype().dimensions())
    t.dims.push_back(d.has_constant() ? int64_t(d.constant().size()) : -1);
  return t;
}

std::string type_str(const Type& t) {
  std::string s = mil_dtype_name(t.dt) + "[";
  for (size_t i = 0; i < t.dims.size(); ++i)
    s += (i ? "," : "") + (t.dims[i] < 0 ? std::string("?") : std::to_string(t.dims[i]));
  return s + "]";
}

std::string sanitize_name(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(uint8_t(c)) || c == '_' || c == '@') ? c : '_';
  if (r.empty() || !(std::isalpha(uint8_t(r[0])) || r[0] == '_')) r = "_" + r;
  return r;
}

// ---- MILBlob v2

namespace {
template <typename T>
void put(std::string& buf, size_t at, T v) {
  std::memcpy(buf.data() + at, &v, sizeof(T));
}
}  // namespace

BlobWriter::BlobWriter() : buf_(64, '\0') {
  put<uint32_t>(buf_, 0, 0);
  put<uint32_t>(buf_, 4, 2);  // version
}

uint64_t BlobWriter::add(uint32_t blob_dtype, const void* data, size_t bytes) {
  const size_t rec = (buf_.size() + 63) / 64 * 64;
  buf_.resize(rec + 64 + bytes, '\0');
  put<uint32_t>(buf_, rec, kBlobSentinel);
  put<uint32_t>(buf_, rec + 4, blob_dtype);
  put<uint64_t>(buf_, rec + 8, uint64_t(bytes));
  put<uint64_t>(buf_, rec + 16, uint64_t(rec + 64));
  if (bytes) std::memcpy(buf_.data() + rec + 64, data, bytes);
  put<uint32_t>(buf_, 0, ++count_);
  return rec;
}

// ---- builder

std::string Builder::fresh(const std::string& hint) {
  std::string base = sanitize_name(hint), name = base;
  for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
  used_.insert(name);
  return name;
}

Val Builder::emit_const(pb::Value&& value, const Type& t, const std::string& hint) {
  Val v{fresh(hint), t};
  auto* op = block_->add_operations();
  op->set_type("const");
  auto* out = op->add_outputs();
  out->set_name(v.name);
  set_type(out->mutable_type(), t);
  set_type(value.mutable_type(), t);
  (*op->mutable_attributes())["val"] = std::move(value);
  pb::Value name;
  set_type(name.mutable_type(), Type{pb::STRING, {}});
  name.mutable_immediatevalue()->mutable_tensor()->mutable_strings()->add_values(v.name);
  (*op->mutable_attributes())["name"] = std::move(name);
  return v;
}

Val Builder::constant(const Tensor& t, pb::DataType dt, const std::string& hint) {
  Type ty{dt, t.dims()};
  const int64_t n = t.numel();
  pb::Value val;
  auto* imm = val.mutable_immediatevalue()->mutable_tensor();
  const Tensor src = t.contiguous();
  if (dt == pb::FLOAT32 || dt == pb::FLOAT16) {
    std::string bytes(size_t(n) * mil_dtype_size(dt), '\0');
    cast_elements(src.raw(), src.dtype(), bytes.data(), dt == pb::FLOAT32 ? DType::F32 : DType::F16,
                  n);
    if (n >= kMinBlobElements) {
      auto* blob = val.mutable_blobfilevalue();
      blob->set_filename(kWeightFile);
      blob->set_offset(
          blobs_->add(dt == pb::FLOAT32 ? kBlobF32 : kBlobF16, bytes.data(), bytes.size()));
    } else if (dt == pb::FLOAT32) {
      auto* f = imm->mutable_floats();
      for (int64_t i = 0; i < n; ++i) {
        float x;
        std::memcpy(&x, bytes.data() + 4 * i, 4);
        f->add_values(x);
      }
    } else {
      imm->mutable_bytes()->set_values(bytes);
    }
  } else if (dt == pb::INT32) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    cast_elements(src.raw(), src.dtype(), v.data(), DType::I32, n);
    // Integer blobs (MILBlob dtype 14) are only read from CoreML8 on.
    if (n >= kMinBlobElements && opset_ >= 8) {
      auto* blob = val.mutable_blobfilevalue();
      blob->set_filename(kWeightFile);
      blob->set_offset(blobs_->add(kBlobI32, v.data(), v.size() * 4));
    } else {
      for (int32_t x : v) imm->mutable_ints()->add_values(x);
    }
  } else if (dt == pb::BOOL) {
    std::vector<uint8_t> v(static_cast<size_t>(n));
    cast_elements(src.raw(), src.dtype(), v.data(), DType::Bool, n);
    for (uint8_t x : v) imm->mutable_bools()->add_values(x != 0);
  } else {
    throw make_error("coreml: cannot write a ", mil_dtype_name(dt), " constant");
  }
  if (val.has_blobfilevalue()) val.clear_immediatevalue();
  return emit_const(std::move(val), ty, hint);
}

Val Builder::affine_dequantize(const std::vector<int8_t>& q, const std::vector<int64_t>& dims,
                               const std::vector<float>& scale, int64_t axis, pb::DataType out_dt,
                               const std::string& hint) {
  RLX_CHECK(opset_ >= 6,
            "coreml: int8 weights (constexpr_affine_dequantize) need CoreML6 or "
            "later, the package is CoreML",
            opset_);
  RLX_CHECK(out_dt == pb::FLOAT32 || out_dt == pb::FLOAT16,
            "coreml: int8 weights dequantize to fp32 or fp16");
  const int64_t c = int64_t(scale.size());
  Val v{fresh(hint), Type{out_dt, dims}};
  auto* op = block_->add_operations();
  op->set_type("constexpr_affine_dequantize");
  auto* out = op->add_outputs();
  out->set_name(v.name);
  set_type(out->mutable_type(), v.type);
  auto& attrs = *op->mutable_attributes();
  auto bytes_value = [&](pb::DataType dt, std::vector<int64_t> d, std::string bytes) {
    pb::Value val;
    set_type(val.mutable_type(), Type{dt, std::move(d)});
    val.mutable_immediatevalue()->mutable_tensor()->mutable_bytes()->set_values(std::move(bytes));
    return val;
  };
  pb::Value data;
  if (q.size() >= size_t(kMinBlobElements)) {
    set_type(data.mutable_type(), Type{pb::INT8, dims});
    auto* blob = data.mutable_blobfilevalue();
    blob->set_filename(kWeightFile);
    blob->set_offset(blobs_->add(kBlobI8, q.data(), q.size()));
  } else {
    data = bytes_value(pb::INT8, dims, std::string(q.begin(), q.end()));
  }
  attrs["quantized_data"] = std::move(data);
  attrs["zero_point"] = bytes_value(pb::INT8, {c}, std::string(size_t(c), '\0'));
  pb::Value sv;
  set_type(sv.mutable_type(), Type{out_dt, {c}});
  if (out_dt == pb::FLOAT32) {
    for (float x : scale)
      sv.mutable_immediatevalue()->mutable_tensor()->mutable_floats()->add_values(x);
  } else {
    std::string h(size_t(c) * 2, '\0');
    for (int64_t k = 0; k < c; ++k) {
      const uint16_t b = f32_to_f16(scale[size_t(k)]);
      std::memcpy(h.data() + 2 * k, &b, 2);
    }
    sv.mutable_immediatevalue()->mutable_tensor()->mutable_bytes()->set_values(std::move(h));
  }
  attrs["scale"] = std::move(sv);
  pb::Value ax;
  set_type(ax.mutable_type(), Type{pb::INT32, {}});
  ax.mutable_immediatevalue()->mutable_tensor()->mutable_ints()->add_values(int32_t(axis));
  attrs["axis"] = std::move(ax);
  pb::Value name;
  set_type(name.mutable_type(), Type{pb::STRING, {}});
  name.mutable_immediatevalue()->mutable_tensor()->mutable_strings()->add_values(v.name);
  attrs["name"] = std::move(name);
  return v;
}

Val Builder::ints(const std::vector<int64_t>& v, const std::string& hint) {
  pb::Value val;
  auto* r = val.mutable_immediatevalue()->mutable_tensor()->mutable_ints();
  for (int64_t x : v) r->add_values(int32_t(x));
  return emit_const(std::move(val), Type{pb::INT32, {int64_t(v.size())}}, hint);
}

Val Builder::int_scalar(int64_t v, const std::string& hint) {
  pb::Value val;
  val.mutable_immediatevalue()->mutable_tensor()->mutable_ints()->add_values(int32_t(v));
  return emit_const(std::move(val), Type{pb::INT32, {}}, hint);
}

Val Builder::scalar(double v, pb::DataType dt, const std::string& hint) {
  pb::Value val;
  auto* t = val.mutable_immediatevalue()->mutable_tensor();
  if (dt == pb::FLOAT16) {
    uint16_t h = f32_to_f16(float(v));
    t->mutable_bytes()->set_values(std::string(reinterpret_cast<const char*>(&h), 2));
  } else if (dt == pb::FLOAT32) {
    t->mutable_floats()->add_values(float(v));
  } else if (dt == pb::INT32) {
    t->mutable_ints()->add_values(int32_t(v));
  } else if (dt == pb::BOOL) {
    t->mutable_bools()->add_values(v != 0);
  } else {
    throw make_error("coreml: cannot write a ", mil_dtype_name(dt), " scalar");
  }
  return emit_const(std::move(val), Type{dt, {}}, hint);
}

Val Builder::boolean(bool v, const std::string& hint) { return scalar(v ? 1 : 0, pb::BOOL, hint); }

Val Builder::string(const std::string& v, const std::string& hint) {
  pb::Value val;
  val.mutable_immediatevalue()->mutable_tensor()->mutable_strings()->add_values(v);
  return emit_const(std::move(val), Type{pb::STRING, {}}, hint);
}

Val Builder::op(const std::string& type, const std::vector<std::pair<std::string, Arg>>& inputs,
                const Type& out, const std::string& hint) {
  Val v{fresh(hint), out};
  auto* op = block_->add_operations();
  op->set_type(type);
  for (const auto& [key, arg] : inputs) {
    auto& a = (*op->mutable_inputs())[key];
    for (const auto& n : arg.names) a.add_arguments()->set_name(n);
  }
  auto* o = op->add_outputs();
  o->set_name(v.name);
  set_type(o->mutable_type(), out);
  pb::Value name;
  set_type(name.mutable_type(), Type{pb::STRING, {}});
  name.mutable_immediatevalue()->mutable_tensor()->mutable_strings()->add_values(v.name);
  (*op->mutable_attributes())["name"] = std::move(name);
  return v;
}

}  // namespace rlx::coreml
