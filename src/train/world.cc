// rlx::dist::World on MPI's C API (Open MPI from Debian; any MPI-3 works),
// compiled against it when CMake found it (RLX_WITH_MPI). Only the main
// thread calls MPI, so MPI_THREAD_FUNNELED is all rlx asks for.
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "rlx/distributed.h"
#include "rlx/error.h"

#if RLX_WITH_MPI
// The C API only: the deprecated C++ bindings do not compile warning-free.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#endif

namespace rlx::dist {

namespace {
bool world_alive = false;
#if RLX_WITH_MPI
bool initialized_here = false;  // MPI_Init by a World, so its end finalizes
#endif
}  // namespace

bool built_with_mpi() { return RLX_WITH_MPI != 0; }

std::string mpi_library() {
#if RLX_WITH_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int n = 0;
  MPI_Get_library_version(text, &n);  // callable before MPI_Init
  const std::string full(text, size_t(n));
  return full.substr(0, full.find_first_of(",\n"));
#else
  return "";
#endif
}

bool launched_by_mpi() {
  // Open MPI, PMIx launchers (Open MPI 5, Slurm), MPICH/Hydra and Intel MPI.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

World::World() {
  RLX_CHECK(!world_alive, "rlx::dist::World: one World at a time");
  if (!launched_by_mpi()) {
    world_alive = true;
    return;
  }
  RLX_CHECK(built_with_mpi(),
            "this process was started by an MPI launcher, but this rlx was built without MPI "
            "(install libopenmpi-dev and rebuild, or run it without mpirun)");
#if RLX_WITH_MPI
  int ready = 0, ended = 0;
  MPI_Finalized(&ended);
  RLX_CHECK(!ended, "MPI was finalized in this process: one data-parallel World per process");
  MPI_Initialized(&ready);
  if (!ready) {
    int provided = 0;
    RLX_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS,
              "MPI_Init_thread failed");
    initialized_here = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &local_size_);
  MPI_Comm_free(&local);
  mpi_ = true;
#endif
  world_alive = true;
}

World::~World() {
#if RLX_WITH_MPI
  // MPI cannot start twice in a process: a host program's MPI is left running.
  if (mpi_ && initialized_here) {
    MPI_Finalize();
    initialized_here = false;
  }
#endif
  world_alive = false;
}

namespace {
// MPI counts are int: longer buffers go in int-sized pieces.
template <typename T>
void allreduce_sum(bool mpi, std::span<T> data) {
#if RLX_WITH_MPI
  if (!mpi) return;
  const MPI_Datatype type = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
  constexpr size_t kMaxCount = size_t(std::numeric_limits<int>::max());
  for (size_t at = 0; at < data.size(); at += kMaxCount) {
    const int n = int(std::min(kMaxCount, data.size() - at));
    RLX_CHECK(MPI_Allreduce(MPI_IN_PLACE, data.data() + at, n, type, MPI_SUM, MPI_COMM_WORLD) ==
                  MPI_SUCCESS,
              "MPI_Allreduce of ", n, " values failed");
  }
#else
  (void)mpi, (void)data;
#endif
}
}  // namespace

void World::sum(std::span<float> data) const { allreduce_sum(mpi_, data); }
void World::sum(std::span<double> data) const { allreduce_sum(mpi_, data); }

void World::abort(int code) const {
#if RLX_WITH_MPI
  if (mpi_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

void reduce_weighted(const World& world, TensorMap& tensors, double share) {
  if (world.size() == 1) return;
  size_t total = 0;
  for (const auto& [name, t] : tensors) {
    RLX_CHECK(t.dtype() == DType::F32 && t.is_contiguous(), "reduce_weighted: '", name,
              "' is not a contiguous f32 tensor (", dtype_name(t.dtype()), ")");
    total += size_t(t.numel());
  }
  // Packed into one buffer: one collective per step instead of one per tensor;
  // kept from step to step, so a large model's buffer is not faulted in anew.
  thread_local std::vector<float> packed;
  packed.resize(total);
  const float s = float(share);
  size_t at = 0;
  for (const auto& [name, t] : tensors) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) packed[at++] = p[i] * s;
  }
  world.sum(packed);
  at = 0;
  for (auto& [name, t] : tensors) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = packed[at++];
  }
}

}  // namespace rlx::dist
