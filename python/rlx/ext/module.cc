// rlx._rlx: the extension module behind the `rlx` Python package
// (python/rlx/__init__.py re-exports it with the pure-Python parts).
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "rlx/rlx.h"

namespace py = pybind11;

PYBIND11_MODULE(_rlx, m) {
  m.doc() = "rlx's native extension; use the `rlx` package.";
  // rlx::Error -> rlx.Error (a RuntimeError) with the C++ message.
  py::register_exception<rlx::Error>(m, "Error", PyExc_RuntimeError);
  m.attr("__version__") = rlx::kVersion;
  m.def("set_num_threads", &rlx::set_num_threads, py::arg("n"),
        "Worker threads of rlx's process-wide pool, the caller included; 0: all cores.");
  m.def("num_threads", &rlx::num_threads, "Worker threads of rlx's pool.");
  rlx::python::bind_model(m);
  rlx::python::bind_llm(m);
  rlx::python::bind_train(m);
}
