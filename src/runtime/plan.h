// Specializing a graph to concrete input dims, and liveness-based arena planning.
#pragma once
#include <map>
#include <string>

#include "rlx/graph.h"
#include "rlx/runtime.h"

namespace rlx::runtime {

// Binds symbolic dims from the given input dims and infers every node's
// concrete dims. Throws when inputs disagree with declared static dims or
// with each other on a symbol.
std::vector<Dims> specialize(const Graph& g, const std::map<std::string, Dims>& input_dims);

// Assigns arena offsets to every computed node (not leaves, not graph
// outputs, which get their own tensors): a node's slot is reused once its last
// consumer has run. First fit over free gaps, 64-byte aligned. Reshapes that
// are not graph outputs get no slot: they view their input (Plan::alias).
Plan plan_memory(const Graph& g, std::vector<Dims> dims);

// "b=2,seq=7" style cache key of input dims.
std::string shape_signature(const std::map<std::string, Dims>& input_dims);

}  // namespace rlx::runtime
