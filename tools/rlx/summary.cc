#include <algorithm>
#include <cmath>
#include <cstdio>

#include "commands.h"

namespace rlx::cli {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

std::string tensor_summary(const std::string& name, const Tensor& t) {
  char buf[256];
  std::string s = name + "  " + t.shape().str();
  const int64_t n = t.numel();
  if (n == 0) return s + "  (empty)";
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.item_as_double(i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  std::snprintf(buf, sizeof buf, "  min %.6g  max %.6g  mean %.6g", lo, hi,
                sum / double(std::max<int64_t>(1, n - nans)));
  s += buf;
  if (nans) s += "  NaN x" + std::to_string(nans);
  s += "  [";
  for (int64_t i = 0; i < std::min<int64_t>(n, 6); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.5g", i ? ", " : "", t.item_as_double(i));
    s += buf;
  }
  return s + (n > 6 ? ", ...]" : "]");
}

}  // namespace rlx::cli
