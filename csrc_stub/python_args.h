// Reading Python arguments in the stub's METH_FASTCALL functions (module.cpp, replay.cpp).
#pragma once

#include "mydev.h"

#include <Python.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>

#include <cstdint>
#include <string>

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

// A new strided mydev tensor from Python's (sizes, strides, dtype, device index), into
// `out` (`empty_strided`); false with a Python error set: a TypeError led by `who` when an
// argument is not of its type. _empty_strided's arguments and a replay record's first four
// fields both come this way.
inline bool new_strided(
    const char* who,
    PyObject* sizes,
    PyObject* strides,
    PyObject* dtype,
    PyObject* index,
    at::Tensor& out) {
  c10::SmallVector<int64_t, 8> size_values;
  c10::SmallVector<int64_t, 8> stride_values;
  const std::string sizes_error = std::string(who) + ": sizes must be a sequence of ints";
  const std::string strides_error = std::string(who) + ": strides must be a sequence of ints";
  if (!read_ints(sizes, sizes_error.c_str(), size_values) ||
      !read_ints(strides, strides_error.c_str(), stride_values)) {
    return false;
  }
  if (!THPDtype_Check(dtype)) {
    PyErr_Format(PyExc_TypeError, "%s: dtype must be a torch.dtype", who);
    return false;
  }
  const long long device = PyLong_AsLongLong(index);
  if (device == -1 && PyErr_Occurred()) {
    return false;
  }
  out = empty_strided(
      size_values, stride_values, reinterpret_cast<THPDtype*>(dtype)->scalar_type, device);
  return true;
}

} // namespace mydev
