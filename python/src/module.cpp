// tessera._C: nanobind module. Tensors cross through DLPack (numpy, torch, ...); nothing links libtorch.
// tessera::Error is translated into the exception classes of tessera/errors.py (TesseraError is a ValueError that
// carries .argument; kUnsupported becomes TesseraUnsupportedError, also a NotImplementedError; CUDA/IO/format/internal
// errors become TesseraRuntimeError, a RuntimeError).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "tessera/error.hpp"
#include "tessera/version.hpp"

namespace nb = nanobind;

namespace tessera::py {
void bind_cpu(nb::module_& m);
void bind_gpu(nb::module_& m);
void bind_plan_table(nb::module_& m);
}  // namespace tessera::py

NB_MODULE(_C, m) {
  m.doc() = "Tessera native extension (low-level; use the tessera package)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tessera::Error& e) {
      nb::object make = nb::module_::import_("tessera.errors").attr("_from_native");
      nb::object exc = make(tessera::error_code_name(e.code()), e.argument(), e.message());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
  m.def("version", [] { return tessera::version(); }, "Tessera library version string.");
  m.def("git_revision", [] { return tessera::git_revision(); }, "Git revision the library was built from.");
  tessera::py::bind_cpu(m);
  tessera::py::bind_gpu(m);
  tessera::py::bind_plan_table(m);
}
