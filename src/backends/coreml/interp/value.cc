#include "value.h"

#include <algorithm>
#include <cmath>

#include "rlx/dtype.h"

namespace rlx::coreml::interp {

int64_t Value::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

namespace {
thread_local int64_t t_element_limit = kMaxElements;
}  // namespace

ElementLimit::ElementLimit(int64_t max_elements) : saved_(t_element_limit) {
  t_element_limit = std::max<int64_t>(0, std::min(max_elements, saved_));
}
ElementLimit::~ElementLimit() { t_element_limit = saved_; }

int64_t checked_numel(const std::vector<int64_t>& dims) {
  const int64_t limit = t_element_limit;
  int64_t n = 1;
  for (int64_t d : dims) {
    RLX_CHECK(d >= 0 && (d == 0 || n <= limit / d), "mil interp: tensor of dims ",
              type_str(Type{pb::FLOAT32, dims}), " is negative or larger than ", limit,
              " elements");
    n *= d;
  }
  return n;
}

std::string Value::str() const { return type_str(Type{dt, dims}); }

Value Value::floats(std::vector<int64_t> dims, pb::DataType dt) {
  Value v;
  v.dt = dt;
  v.dims = std::move(dims);
  v.f.assign(size_t(checked_numel(v.dims)), 0.0f);
  return v;
}

Value Value::ints(std::vector<int64_t> dims, pb::DataType dt) {
  Value v;
  v.dt = dt;
  v.dims = std::move(dims);
  v.i.assign(size_t(checked_numel(v.dims)), 0);
  return v;
}

bool is_float_dt(pb::DataType dt) {
  return dt == pb::FLOAT32 || dt == pb::FLOAT16 || dt == pb::FLOAT64 || dt == pb::BFLOAT16;
}
bool is_int_dt(pb::DataType dt) {
  return dt == pb::INT8 || dt == pb::INT16 || dt == pb::INT32 || dt == pb::INT64 ||
         dt == pb::UINT8 || dt == pb::BOOL;
}

float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

int32_t saturate_int32(double x) {
  return std::isnan(x)        ? 0
         : x >= 2147483647.0  ? INT32_MAX
         : x <= -2147483648.0 ? INT32_MIN
                              : int32_t(x);
}

Value cast_value(const Value& v, pb::DataType dt) {
  RLX_CHECK(!v.is_string() && dt != pb::STRING, "mil interp: cannot cast ", v.str(), " to ",
            mil_dtype_name(dt));
  Value r;
  r.dt = dt;
  r.dims = v.dims;
  const int64_t n = v.numel();
  if (is_float_dt(dt)) {
    r.f.resize(size_t(n));
    for (int64_t k = 0; k < n; ++k) {
      float x = v.fget(k);
      r.f[size_t(k)] = dt == pb::FLOAT16 ? round_f16(x) : x;
    }
  } else {
    r.i.resize(size_t(n));
    for (int64_t k = 0; k < n; ++k) {
      if (dt == pb::BOOL) {
        r.i[size_t(k)] = v.is_float() ? v.f[size_t(k)] != 0.0f : v.i[size_t(k)] != 0;
      } else if (v.is_float()) {
        r.i[size_t(k)] = saturate_int32(v.f[size_t(k)]);
      } else {
        r.i[size_t(k)] = v.i[size_t(k)];
      }
    }
  }
  return r;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int k = int(dims.size()) - 2; k >= 0; --k)
    s[size_t(k)] = s[size_t(k) + 1] * dims[size_t(k) + 1];
  return s;
}

int64_t norm_axis(int64_t a, int rank, const std::string& what) {
  RLX_CHECK(a >= -rank && a < rank, "mil interp: ", what, " ", a, " out of range for rank ", rank);
  return a < 0 ? a + rank : a;
}

// ---- OpCtx

const Value* OpCtx::opt(const std::string& k) const {
  auto it = in.find(k);
  if (it == in.end()) return nullptr;
  if (it->second.size() != 1)
    fail("input '", k, "' has ", it->second.size(), " bindings, wanted 1");
  return it->second[0];
}

const Value& OpCtx::x(const std::string& k) const {
  const Value* v = opt(k);
  if (!v) fail("missing input '", k, "'");
  return *v;
}

const std::vector<const Value*>& OpCtx::list(const std::string& k) const {
  auto it = in.find(k);
  if (it == in.end()) fail("missing input '", k, "'");
  return it->second;
}

int64_t OpCtx::i(const std::string& k) const {
  const Value& v = x(k);
  if (v.numel() != 1 || v.is_string()) fail("input '", k, "' must be a scalar, got ", v.str());
  return v.iget(0);
}
int64_t OpCtx::i(const std::string& k, int64_t def) const { return has(k) ? i(k) : def; }

float OpCtx::f(const std::string& k, float def) const {
  if (!has(k)) return def;
  const Value& v = x(k);
  if (v.numel() != 1 || v.is_string()) fail("input '", k, "' must be a scalar, got ", v.str());
  return v.fget(0);
}

bool OpCtx::b(const std::string& k, bool def) const { return has(k) ? i(k) != 0 : def; }

std::string OpCtx::s(const std::string& k, const std::string& def) const {
  if (!has(k)) return def;
  const Value& v = x(k);
  if (!v.is_string() || v.s.size() != 1) fail("input '", k, "' must be a string, got ", v.str());
  return v.s[0];
}

std::vector<int64_t> OpCtx::ints(const std::string& k) const {
  const Value& v = x(k);
  if (v.is_string() || v.rank() > 1) fail("input '", k, "' must be a 1-D integer tensor");
  std::vector<int64_t> r;
  for (int64_t j = 0; j < v.numel(); ++j) r.push_back(v.iget(j));
  return r;
}
std::vector<int64_t> OpCtx::ints(const std::string& k, std::vector<int64_t> def) const {
  return has(k) ? ints(k) : def;
}

// ---- broadcasting

std::vector<int64_t> broadcast_dims(const OpCtx& c, const std::vector<int64_t>& a,
                                    const std::vector<int64_t>& b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> r(n);
  for (size_t k = 0; k < n; ++k) {
    int64_t da = k + a.size() >= n ? a[k + a.size() - n] : 1;
    int64_t db = k + b.size() >= n ? b[k + b.size() - n] : 1;
    if (da != db && da != 1 && db != 1)
      c.fail("shapes ", type_str(Type{pb::FLOAT32, a}), " and ", type_str(Type{pb::FLOAT32, b}),
             " do not broadcast");
    r[k] = da == 1 ? db : da;
  }
  return r;
}

std::vector<int64_t> broadcast_offsets(const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out) {
  const size_t n = out.size(), lead = n - in.size();
  std::vector<int64_t> st(n, 0), ist = strides_of(in);
  for (size_t k = lead; k < n; ++k) st[k] = in[k - lead] == 1 ? 0 : ist[k - lead];
  int64_t total = 1;
  for (int64_t d : out) total *= d;
  std::vector<int64_t> offs(static_cast<size_t>(total));
  std::vector<int64_t> idx(n, 0);
  int64_t off = 0;
  for (int64_t e = 0; e < total; ++e) {
    offs[size_t(e)] = off;
    for (int k = int(n) - 1; k >= 0; --k) {
      off += st[size_t(k)];
      if (++idx[size_t(k)] < out[size_t(k)]) break;
      off -= st[size_t(k)] * idx[size_t(k)];
      idx[size_t(k)] = 0;
    }
  }
  return offs;
}

}  // namespace rlx::coreml::interp
