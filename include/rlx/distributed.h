// Data-parallel training across processes: the processes an MPI launcher
// (`mpirun -np N rlx train ...`) started, or a world of one. rlx does no
// networking of its own; collectives are MPI's.
#pragma once
#include <span>
#include <string>

#include "rlx/io.h"

namespace rlx::dist {

// Whether this rlx was built with MPI (CMake found it and RLX_MPI is on).
bool built_with_mpi();
// The MPI library's name and version ("Open MPI v4.1.4"); "" without MPI.
std::string mpi_library();
// Whether an MPI launcher started this process (it set its rank variables).
bool launched_by_mpi();

// The processes of one run. Constructing a World initializes MPI when an MPI
// launcher started this process; otherwise it is a world of one that touches
// nothing. Throws rlx::Error when launched by mpirun but built without MPI
// (each process would train alone and all would write the same files). One
// World at a time; its destructor finalizes MPI if the World started it.
class World {
 public:
  World();
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool root() const { return rank_ == 0; }
  // Processes of this run on this machine, to share its cores between them.
  int local_size() const { return local_size_; }

  // Element-wise sums across every rank, in place; every rank gets the result.
  void sum(std::span<float> data) const;
  void sum(std::span<double> data) const;
  // Ends every process of the run with `code`: an error on one rank would
  // otherwise leave the others waiting in a collective forever.
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0, size_ = 1, local_size_ = 1;
  bool mpi_ = false;
};

// Data-parallel averaging: every tensor of `tensors` (contiguous f32, the
// same names on every rank) is scaled by `share` (this rank's fraction of the
// global batch) and summed across the world, so from gradients each rank ends
// with the global batch's mean-loss gradient. One message for all tensors.
void reduce_weighted(const World& world, TensorMap& tensors, double share);

}  // namespace rlx::dist
