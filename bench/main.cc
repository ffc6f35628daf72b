// rlx_bench: sgemm, norms/softmax/element-wise, ResNet-18 convs, attention and
// memory bandwidth, timed through the public runtime (Builder ->
// Executable::compile -> Session::run). scripts/bench.sh runs it next to the
// PyTorch peer (bench/torch_peer.py) and joins the two with bench/compare.py.
#include <cstdio>
#include <string>

#include "bench_util.h"
#include "rlx/cpu_isa.h"

int main(int argc, char** argv) {
  using namespace rlx::bench;
  rlx::set_num_threads(bench_threads());
  const MachinePeak& peak = machine_peak();
  benchmark::AddCustomContext("rlx_threads", std::to_string(rlx::num_threads()));
  benchmark::AddCustomContext("cpu_ghz", std::to_string(peak.ghz));
  benchmark::AddCustomContext("cpu_ghz_source", peak.ghz_source);
  benchmark::AddCustomContext("peak_cores", std::to_string(peak.cores));
  benchmark::AddCustomContext("online_cpus", std::to_string(peak.online_cpus));
  benchmark::AddCustomContext("fp32_peak_gflops", std::to_string(peak.gflops));
  benchmark::AddCustomContext("cpu_isa", rlx::isa_name(rlx::cpu_isa()));
  benchmark::AddCustomContext(
      "fp32_peak_formula",
      "cores x GHz x " + std::to_string(peak.flop_per_cycle) + " FLOP/cycle (2 FMA pipes)");

  register_memory();
  register_matmul();
  register_elementwise();
  register_conv();
  register_attention();
  register_attention_grad();
  register_dequant_matmul();
  register_state_space();

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
