// NumPy <-> rlx::Tensor for the Python bindings.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace rlx::python {

namespace py = pybind11;

// The NumPy dtype an rlx dtype comes back as. bf16 has no NumPy dtype: it
// comes back as float32 (every bf16 value is exactly a float32).
py::dtype numpy_dtype(DType t);

// `value` (an ndarray, or anything np.asarray takes) as a tensor for an input
// declared `want`. A C-contiguous, aligned array of the declared dtype is
// borrowed, not copied: it is appended to `keep`, which must outlive the
// tensor's use. bf16 inputs take float32 (rounded to nearest even) or uint16
// (raw bf16 bits). Other dtypes than the declared one are converted only with
// `cast`; else rlx::Error names the input, both dtypes and the way out.
Tensor to_tensor(const py::handle& value, const std::string& name, const Shape& declared, bool cast,
                 std::vector<py::object>& keep);

// A tensor as a NumPy array that shares its buffer (the array keeps the
// buffer alive); bf16 is converted to float32.
py::array to_numpy(const Tensor& t);

// `value` (anything np.asarray takes) as a tensor of its own dtype and shape,
// copied so that it outlives the array; rlx::Error names `name` when rlx has
// no such dtype.
Tensor owned_tensor(const py::handle& value, const std::string& name);

// `arrays` ({name: array}) as tensors for the values `named` (name, declared
// shape), each converted by to_tensor without casting. A name not in `named`
// is an rlx::Error "<who>: '<name>' is not <what> (<the names>)". Missing
// names are the caller's to check.
TensorMap named_tensors(const py::dict& arrays,
                        const std::vector<std::pair<std::string, Shape>>& named,
                        const std::string& who, const std::string& what,
                        std::vector<py::object>& keep);

// os.fspath(p): a str, or a path-like object's path.
std::string fspath(const py::handle& p);

// [2, "seq", 64] for a shape's dims.
py::tuple dims_tuple(const Shape& s);

}  // namespace rlx::python
