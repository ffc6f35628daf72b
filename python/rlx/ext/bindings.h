// The parts of the `rlx._rlx` extension module, one function per file.
#pragma once
#include <pybind11/pybind11.h>

namespace rlx::python {

void bind_model(pybind11::module_& m);  // load, Model, TensorSpec, CoreML export (model.cc)
void bind_llm(pybind11::module_& m);    // _LLM, _Sampler (llm.cc)
void bind_train(pybind11::module_& m);  // Trainer (train.cc)

}  // namespace rlx::python
