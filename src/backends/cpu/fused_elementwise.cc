// fused_elementwise: a region's program evaluated in one pass over memory
// (our own code: no library evaluates an IR program). The output is walked in
// broadcast runs (ew_util.h), each cut into chunks of kChunk elements; every
// instruction runs over the whole chunk through the same span functions as
// the per-op kernels (elementwise_span.h), so results are bit-identical to the
// unfused ops, while only the region's inputs and output touch memory
// outside the cache. A value that no advancing operand feeds (a scalar or a
// broadcast constant along the run) is computed once per chunk, not per
// element.
#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backends/cpu/elementwise_span.h"
#include "backends/cpu/ew_util.h"
#include "backends/cpu/kernels.h"
#include "ir/elementwise_program.h"

namespace rlx::cpu {
namespace {

// Elements per instruction pass: small enough that the live chunks stay in
// L1/L2, large enough that an instruction's dispatch is noise.
constexpr int64_t kChunk = 512;

// A program ready to run: its instructions, and for every value (inputs,
// then instructions) the scratch slot that holds its chunk, reused once the
// value is dead. Inputs read in place have no slot (-1).
struct FusedPlan {
  EwProgram program;
  std::vector<int> slot;
  int slots = 0;
  bool heavy = false;  // some instruction costs tens of cycles per element
};

bool is_heavy(const EwInstr& in) {
  switch (op_family(in.op)) {
    case OpFamily::Unary:
      return unary_is_heavy(in.op);
    case OpFamily::Binary:
      return binary_is_heavy(in.op, in.attrs);
    default:
      return false;  // compares and where
  }
}

FusedPlan make_fused_plan(EwProgram p) {
  FusedPlan plan;
  const size_t values = size_t(p.inputs) + p.code.size();
  std::vector<size_t> last_use(values, 0);
  for (size_t i = 0; i < p.code.size(); ++i)
    for (int a : p.code[i].args) last_use[size_t(a)] = size_t(p.inputs) + i;
  plan.slot.assign(values, -1);
  std::vector<int> free_slots;
  auto take = [&] {
    if (free_slots.empty()) return plan.slots++;
    const int s = free_slots.back();
    free_slots.pop_back();
    return s;
  };
  for (int k = 0; k < p.inputs; ++k)
    if (p.is_mask[size_t(k)]) plan.slot[size_t(k)] = take();  // masks are widened to floats
  for (size_t i = 0; i < p.code.size(); ++i) {
    const size_t v = size_t(p.inputs) + i;
    // The result never shares a slot with an operand: a span reads an operand
    // that does not advance at [0] after writing y[0].
    plan.slot[v] = take();
    for (int a : p.code[i].args)
      if (last_use[size_t(a)] == v && plan.slot[size_t(a)] >= 0 &&
          std::count(free_slots.begin(), free_slots.end(), plan.slot[size_t(a)]) == 0)
        free_slots.push_back(plan.slot[size_t(a)]);
    plan.heavy = plan.heavy || is_heavy(p.code[i]);
  }
  plan.program = std::move(p);
  return plan;
}

// Programs parse once per process: compiled graphs run the same node many
// times, and the text with its input dtypes is the key. The cache forgets
// everything past kMaxPlans (a process that compiles model after model);
// callers hold their plan, so forgetting one in use is safe.
std::shared_ptr<const FusedPlan> cached_plan(const std::string& text,
                                             const std::vector<DType>& types) {
  constexpr size_t kMaxPlans = 4096;
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const FusedPlan>> cache;
  std::string key = text + '|';
  for (DType t : types) key += dtype_name(t);
  std::lock_guard lock(mu);
  if (auto at = cache.find(key); at != cache.end()) return at->second;
  if (cache.size() >= kMaxPlans) cache.clear();
  auto plan = std::make_shared<const FusedPlan>(make_fused_plan(parse_program(text, types)));
  cache.emplace(std::move(key), plan);
  return plan;
}

struct Operand {
  const float* p;
  bool advances;  // false: one value for the whole chunk, at p[0]
};

template <typename F>
void compare_span(Operand a, Operand b, float* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i)
    o[i] = f(a.p[a.advances ? i : 0], b.p[b.advances ? i : 0]) ? 1.0f : 0.0f;
}

// One instruction over n elements (1 when no operand advances).
void run_instr(const EwInstr& in, const Operand* arg, float* o, int64_t n, bool ggml) {
  switch (op_family(in.op)) {
    case OpFamily::Unary:
      return unary_span_f32(in.op, in.attrs, ggml, arg[0].p, o, n);
    case OpFamily::Binary:
      return binary_span_f32(in.op, in.attrs, arg[0].p, arg[0].advances, arg[1].p, arg[1].advances,
                             o, n);
    case OpFamily::Compare:
      switch (family_op<CompareOp>(in.op)) {
        case CompareOp::Eq:
          return compare_span(arg[0], arg[1], o, n, std::equal_to<float>());
        case CompareOp::Ne:
          return compare_span(arg[0], arg[1], o, n, std::not_equal_to<float>());
        case CompareOp::Lt:
          return compare_span(arg[0], arg[1], o, n, std::less<float>());
        case CompareOp::Le:
          return compare_span(arg[0], arg[1], o, n, std::less_equal<float>());
        case CompareOp::Gt:
          return compare_span(arg[0], arg[1], o, n, std::greater<float>());
        case CompareOp::Ge:
          return compare_span(arg[0], arg[1], o, n, std::greater_equal<float>());
      }
      return;
    default: {  // where
      const Operand c = arg[0], a = arg[1], b = arg[2];
      for (int64_t i = 0; i < n; ++i)
        o[i] = c.p[c.advances ? i : 0] != 0.0f ? a.p[a.advances ? i : 0] : b.p[b.advances ? i : 0];
    }
  }
}

}  // namespace

