#include "package.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json_depth.h"
#include "rlx/dtype.h"

namespace rlx::coreml::interp {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  RLX_CHECK(f.good(), "mil interp: cannot read ", p.string());
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

template <typename T>
T get(const std::string& b, uint64_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

// Fills `r` (numel already known) from raw little-endian bytes of type `dt`.
void from_bytes(Value& r, const char* p, size_t bytes, pb::DataType dt, const std::string& where) {
  const size_t n = size_t(r.numel()), es = mil_dtype_size(dt);
  RLX_CHECK(es && bytes == n * es, "mil interp: ", where, ": ", bytes, " bytes for ", r.str());
  for (size_t k = 0; k < n; ++k) {
    const char* e = p + k * es;
    switch (dt) {
      case pb::FLOAT16: {
        uint16_t h;
        std::memcpy(&h, e, 2);
        r.f[k] = f16_to_f32(h);
        break;
      }
      case pb::FLOAT32:
        std::memcpy(&r.f[k], e, 4);
        break;
      case pb::INT32:
        std::memcpy(&r.i[k], e, 4);
        break;
      case pb::INT8:
        r.i[k] = int8_t(*e);
        break;
      case pb::UINT8:
      case pb::BOOL:
        r.i[k] = uint8_t(*e);
        break;
      default:
        throw make_error("mil interp: ", where, ": cannot read ", mil_dtype_name(dt), " bytes");
    }
  }
}

}  // namespace

Package load_package(const std::string& dir) {
  const fs::path root(dir);
  RLX_CHECK(fs::is_directory(root), "mil interp: ", dir, " is not a directory");
  nlohmann::json man;
  try {
    const std::string text = read_all(root / "Manifest.json");
    check_json_depth(text, "mil interp: " + (root / "Manifest.json").string());
    man = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw make_error("mil interp: bad Manifest.json in ", dir, ": ", e.what());
  }
  std::string rel = "com.apple.CoreML/model.mlmodel";
  try {
    const std::string id = man.at("rootModelIdentifier").get<std::string>();
    rel = man.at("itemInfoEntries").at(id).at("path").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw make_error("mil interp: Manifest.json in ", dir, " has no root model entry: ", e.what());
  }
  RLX_CHECK(rel.find("..") == std::string::npos, "mil interp: model path '", rel,
            "' leaves the package");
  const fs::path model = root / "Data" / rel;
  const fs::path w = model.parent_path() / "weights" / "weight.bin";
  const std::string weights = fs::exists(w) ? read_all(w) : std::string();
  return package_from_bytes(read_all(model), fs::exists(w) ? &weights : nullptr, model.string());
}

Package package_from_bytes(const std::string& model_bytes, const std::string* weights,
                           const std::string& model_path) {
  Package p;
  p.model_path = model_path;
  RLX_CHECK(p.model.ParseFromString(model_bytes), "mil interp: ", model_path,
            " is not a CoreML model protobuf");
  RLX_CHECK(p.model.has_mlprogram(), "mil interp: ", model_path, " is not an ML Program");
  if (weights) {
    p.weights = *weights;
    p.have_weights = true;
    RLX_CHECK(p.weights.size() >= 64, "mil interp: weight.bin is ", p.weights.size(),
              " bytes, shorter than its 64-byte header");
    RLX_CHECK(get<uint32_t>(p.weights, 4) == 2, "mil interp: weight.bin version ",
              get<uint32_t>(p.weights, 4), ", expected 2");
  }
  return p;
}

Value decode_value(const Package& p, const pb::Value& v, const Type& t, const std::string& where) {
  for (int64_t d : t.dims)
    RLX_CHECK(d >= 0, "mil interp: ", where, ": constant of non-static type ", type_str(t));
  Value r;
  r.dt = t.dt;
  r.dims = t.dims;
  const size_t n = size_t(checked_numel(r.dims));
  // Every element takes at least a byte of the value's data (in weight.bin
  // or in the protobuf), so a lying type is caught before it is allocated.
  // (A blob without weight.bin is reported below.)
  const bool blob = v.has_blobfilevalue();
  const size_t avail = blob ? p.weights.size() : v.ByteSizeLong();
  RLX_CHECK(n <= avail || (blob && !p.have_weights), "mil interp: ", where, ": ", type_str(t),
            " has more elements than its ", avail, " bytes of data");
  if (t.dt == pb::STRING)
    r.s.resize(n);
  else if (is_float_dt(t.dt))
    r.f.resize(n);
  else if (is_int_dt(t.dt))
    r.i.resize(n);
  else
    throw make_error("mil interp: ", where, ": unsupported constant type ", type_str(t));

  if (v.has_blobfilevalue()) {
    const auto& bf = v.blobfilevalue();
    RLX_CHECK(bf.filename() == kWeightFile, "mil interp: ", where, ": blob file '", bf.filename(),
              "' is not ", kWeightFile);
    RLX_CHECK(p.have_weights, "mil interp: ", where, ": weight.bin is missing");
    const std::string& w = p.weights;
    const uint64_t off = bf.offset();
    RLX_CHECK(off % 64 == 0 && off >= 64 && off <= w.size() && w.size() - off >= 64,
              "mil interp: ", where, ": blob record offset ", off,
              " is misaligned or outside weight.bin (", w.size(), " bytes)");
    RLX_CHECK(get<uint32_t>(w, off) == kBlobSentinel, "mil interp: ", where,
              ": bad sentinel in blob record at ", off);
    const uint32_t bdt = get<uint32_t>(w, off + 4);
    const uint64_t size = get<uint64_t>(w, off + 8), data = get<uint64_t>(w, off + 16);
    RLX_CHECK(bdt == blob_dtype_for(t.dt), "mil interp: ", where, ": blob dtype ", bdt,
              " does not match ", type_str(t));
    RLX_CHECK(size == n * mil_dtype_size(t.dt), "mil interp: ", where, ": blob holds ", size,
              " bytes, ", type_str(t), " needs ", n * mil_dtype_size(t.dt));
    RLX_CHECK(data <= w.size() && size <= w.size() - data, "mil interp: ", where, ": blob data [",
              data, ", +", size, ") runs past the end of weight.bin (", w.size(), " bytes)");
    from_bytes(r, w.data() + data, size_t(size), t.dt, where);
    return r;
  }
  RLX_CHECK(v.has_immediatevalue() && v.immediatevalue().has_tensor(), "mil interp: ", where,
            ": value is neither an immediate tensor nor a blob");
  const auto& tv = v.immediatevalue().tensor();
  auto count = [&](int got) {
    RLX_CHECK(size_t(got) == n, "mil interp: ", where, ": ", got, " immediate values for ",
              type_str(t));
  };
  // Numbers fill f or i: a string-typed constant has neither (found by fuzz_mlpackage), and a
  // float stored into an int must fit one.
  const bool numbers =
      tv.has_floats() || tv.has_doubles() || tv.has_ints() || tv.has_longints() || tv.has_bools();
  RLX_CHECK(!numbers || t.dt != pb::STRING, "mil interp: ", where, ": numbers for ", type_str(t));
  auto store = [&](size_t k, double x) {
    if (is_float_dt(t.dt)) {
      r.f[k] = t.dt == pb::FLOAT16 ? round_f16(float(x)) : float(x);
      return;
    }
    RLX_CHECK(x >= -0x1p31 && x < 0x1p31, "mil interp: ", where, ": ", x, " does not fit ",
              type_str(t));
    r.i[k] = int32_t(x);
  };
  if (tv.has_floats()) {
    count(tv.floats().values_size());
    for (size_t k = 0; k < n; ++k) store(k, tv.floats().values(int(k)));
  } else if (tv.has_doubles()) {
    count(tv.doubles().values_size());
    for (size_t k = 0; k < n; ++k) store(k, tv.doubles().values(int(k)));
  } else if (tv.has_ints() || tv.has_longints() || tv.has_bools()) {
    const int got = tv.has_ints()       ? tv.ints().values_size()
                    : tv.has_longints() ? tv.longints().values_size()
                                        : tv.bools().values_size();
    count(got);
    for (size_t k = 0; k < n; ++k) {
      int64_t x = tv.has_ints()       ? tv.ints().values(int(k))
                  : tv.has_longints() ? tv.longints().values(int(k))
                                      : int64_t(tv.bools().values(int(k)));
      if (is_float_dt(t.dt))
        r.f[k] = float(x);
      else
        r.i[k] = int32_t(x);  // longints wrap as MIL's int32 does
    }
  } else if (tv.has_strings()) {
    count(tv.strings().values_size());
    RLX_CHECK(t.dt == pb::STRING, "mil interp: ", where, ": strings for ", type_str(t));
    for (size_t k = 0; k < n; ++k) r.s[k] = tv.strings().values(int(k));
  } else if (tv.has_bytes()) {
    const std::string& b = tv.bytes().values();
    from_bytes(r, b.data(), b.size(), t.dt, where);
  } else {
    throw make_error("mil interp: ", where, ": empty immediate tensor value");
  }
  return r;
}

}  // namespace rlx::coreml::interp
