#include "support/testing.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace rlx::testing {

std::filesystem::path process_temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

Tensor random_tensor(const Dims& dims, DType t, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  Tensor d(dims, DType::F64);
  double* p = d.data<double>();
  for (int64_t i = 0; i < d.numel(); ++i) {
    if (t == DType::Bool) {
      p[i] = double(rng() & 1);
    } else if (is_integer(t)) {
      p[i] = double(std::uniform_int_distribution<int64_t>(int64_t(lo), int64_t(hi))(rng));
    } else {
      p[i] = std::uniform_real_distribution<double>(lo, hi)(rng);
    }
  }
  return d.to(t);
}

Tensor f32(const Dims& dims, std::vector<float> v) {
  return Tensor::from_vector<float>(dims, v, DType::F32);
}

Tensor ints(const Dims& dims, std::vector<int64_t> v, DType t) {
  return Tensor::from_vector<int64_t>(dims, v, t);
}

Tensor i64(int64_t v) { return Tensor::from_vector<int64_t>({}, {v}, DType::I64); }

std::vector<float> randn(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> values(const Tensor& t) { return t.contiguous().to_f32_vector(); }

double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += a.item_as_double(i) * b.item_as_double(i);
  return s;
}

Dims unravel(int64_t flat, const Dims& d) {
  Dims c(d.size(), 0);
  for (size_t i = d.size(); i-- > 0;) {
    c[i] = flat % d[i];
    flat /= d[i];
  }
  return c;
}

int64_t ravel(const Dims& coords, const Dims& d) {
  int64_t flat = 0;
  for (size_t i = 0; i < d.size(); ++i) flat = flat * d[i] + coords[i];
  return flat;
}

int count_op(const Graph& g, Op op) {
  int k = 0;
  for (const Node& n : g.nodes()) k += n.op == op;
  return k;
}

std::shared_ptr<Executable> compile0(const Graph& g, const TensorMap& weights) {
  CompileOptions o;
  o.opt_level = 0;
  return Executable::compile(g, weights, o);
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void spit(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

Tensor run_op(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  std::vector<Tensor> out = run_op_outputs(op, inputs, attrs);
  RLX_CHECK(out.size() == 1, op_name(op), " has ", out.size(), " outputs; use run_op_outputs");
  return out[0];
}

std::vector<Tensor> run_op_outputs(Op op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  Graph g;
  std::vector<NodeId> ins;
  TensorMap feed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    ins.push_back(g.input(name, inputs[i].shape()));
    feed[name] = inputs[i];
  }
  const NodeId id = g.add(op, ins, attrs);
  std::vector<NodeId> values{id};
  if (has_results(op)) {
    values.clear();
    for (size_t i = 0; i < g.node(id).results.size(); ++i) values.push_back(g.result(id, int(i)));
  }
  for (size_t i = 0; i < values.size(); ++i) g.add_output("y" + std::to_string(i), values[i]);
  TensorMap out = run_graph(g, feed, {}, 0);
  std::vector<Tensor> r;
  for (size_t i = 0; i < values.size(); ++i) r.push_back(out.at("y" + std::to_string(i)));
  return r;
}

Tensor bf16_rounded(const Tensor& t) {
  Tensor r = t.clone();
  for (int64_t i = 0; i < r.numel(); ++i)
    r.data<float>()[i] = bf16_to_f32(f32_to_bf16(r.data<float>()[i]));
  return r;
}

TensorMap run_graph(const Graph& g, const TensorMap& inputs, const TensorMap& weights,
                    int opt_level) {
  CompileOptions o;
  o.opt_level = opt_level;
  auto exe = Executable::compile(g, weights, o);
  Session s(exe);
  return s.run(inputs);
}

::testing::AssertionResult all_close(const Tensor& got, const Tensor& want, double atol,
                                     double rtol) {
  if (got.dims() != want.dims())
    return ::testing::AssertionFailure()
           << "dims differ: got " << dims_str(got.dims()) << ", want " << dims_str(want.dims());
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double a = got.item_as_double(i), b = want.item_as_double(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::isinf(a) && a == b) continue;
    double err = std::abs(a - b);
    if (!(err <= atol + rtol * std::abs(b))) {
      if (first < 0) first = i;
      ++bad;
    }
    if (err > worst || std::isnan(err)) worst = err;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.numel() << " elements differ (atol " << atol << ", rtol " << rtol
         << ", max |err| " << worst << "); first at flat index " << first << ": got "
         << got.item_as_double(first) << ", want " << want.item_as_double(first) << " in "
         << dims_str(got.dims());
}

::testing::AssertionResult all_equal(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype())
    return ::testing::AssertionFailure() << "dtype differs: got " << dtype_name(got.dtype())
                                         << ", want " << dtype_name(want.dtype());
  return all_close(got, want, 0, 0);
}

Parity parity(const Tensor& got, const Tensor& want) {
  Parity p;
  double dot = 0, ng = 0, nw = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.item_as_double(i), b = want.item_as_double(i);
    p.max_abs = std::isnan(a - b) ? INFINITY : std::max(p.max_abs, std::abs(a - b));
    p.max_ref = std::max(p.max_ref, std::abs(b));
    dot += a * b;
    ng += a * a;
    nw += b * b;
  }
  p.cosine = ng == 0 && nw == 0 ? 1 : dot / std::sqrt(ng * nw);
  return p;
}

CliResult run_cli(const std::string& args) {
  return run_command(std::string(RLX_CLI_PATH) + " " + args);
}

CliResult run_command(const std::string& command) {
  CliResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

FileSizeLimit::FileSizeLimit(uint64_t bytes) {
  old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
  rlimit r{};
  getrlimit(RLIMIT_FSIZE, &r);
  old_cur_ = r.rlim_cur;
  r.rlim_cur = bytes;
  setrlimit(RLIMIT_FSIZE, &r);
}

FileSizeLimit::~FileSizeLimit() {
  rlimit r{};
  getrlimit(RLIMIT_FSIZE, &r);
  r.rlim_cur = old_cur_;
  setrlimit(RLIMIT_FSIZE, &r);
  std::signal(SIGXFSZ, old_handler_);
}

std::vector<std::string> list_dir(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<uint8_t> random_quant_rows(quant::GgmlType t, int64_t N, int64_t K, uint32_t seed) {
  const size_t rb = quant::row_size(t, K);
  std::vector<uint8_t> w(size_t(N) * rb);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    const float scale = 0.5f + float(n % 5) * 0.3f;
    for (float& v : row) v = d(rng) * scale;
    if (n % 7 == 3) row[size_t(n) % size_t(K)] = 40.f * scale;  // an outlier
    quant::quantize(t, row.data(), w.data() + size_t(n) * rb, K);
  }
  // q8_0 files may hold -128, which our quantizer never writes.
  if (t == quant::GgmlType::Q8_0)
    for (size_t b = 0; b < w.size() / 34; b += 3) w[b * 34 + 2 + b % 32] = 0x80;
  return w;
}

}  // namespace rlx::testing
