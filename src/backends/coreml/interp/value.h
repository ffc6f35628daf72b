// The interpreter's value model and the per-op calling context.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../mil.h"
#include "rlx/error.h"

namespace rlx::coreml::interp {

bool is_float_dt(pb::DataType dt);
bool is_int_dt(pb::DataType dt);

// A MIL tensor value. Floats (fp32, fp16, fp64, bf16) live in `f`, integers
// and bools in `i`, strings in `s`; exactly one is used, chosen by `dt`.
struct Value {
  pb::DataType dt = pb::FLOAT32;
  std::vector<int64_t> dims;
  std::vector<float> f;
  std::vector<int32_t> i;
  std::vector<std::string> s;

  int64_t numel() const;
  int rank() const { return int(dims.size()); }
  // The same test as the storage's: a bf16 value was stored in f but read from i (found by
  // fuzz_mlpackage).
  bool is_float() const { return is_float_dt(dt); }
  bool is_string() const { return dt == pb::STRING; }
  // Element k as float / int64 whatever the storage.
  float fget(int64_t k) const { return is_float() ? f[size_t(k)] : float(i[size_t(k)]); }
  int64_t iget(int64_t k) const { return is_float() ? int64_t(f[size_t(k)]) : i[size_t(k)]; }
  std::string str() const;  // "fp32[2,3]"

  static Value floats(std::vector<int64_t> dims, pb::DataType dt = pb::FLOAT32);
  static Value ints(std::vector<int64_t> dims, pb::DataType dt = pb::INT32);
};

// Largest tensor the interpreter materializes (hostile shapes fail, not OOM).
inline constexpr int64_t kMaxElements = int64_t(1) << 31;
// Product of `dims`; throws for negative dims or more than kMaxElements (or
// the smaller limit of the ElementLimit in scope on this thread).
int64_t checked_numel(const std::vector<int64_t>& dims);
// Lowers the element limit of checked_numel on this thread while it lives.
class ElementLimit {
 public:
  explicit ElementLimit(int64_t max_elements);
  ~ElementLimit();
  ElementLimit(const ElementLimit&) = delete;
  ElementLimit& operator=(const ElementLimit&) = delete;

 private:
  int64_t saved_;
};

// Converts `v` to `dt` (float->int truncates toward zero, ->bool is != 0,
// ->fp16 rounds to nearest fp16).
Value cast_value(const Value& v, pb::DataType dt);
float round_f16(float x);
// A float or double stored into an int32 slot: truncated toward zero, saturated, NaN to 0, so
// hostile values (an empty reduce's -inf, a huge pad value) stay defined.
int32_t saturate_int32(double x);
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims);
int64_t norm_axis(int64_t a, int rank, const std::string& what);

// Inputs of one operation and helpers to read its (mostly constant) arguments.
struct OpCtx {
  const pb::Operation& op;
  std::string out_name;
  Type out;  // declared output type
  std::map<std::string, std::vector<const Value*>> in;

  bool has(const std::string& k) const { return in.count(k) != 0; }
  const Value& x(const std::string& k) const;  // required, single
  const Value* opt(const std::string& k) const;
  const std::vector<const Value*>& list(const std::string& k) const;
  int64_t i(const std::string& k) const;
  int64_t i(const std::string& k, int64_t def) const;
  float f(const std::string& k, float def) const;
  bool b(const std::string& k, bool def) const;
  std::string s(const std::string& k, const std::string& def) const;
  std::vector<int64_t> ints(const std::string& k) const;
  std::vector<int64_t> ints(const std::string& k, std::vector<int64_t> def) const;

  template <typename... A>
  [[noreturn]] void fail(const A&... a) const {
    std::ostringstream s;
    (s << ... << a);
    throw make_error("mil interp: ", op.type(), " -> '", out_name, "': ", s.str());
  }
};

using OpFn = std::function<Value(const OpCtx&)>;
using OpTable = std::map<std::string, OpFn>;
void register_elementwise(OpTable& t);
void register_shape(OpTable& t);
void register_nn(OpTable& t);
void register_indexing(OpTable& t);  // gather_nd, scatters, argsort, conv_transpose, resize
const OpTable& op_table();

// Broadcast result dims of a and b (numpy rules); throws via ctx on mismatch.
std::vector<int64_t> broadcast_dims(const OpCtx& c, const std::vector<int64_t>& a,
                                    const std::vector<int64_t>& b);
// Offsets into an input of dims `in` for every element of `out` (broadcast).
std::vector<int64_t> broadcast_offsets(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out);

}  // namespace rlx::coreml::interp
