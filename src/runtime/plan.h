// Specializing a graph to concrete input dims, and liveness-based arena planning.
#pragma once
#include <map>
#include <string>

#include "rlx/graph.h"
#include "rlx/runtime.h"

namespace rlx::runtime {

// Extents of data-dependent dims found by running their nodes (rlx/graph.h:
// data_dependent_dim), by symbol.
using Counts = std::map<std::string, int64_t>;

// Binds symbolic dims from the given input dims and infers every node's
// concrete dims. Throws when inputs disagree with declared static dims or
// with each other on a symbol. A node with data-dependent dims whose count is
// not in `counts`, and every node that reads it, is marked in `pending` (when
// given; else it is an error) and gets no dims: only running it tells them.
std::vector<Dims> specialize(const Graph& g, const std::map<std::string, Dims>& input_dims,
                             const Counts& counts = {}, std::vector<bool>* pending = nullptr);

// Assigns arena offsets to every computed node (not leaves, not graph
// outputs, which get their own tensors): a node's slot is reused once its last
// consumer has run. First fit over free gaps, 64-byte aligned. Reshapes that
// are not graph outputs get no slot: they view their input (Plan::alias).
// Pending nodes (see specialize) get no slot.
Plan plan_memory(const Graph& g, std::vector<Dims> dims, std::vector<bool> pending = {});

// "b=2,seq=7" style cache key of input dims (and of the counts found so far).
std::string shape_signature(const std::map<std::string, Dims>& input_dims,
                            const Counts& counts = {});

}  // namespace rlx::runtime
