// Reading Python arguments in the stub's METH_FASTCALL functions (module.cpp, replay.cpp).
#pragma once

#include <Python.h>
#include <c10/util/SmallVector.h>

#include <cstdint>

namespace mydev {

// Reads a sequence of Python ints (tuple, list, torch.Size) into `out`; false with a
// TypeError set when it is not one.
inline bool read_ints(PyObject* seq, const char* what, c10::SmallVector<int64_t, 8>& out) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) {
    return false;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  PyObject** items = PySequence_Fast_ITEMS(fast);
  out.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long value = PyLong_AsLongLong(items[i]);
    if (value == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out[static_cast<size_t>(i)] = value;
  }
  Py_DECREF(fast);
  return true;
}

} // namespace mydev
