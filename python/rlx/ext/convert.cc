#include "convert.h"

#include <algorithm>
#include <cstring>

namespace rlx::python {
namespace {

// The rlx dtype of a NumPy dtype, or false when rlx has none (uint16 is
// reported separately: it stands for raw bf16 bits).
bool rlx_dtype_of(const py::dtype& d, DType& out) {
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f' && size == 4) return out = DType::F32, true;
  if (kind == 'f' && size == 2) return out = DType::F16, true;
  if (kind == 'f' && size == 8) return out = DType::F64, true;
  if (kind == 'i' && size == 1) return out = DType::I8, true;
  if (kind == 'i' && size == 2) return out = DType::I16, true;
  if (kind == 'i' && size == 4) return out = DType::I32, true;
  if (kind == 'i' && size == 8) return out = DType::I64, true;
  if (kind == 'u' && size == 1) return out = DType::U8, true;
  if (kind == 'b' && size == 1) return out = DType::Bool, true;
  return false;
}

std::string numpy_name(const py::dtype& d) { return d.attr("name").cast<std::string>(); }

Dims dims_of(const py::array& a) {
  Dims d;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) d.push_back(int64_t(a.shape(i)));
  return d;
}

// A borrowed view of a C-contiguous array; `keep` holds the array.
Tensor borrow(const py::array& a, DType dt, std::vector<py::object>& keep) {
  keep.push_back(a);
  const size_t bytes = size_t(a.nbytes());
  auto buf = make_borrowed_buffer(const_cast<void*>(a.data()), bytes);
  return Tensor(buf, 0, dims_of(a), dt);
}

}  // namespace

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::F32:
    case DType::BF16:
      return py::dtype("float32");
    case DType::F16:
      return py::dtype("float16");
    case DType::F64:
      return py::dtype("float64");
    case DType::I8:
      return py::dtype("int8");
    case DType::I16:
      return py::dtype("int16");
    case DType::I32:
      return py::dtype("int32");
    case DType::I64:
      return py::dtype("int64");
    case DType::U8:
      return py::dtype("uint8");
    case DType::Bool:
      return py::dtype("bool");
  }
  throw make_error("dtype ", int(t), " has no NumPy equivalent");
}

Tensor to_tensor(const py::handle& value, const std::string& name, const Shape& declared, bool cast,
                 std::vector<py::object>& keep) {
  const DType want = declared.dtype;
  py::array a;
  if (py::isinstance<py::array>(value)) {
    a = py::reinterpret_borrow<py::array>(value);
  } else {
    // Lists and scalars carry no dtype of their own: take the declared one.
    a = py::array::ensure(value, 0);
    if (!a)
      throw make_error("input '", name, "': cannot convert a ",
                       py::str(py::type::of(value)).cast<std::string>(), " to an array");
    a = a.attr("astype")(numpy_dtype(want));
  }
  const py::dtype dt = a.dtype();
  const bool c_contig = (a.flags() & py::array::c_style) != 0;
  const bool aligned = (a.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_) != 0;
  auto contiguous = [&](const py::dtype& to) {
    py::array c = py::module_::import("numpy").attr("ascontiguousarray")(a, to);
    return c;
  };

  if (want == DType::BF16) {
    if (dt.kind() == 'u' && dt.itemsize() == 2) {  // raw bf16 bits
      py::array c = c_contig && aligned ? a : contiguous(dt);
      return borrow(c, DType::BF16, keep);
    }
    if (!(dt.kind() == 'f' && dt.itemsize() == 4) && !cast)
      throw make_error("input '", name, "' is ", numpy_name(dt), " but the model declares ",
                       declared.str(),
                       "; pass float32 (rounded to bf16) or uint16 (raw bf16 bits), or "
                       "cast_inputs=True");
    py::array f = contiguous(py::dtype("float32"));
    Tensor t(dims_of(f), DType::BF16);
    const float* src = static_cast<const float*>(f.data());
    auto* dst = t.data<uint16_t>();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = f32_to_bf16(src[i]);
    return t;
  }

  DType have;
  if (!rlx_dtype_of(dt, have))
    throw make_error("input '", name, "' is ", numpy_name(dt),
                     ", which rlx has no dtype for; the model declares ", declared.str());
  if (have != want) {
    if (!cast)
      throw make_error("input '", name, "' is ", numpy_name(dt), " (", dtype_name(have),
                       ") but the model declares ", declared.str(), "; pass ",
                       numpy_name(numpy_dtype(want)), " or cast_inputs=True");
    py::array c = contiguous(dt);
    keep.push_back(c);
    return borrow(c, have, keep).to(want);
  }
  return borrow(c_contig && aligned ? a : contiguous(dt), want, keep);
}

py::array to_numpy(const Tensor& src) {
  Tensor t = src.contiguous();
  std::vector<py::ssize_t> shape(t.dims().begin(), t.dims().end());
  if (t.dtype() == DType::BF16) {
    py::array_t<float> out(shape);
    const auto* s = t.data<const uint16_t>();
    float* d = out.mutable_data();
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = bf16_to_f32(s[i]);
    return out;
  }
  // The capsule owns a handle on the tensor's buffer: the array shares the
  // memory and the session never reuses a buffer someone still holds.
  auto* keep = new Tensor(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(numpy_dtype(t.dtype()), shape, t.raw(), owner);
}

py::tuple dims_tuple(const Shape& s) {
  py::tuple out(s.dims.size());
  for (size_t i = 0; i < s.dims.size(); ++i) {
    const Dim& d = s.dims[i];
    if (d.is_static())
      out[i] = py::int_(d.value);
    else
      out[i] = py::str(d.sym);
  }
  return out;
}

Tensor owned_tensor(const py::handle& value, const std::string& name) {
  py::array a = py::module_::import("numpy").attr("asarray")(value);
  DType have;
  if (!rlx_dtype_of(a.dtype(), have))
    throw make_error("'", name, "' is ", numpy_name(a.dtype()), ", which rlx has no dtype for");
  std::vector<py::object> keep;
  return to_tensor(a, name, Shape(dims_of(a), have), false, keep).clone();
}

TensorMap named_tensors(const py::dict& arrays,
                        const std::vector<std::pair<std::string, Shape>>& named,
                        const std::string& who, const std::string& what,
                        std::vector<py::object>& keep) {
  TensorMap r;
  for (auto [key, value] : arrays) {
    const std::string name = py::str(key).cast<std::string>();
    auto it =
        std::find_if(named.begin(), named.end(), [&](const auto& n) { return n.first == name; });
    if (it == named.end()) {
      std::string known;
      for (const auto& n : named) known += (known.empty() ? "" : ", ") + n.first;
      throw make_error(who, ": '", name, "' is not ", what, " (", known, ")");
    }
    r[name] = to_tensor(value, name, it->second, false, keep);
  }
  return r;
}

std::string fspath(const py::handle& p) {
  return py::module_::import("os").attr("fspath")(p).cast<std::string>();
}

}  // namespace rlx::python
