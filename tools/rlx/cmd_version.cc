#include <cstdio>

#include "commands.h"
#include "rlx/cpu_isa.h"
#include "rlx/distributed.h"

namespace rlx::cli {

void add_version_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print the rlx version and build facts");
  cmd->callback([] {
    std::printf("rlx %s\n", kVersion);
    std::printf("ops: %d   threads: %d\n", num_ops(), num_threads());
    // The kernels' path: RLX_ISA=portable|avx2 forces a lower one.
    const Isa isa = cpu_isa();
    std::printf("isa: %s (cpu has %s)   f32 gemm: %s\n", isa_name(isa), isa_name(detected_isa()),
                isa == Isa::avx512 ? "rlx avx512 (openblas for <= 16 columns)"
                : isa == Isa::avx2 ? "rlx avx2 (openblas for <= 8 columns)"
                                   : "openblas");
    std::printf("--matmul-precision bf16: %s\n",
                isa == Isa::avx512 && has_avx512_bf16()
                    ? "rlx avx512-bf16 kernel"
                    : "no AVX-512 BF16 on this path: such matmuls run in f32");
    const std::string mpi = dist::mpi_library();
    std::printf("mpi: %s\n", mpi.empty() ? "not built in (rlx train runs in one process)"
                                         : (mpi + " (mpirun -np N rlx train ...)").c_str());
  });
}

}  // namespace rlx::cli