void fused_elementwise(const KernelCall& c) {
  const Node& node = c.node;
  std::vector<DType> types;
  for (const Tensor& t : c.in) types.push_back(t.dtype());
  const std::shared_ptr<const FusedPlan> held =
      cached_plan(node.attrs_as<FusedElementwiseAttrs>().program, types);
  const FusedPlan& plan = *held;
  const EwProgram& prog = plan.program;
  RLX_CHECK(c.out.dtype() == DType::F32, node.label(), ": output must be f32, got ",
            dtype_name(c.out.dtype()));
  if (c.out.numel() == 0) return;

  static const Dims kScalar;
  std::array<const Dims*, kMaxRegionInputs> dims;
  dims.fill(&kScalar);
  for (int k = 0; k < prog.inputs; ++k) dims[size_t(k)] = &c.in[size_t(k)].dims();
  const Broadcast<kMaxRegionInputs> bc(c.out.dims(), dims, node);
  float* out = c.out.data<float>();
  const size_t values = size_t(prog.inputs) + prog.code.size();
  const int64_t grain =
      plan.heavy ? kGrainHeavy : std::max<int64_t>(kChunk, kGrainCheap / int64_t(prog.code.size()));

  bc.parallel_runs(
      grain, [&](const std::array<int64_t, kMaxRegionInputs>& off, int64_t pos, int64_t len) {
        // Per worker, kept between runs: a [M, 4] * [4] region calls this M times.
        thread_local std::vector<float> scratch;
        thread_local std::vector<Operand> value;
        scratch.resize(size_t(plan.slots) * kChunk);
        value.resize(values);
        for (int64_t j = 0; j < len; j += kChunk) {
          const int64_t m = std::min(kChunk, len - j);
          for (int k = 0; k < prog.inputs; ++k) {
            const bool adv = bc.inner_stride(k) != 0;
            const int64_t at = off[size_t(k)] + (adv ? j : 0);
            if (!prog.is_mask[size_t(k)]) {
              value[size_t(k)] = {c.in[size_t(k)].data<float>() + at, adv};
              continue;
            }
            float* w = scratch.data() + plan.slot[size_t(k)] * kChunk;
            const bool* b = c.in[size_t(k)].data<bool>() + at;
            for (int64_t i = 0; i < (adv ? m : 1); ++i) w[i] = b[i] ? 1.0f : 0.0f;
            value[size_t(k)] = {w, adv};
          }
          for (size_t i = 0; i < prog.code.size(); ++i) {
            const EwInstr& in = prog.code[i];
            Operand arg[3];
            bool adv = false;
            for (size_t a = 0; a < in.args.size(); ++a) {
              arg[a] = value[size_t(in.args[a])];
              adv = adv || arg[a].advances;
            }
            const size_t v = size_t(prog.inputs) + i;
            const bool last = i + 1 == prog.code.size();
            float* o = last && adv ? out + pos + j : scratch.data() + plan.slot[v] * kChunk;
            run_instr(in, arg, o, adv ? m : 1, c.ctx.ggml_numerics);
            if (last && !adv) std::fill(out + pos + j, out + pos + j + m, o[0]);
            value[v] = {o, adv};
          }
        }
      });
}

}  // namespace rlx::cpu
