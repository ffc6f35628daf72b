// TensorProto -> rlx::Tensor: raw_data, the typed repeated fields, or
// external data. Every count comes from the file, so each is checked against
// what the file holds (the bytes present, the external file's size) before the
// tensor is allocated.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/onnx/convert.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace fs = std::filesystem;

std::optional<DType> dtype_of(int32_t t) {
  switch (t) {
    case 1:
      return DType::F32;
    case 2:
      return DType::U8;
    case 3:
      return DType::I8;
    case 5:
      return DType::I16;
    case 6:
      return DType::I32;
    case 7:
      return DType::I64;
    case 9:
      return DType::Bool;
    case 10:
      return DType::F16;
    case 11:
      return DType::F64;
    case 16:
      return DType::BF16;
    default:
      return std::nullopt;
  }
}

std::string onnx_type_name(int32_t t) {
  static const char* names[] = {
      "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",   "INT16",
      "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",  "DOUBLE",
      "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
      "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4"};
  if (t >= 0 && size_t(t) < sizeof names / sizeof names[0]) return names[t];
  return "type " + std::to_string(t);
}

namespace {

// Copies n typed elements (as stored by protobuf) into the tensor's dtype.
template <typename Src>
void copy_elements(const Src* src, int64_t n, Tensor& t) {
  switch (t.dtype()) {
#define X(e, nm, T, b)                                             \
  case DType::e: {                                                 \
    T* d = t.data<T>();                                            \
    for (int64_t k = 0; k < n; ++k) d[k] = static_cast<T>(src[k]); \
    break;                                                         \
  }
    RLX_DTYPES(X)
#undef X
  }
}

// Reads the external data of `tp` (location relative to `base_dir`) into `t`.
void read_external(const rlx_onnx::TensorProto& tp, const std::string& base_dir, Tensor& t,
                   size_t nbytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    auto number = [&](const std::string& v) {
      RLX_CHECK(!v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == v.npos,
                "external data ", kv.key(), " '", v.substr(0, 32), "' is not a byte count");
      return int64_t(std::stoll(v));
    };
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = number(kv.value());
    else if (kv.key() == "length")
      length = number(kv.value());
  }
  RLX_CHECK(!location.empty(), "external data without a location");
  RLX_CHECK(!base_dir.empty(), "external data '", location,
            "' but the model was not read from a file");
  const fs::path rel(location);
  // The location must stay inside the model's directory: a file must not make
  // rlx read /etc/passwd or ../../secret into a weight.
  RLX_CHECK(rel.is_relative() && !rel.has_root_name(), "external data location '", location,
            "' is not a relative path");
  for (const auto& part : rel)
    RLX_CHECK(part != "..", "external data location '", location, "' leaves the model directory");
  const fs::path file = fs::path(base_dir) / rel;
  std::error_code ec;
  const auto fsize = fs::file_size(file, ec);
  RLX_CHECK(!ec, "external data file ", file.string(), ": ", ec.message());
  if (length < 0) length = int64_t(nbytes);
  RLX_CHECK(uint64_t(length) == nbytes, "external data length ", length, " but ", t.shape().str(),
            " needs ", nbytes, " bytes");
  RLX_CHECK(uint64_t(offset) <= fsize && uint64_t(length) <= fsize - uint64_t(offset),
            "external data [", offset, ", +", length, ") is beyond the end of ", file.string(),
            " (", fsize, " bytes)");
  std::ifstream f(file, std::ios::binary);
  RLX_CHECK(f, "cannot open external data file ", file.string());
  f.seekg(offset);
  f.read(static_cast<char*>(t.raw()), std::streamsize(nbytes));
  RLX_CHECK(f.gcount() == std::streamsize(nbytes), "short read from ", file.string());
}

}  // namespace

Tensor to_tensor(const rlx_onnx::TensorProto& tp, const std::string& base_dir) {
  const std::string what = "tensor '" + tp.name() + "'";
  try {
    const auto dt = dtype_of(tp.data_type());
    RLX_CHECK(dt, "dtype ", onnx_type_name(tp.data_type()), " is not supported by rlx");
    RLX_CHECK(tp.dims_size() <= kMaxRank, "rank ", tp.dims_size(), " above ", kMaxRank);
    Dims dims(tp.dims().begin(), tp.dims().end());
    const int64_t n = checked_numel(dims, "dims");
    const size_t nbytes = checked_nbytes(dims, *dt, "dims");
    const bool external = tp.data_location() == rlx_onnx::TensorProto::EXTERNAL;
    int64_t have = -1;  // elements present in the typed field in use
    if (!external && !tp.has_raw_data()) {
      switch (tp.data_type()) {
        case 1:
          have = tp.float_data_size();
          break;
        case 2:
        case 3:
        case 5:
        case 6:
        case 9:
        case 10:
        case 16:
          have = tp.int32_data_size();
          break;
        case 7:
          have = tp.int64_data_size();
          break;
        case 11:
          have = tp.double_data_size();
          break;
      }
      if (have == 0 && n > 0)
        throw make_error(t_str(dims, *dt),
                         " has no data (no raw_data, typed data or external data)");
      RLX_CHECK(have == n, t_str(dims, *dt), " needs ", n, " elements, the file holds ", have);
    }
    if (tp.has_raw_data())
      RLX_CHECK(tp.raw_data().size() == nbytes, "raw_data holds ", tp.raw_data().size(), " bytes, ",
                t_str(dims, *dt), " needs ", nbytes);
    // Every size is now known to match data the file really holds.
    Tensor t = Tensor::uninitialized(dims, *dt);
    if (external) {
      read_external(tp, base_dir, t, nbytes);
    } else if (tp.has_raw_data()) {
      if (nbytes) std::memcpy(t.raw(), tp.raw_data().data(), nbytes);
    } else if (n > 0) {
      switch (tp.data_type()) {
        case 1:
          copy_elements(tp.float_data().data(), n, t);
          break;
        case 10:
        case 16: {  // f16/bf16 bits stored in int32_data
          auto* d = t.data<uint16_t>();
          for (int64_t k = 0; k < n; ++k) d[k] = uint16_t(tp.int32_data(int(k)));
          break;
        }
        case 7:
          copy_elements(tp.int64_data().data(), n, t);
          break;
        case 11:
          copy_elements(tp.double_data().data(), n, t);
          break;
        default:
          copy_elements(tp.int32_data().data(), n, t);
          break;
      }
    }
    if (*dt == DType::Bool) {  // only 0/1 bytes are valid bools
      auto* b = static_cast<uint8_t*>(t.raw());
      for (int64_t k = 0; k < n; ++k) b[k] = b[k] != 0;
    }
    return t;
  } catch (const Error& e) {
    throw e.with_context(what);
  }
}

}  // namespace rlx::onnx
