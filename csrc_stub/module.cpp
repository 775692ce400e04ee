// torch_mydev._C: the Python bindings of the stub (allocation primitive, statistics,
// generator). Python-facing names start with an underscore; torch_mydev wraps them.
#include "mydev.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/impl/COW.h>
// Its alignas(hardware_destructive_interference_size) warns under GCC; nothing of ours
// depends on that value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winterference-size"
#include <ATen/core/CachingHostAllocator.h>
#pragma GCC diagnostic pop
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <c10/util/SmallVector.h>
#include <torch/extension.h>
#include <torch/version.h>

namespace mydev {

at::Tensor empty_strided(
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    c10::ScalarType dtype,
    int64_t index) {
  const DeviceScope scope(resolve_device(index));
  TORCH_CHECK(
      sizes.size() == strides.size(),
      "mydev empty_strided: got ",
      sizes.size(),
      " sizes but ",
      strides.size(),
      " strides");
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(sizes, strides, allocator(), keys, dtype);
}

namespace {

// The allocator's counters of one device, flat and named as torch.cuda.memory_stats
// (and torch.accelerator.memory_stats) name them.
pybind11::dict stats_dict(int64_t index) {
  using c10::CachingAllocator::Stat;
  using c10::CachingAllocator::StatArray;
  const c10::CachingDeviceAllocator::DeviceStats s = device_stats(resolve_device(index));
  pybind11::dict d;
  const auto add_stat = [&d](const std::string& prefix, const Stat& stat) {
    d[pybind11::str(prefix + ".current")] = stat.current;
    d[pybind11::str(prefix + ".peak")] = stat.peak;
    d[pybind11::str(prefix + ".allocated")] = stat.allocated;
    d[pybind11::str(prefix + ".freed")] = stat.freed;
  };
  const std::pair<const char*, const StatArray*> arrays[] = {
      {"allocation", &s.allocation},
      {"segment", &s.segment},
      {"active", &s.active},
      {"inactive_split", &s.inactive_split},
      {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes},
      {"active_bytes", &s.active_bytes},
      {"inactive_split_bytes", &s.inactive_split_bytes},
      {"requested_bytes", &s.requested_bytes}};
  const char* pools[] = {"all", "small_pool", "large_pool"};
  for (const auto& [name, array] : arrays) {
    for (size_t pool = 0; pool < 3; ++pool) {
      add_stat(std::string(name) + "." + pools[pool], (*array)[pool]);
    }
  }
  add_stat("oversize_allocations", s.oversize_allocations);
  add_stat("oversize_segments", s.oversize_segments);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["max_split_size"] = s.max_split_size;
  return d;
}

// The pinned host allocator's counters, named as torch.cuda.host_memory_stats names them.
pybind11::dict host_stats_dict() {
  const at::HostStats s = at::getHostAllocator(kDeviceType)->get_stats();
  pybind11::dict d;
  const auto add_stat = [&d](const std::string& prefix, const c10::CachingAllocator::Stat& stat) {
    d[pybind11::str(prefix + ".current")] = stat.current;
    d[pybind11::str(prefix + ".peak")] = stat.peak;
    d[pybind11::str(prefix + ".allocated")] = stat.allocated;
    d[pybind11::str(prefix + ".freed")] = stat.freed;
  };
  add_stat("allocations", s.allocations);
  add_stat("allocated_bytes", s.allocated_bytes);
  add_stat("active_requests", s.active_requests);
  add_stat("active_bytes", s.active_bytes);
  d["num_host_alloc"] = s.num_host_alloc;
  d["num_host_free"] = s.num_host_free;
  return d;
}

// What the per-call path of a Python kernel reads of its tensors, in one call instead of
// about ten attribute reads per tensor (each a round trip through Python's bindings):
//
//   _signature(t0, t1, ...) -> (signature, flags, data_ptr0, storage_ptr0, storage_nbytes0,
//                               data_ptr1, ...)
//
// `signature` is a bytes object that equals another call's exactly when every tensor has the
// same sizes, strides, dtype, device (CPU or mydev) and lazy conjugate/negative bits: a
// dictionary key for what a kernel decides from layouts alone, never decoded. `flags` ORs
// kFlagConj / kFlagNeg over the tensors, and kFlagCow when a storage is copy-on-write
// (Tensor._lazy_clone; not part of the key): a per-call path that writes a tensor then goes
// to the general path, which materialises what it writes first. The addresses are read
// through const access, so reading them materialises nothing. None when any argument is not
// a strided tensor with storage in host memory (CPU or mydev): the caller then takes its
// general path, which raises the right error. Reads metadata only: no layout rule lives here.
constexpr int64_t kFlagConj = 1;
constexpr int64_t kFlagNeg = 2;
constexpr int64_t kFlagCow = 4;

constexpr Py_ssize_t kMaxTensors = 8;
using LayoutKey = c10::SmallVector<int64_t, 64>;

// Reads the tensors `args[0..n)` into `tensors` and their layout key into `key` (the
// `signature` bytes, as int64 words), OR-ing their lazy bits into `flags_any`. False when a
// tensor is not a strided host tensor with storage (the caller answers None); raises
// TypeError (returns false with the error set and `error` true) for a non-tensor.
bool read_layouts(
    PyObject* const* args,
    Py_ssize_t n,
    const at::Tensor** tensors,
    LayoutKey& key,
    int64_t& flags_any,
    bool& error) {
  error = false;
  size_t words = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!THPVariable_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "_signature takes tensors only");
      error = true;
      return false;
    }
    const at::Tensor& t = THPVariable_Unpack(args[i]);
    if (!t.defined() || t.layout() != c10::kStrided || !t.has_storage()) {
      return false;
    }
    const c10::DeviceType type = t.device().type();
    if (type != c10::DeviceType::CPU && type != kDeviceType) {
      return false;
    }
    tensors[i] = &t;
    words += 2 + 2 * static_cast<size_t>(t.dim());
  }
  key.resize(words);
  size_t w = 0;
  flags_any = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    const at::Tensor& t = *tensors[i];
    const int64_t flags = (t.is_conj() ? kFlagConj : 0) | (t.is_neg() ? kFlagNeg : 0);
    flags_any |= flags;
    if (c10::impl::cow::is_cow_data_ptr(t.storage().data_ptr())) {
      flags_any |= kFlagCow;
    }
    // 0 on CPU, 1 + the index on mydev.
    const int64_t device =
        t.device().type() == kDeviceType ? 1 + static_cast<int64_t>(t.device().index()) : 0;
    // One word of ndim, dtype, device and flags, one of 0 (room for later facts), then sizes
    // and strides.
    key[w++] = t.dim() | (static_cast<int64_t>(t.scalar_type()) << 16) | (device << 32) |
        (flags << 48);
    key[w++] = 0;
    for (const int64_t size : t.sizes()) {
      key[w++] = size;
    }
    for (const int64_t stride : t.strides()) {
      key[w++] = stride;
    }
  }
  return true;
}

PyObject* key_bytes(const LayoutKey& key) {
  return PyBytes_FromStringAndSize(
      reinterpret_cast<const char*>(key.data()),
      static_cast<Py_ssize_t>(key.size() * sizeof(int64_t)));
}

uintptr_t start_of(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.storage().data()) +
      static_cast<uintptr_t>(t.storage_offset() * t.element_size());
}

PyObject* signature(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs < 1 || nargs > kMaxTensors) {
    PyErr_SetString(PyExc_TypeError, "_signature takes 1 to 8 tensors");
    return nullptr;
  }
  const at::Tensor* tensors[kMaxTensors];
  LayoutKey key;
  int64_t flags_any = 0;
  bool error = false;
  if (!read_layouts(args, nargs, tensors, key, flags_any, error)) {
    if (error) {
      return nullptr;
    }
    Py_RETURN_NONE;
  }
  PyObject* result = PyTuple_New(2 + 3 * nargs);
  if (result == nullptr) {
    return nullptr;
  }
  PyTuple_SET_ITEM(result, 0, key_bytes(key));
  PyTuple_SET_ITEM(result, 1, PyLong_FromLongLong(flags_any));
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    const at::Tensor& t = *tensors[i];
    const c10::Storage& storage = t.storage();
    PyTuple_SET_ITEM(result, 2 + 3 * i, PyLong_FromUnsignedLongLong(start_of(t)));
    PyTuple_SET_ITEM(
        result,
        3 + 3 * i,
        PyLong_FromUnsignedLongLong(reinterpret_cast<uintptr_t>(storage.data())));
    PyTuple_SET_ITEM(result, 4 + 3 * i, PyLong_FromSize_t(storage.nbytes()));
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(result); ++i) {
    if (PyTuple_GET_ITEM(result, i) == nullptr) {
      Py_DECREF(result);
      return nullptr;
    }
  }
  return result;
  END_HANDLE_TH_ERRORS
}


// Reads a sequence of Python ints (tuple, list, torch.Size) into `out`; false with a
// TypeError set when it is not one.
bool read_ints(PyObject* seq, const char* what, c10::SmallVector<int64_t, 8>& out) {
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

// _empty_strided(sizes, strides, dtype, index): `empty_strided` for Python, without pybind's
// argument conversion (the allocation is on every functional op's per-call path).
PyObject* empty_strided_py(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "_empty_strided(sizes, strides, dtype, index)");
    return nullptr;
  }
  c10::SmallVector<int64_t, 8> sizes;
  c10::SmallVector<int64_t, 8> strides;
  if (!read_ints(args[0], "_empty_strided: sizes must be a sequence of ints", sizes) ||
      !read_ints(args[1], "_empty_strided: strides must be a sequence of ints", strides)) {
    return nullptr;
  }
  if (!THPDtype_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "_empty_strided: dtype must be a torch.dtype");
    return nullptr;
  }
  const c10::ScalarType dtype = reinterpret_cast<THPDtype*>(args[2])->scalar_type;
  const long long index = PyLong_AsLongLong(args[3]);
  if (index == -1 && PyErr_Occurred()) {
    return nullptr;
  }
  return THPVariable_Wrap(empty_strided(sizes, strides, dtype, index));
  END_HANDLE_TH_ERRORS
}

// _storage_span(tensor) -> (address of the storage's first byte, the storage's bytes), read
// through const access: unlike UntypedStorage.data_ptr(), which takes mutable access, it
// leaves a copy-on-write storage as it is. For Python kernels reading their inputs.
PyObject* storage_span(PyObject* /*module*/, PyObject* arg) {
  HANDLE_TH_ERRORS
  if (!THPVariable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "_storage_span takes a tensor");
    return nullptr;
  }
  const at::Tensor& t = THPVariable_Unpack(arg);
  TORCH_CHECK(t.defined() && t.has_storage(), "_storage_span: the tensor has no storage");
  const c10::Storage& storage = t.storage();
  return Py_BuildValue(
      "(Kn)",
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(storage.data())),
      static_cast<Py_ssize_t>(storage.nbytes()));
  END_HANDLE_TH_ERRORS
}

// _fill_uninitialized(tensor): fill_uninitialized (factories.cpp) for the Python factories
// (empty_like); returns None.
PyObject* fill_uninitialized_py(PyObject* /*module*/, PyObject* arg) {
  HANDLE_TH_ERRORS
  if (!THPVariable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "_fill_uninitialized takes a tensor");
    return nullptr;
  }
  fill_uninitialized(THPVariable_Unpack(arg));
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// _event_elapsed_time(start, end): start.elapsed_time(end) for torch.Event objects and their
// subclasses (torch.Event.elapsed_time accepts exactly torch.Event as `end`, so
// torch.mydev.Event, a subclass, goes through here). The checks are c10::Event's: ValueError
// unless both were made with enable_timing=True and both were recorded.
PyObject* event_elapsed_time(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_event_elapsed_time(start, end)");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < 2; ++i) {
    const int is_event = THPEventClass == nullptr
        ? 0
        : PyObject_IsInstance(args[i], reinterpret_cast<PyObject*>(THPEventClass));
    if (is_event < 0) {
      return nullptr;
    }
    TORCH_CHECK(is_event == 1, "expected other to be a torch.Event object");
  }
  const auto* start = reinterpret_cast<THPEvent*>(args[0]);
  const auto* end = reinterpret_cast<THPEvent*>(args[1]);
  return PyFloat_FromDouble(start->event.elapsedTime(end->event));
  END_HANDLE_TH_ERRORS
}

// The record `table` holds for the layout key of the tensors `args[0..n)` (read into
// `tensors`), borrowed; nullptr when there is none to use (not host strided tensors, a lazy
// bit, no record) or, with a Python error set, on an error.
PyObject* find_record(
    PyObject* table, PyObject* const* args, Py_ssize_t n, const at::Tensor** tensors) {
  LayoutKey key;
  int64_t flags_any = 0;
  bool error = false;
  if (!read_layouts(args, n, tensors, key, flags_any, error) || flags_any != 0) {
    return nullptr;
  }
  PyObject* lookup = key_bytes(key);
  if (lookup == nullptr) {
    return nullptr;
  }
  PyObject* record = PyDict_GetItemWithError(table, lookup);  // borrowed
  Py_DECREF(lookup);
  return record;
}

// The new output a record describes in its first four fields (sizes, strides, dtype,
// device index), allocated into `out`; false with a Python error set on a bad record.
bool new_from_record(PyObject* record, at::Tensor& out) {
  c10::SmallVector<int64_t, 8> sizes;
  c10::SmallVector<int64_t, 8> strides;
  if (!read_ints(PyTuple_GET_ITEM(record, 0), "_replay: record sizes", sizes) ||
      !read_ints(PyTuple_GET_ITEM(record, 1), "_replay: record strides", strides)) {
    return false;
  }
  PyObject* dtype = PyTuple_GET_ITEM(record, 2);
  TORCH_CHECK(THPDtype_Check(dtype), "_replay: bad record dtype");
  const long long index = PyLong_AsLongLong(PyTuple_GET_ITEM(record, 3));
  if (index == -1 && PyErr_Occurred()) {
    return false;
  }
  out = empty_strided(sizes, strides, reinterpret_cast<THPDtype*>(dtype)->scalar_type, index);
  return true;
}

// _replay(table, a[, b]): the per-call path of an elementwise call signature Python has
// recorded (torch_mydev/ops/replay.py), in one call. `table` maps a layout key (the
// `_signature` bytes of the tensors) to a record
//   (sizes, strides, dtype, device, entry, params, extent_a, extent_b)
// made from the op's Python entry: the new output's layout, the address of a numba C entry
// `int64(out, a, b, params)` of the loop and of its packed parameters, and how many bytes
// each input's storage must hold from its first element. A hit allocates the output and
// runs the loop; anything else (not tensors, a lazy bit, no record, a storage too small)
// answers None and the Python path runs. Decides nothing: every fact came from Python.
PyObject* replay(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs < 2 || nargs > 3 || !PyDict_CheckExact(args[0])) {
    PyErr_SetString(PyExc_TypeError, "_replay(table, a[, b])");
    return nullptr;
  }
  const Py_ssize_t n = nargs - 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!THPVariable_Check(args[1 + i])) {
      Py_RETURN_NONE;  // a Python number: the Python path
    }
  }
  const at::Tensor* tensors[2];
  PyObject* record = find_record(args[0], args + 1, n, tensors);
  if (record == nullptr) {
    return PyErr_Occurred() ? nullptr : Py_NewRef(Py_None);
  }
  TORCH_CHECK(PyTuple_Check(record) && PyTuple_GET_SIZE(record) >= 8, "_replay: bad record");
  uintptr_t starts[2] = {0, 0};
  for (Py_ssize_t i = 0; i < n; ++i) {
    const at::Tensor& t = *tensors[i];
    starts[i] = start_of(t);
    const auto end = reinterpret_cast<uintptr_t>(t.storage().data()) + t.storage().nbytes();
    const long long extent = PyLong_AsLongLong(PyTuple_GET_ITEM(record, 6 + i));
    if (extent < 0 || end < starts[i] || end - starts[i] < static_cast<uintptr_t>(extent)) {
      if (PyErr_Occurred()) {
        return nullptr;
      }
      Py_RETURN_NONE;  // a storage smaller than the layout: the Python path raises
    }
  }
  const auto entry = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(record, 4));
  const auto params = PyLong_AsLongLong(PyTuple_GET_ITEM(record, 5));
  if (PyErr_Occurred()) {
    return nullptr;
  }
  at::Tensor out;
  if (!new_from_record(record, out)) {
    return nullptr;
  }
  using Loop = int64_t (*)(int64_t, int64_t, int64_t, int64_t);
  const int64_t status = reinterpret_cast<Loop>(entry)(
      static_cast<int64_t>(start_of(out)),
      static_cast<int64_t>(starts[0]),
      static_cast<int64_t>(n == 2 ? starts[1] : starts[0]),
      params);
  TORCH_CHECK(status == 0, "ZeroDivisionError");
  return THPVariable_Wrap(std::move(out));
  END_HANDLE_TH_ERRORS
}

// _replay_copy(table, dst, src): `dst.copy_(src)` (returns dst), or with dst None a new
// tensor laid out by the record filled from src (clone), for a layout pair Python has
// recorded (torch_mydev/ops/replay.py `record_copy`). The record is
//   (sizes, strides, dtype, device, unit, dst_extent, src_extent, entry, params)
// (the first four only for a new tensor): the unit both start addresses must be multiples
// of, the bytes each storage must hold from its first element, and the numba C entry of the
// copy loop with its parameters. One storage on both sides (Copy.cpp's overlap rules), a
// lazy bit (a copy-on-write storage too: dst is written at the address read here, so it must
// not be one), a misaligned address or a storage too small answer None: the Python path runs.
PyObject* replay_copy(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 3 || !PyDict_CheckExact(args[0])) {
    PyErr_SetString(PyExc_TypeError, "_replay_copy(table, dst or None, src)");
    return nullptr;
  }
  const bool into = args[1] != Py_None;
  if (!THPVariable_Check(args[2]) || (into && !THPVariable_Check(args[1]))) {
    Py_RETURN_NONE;
  }
  PyObject* operands[2] = {args[1], args[2]};
  const at::Tensor* tensors[2];
  PyObject* record =
      find_record(args[0], into ? operands : operands + 1, into ? 2 : 1, tensors);
  if (record == nullptr) {
    return PyErr_Occurred() ? nullptr : Py_NewRef(Py_None);
  }
  TORCH_CHECK(PyTuple_Check(record) && PyTuple_GET_SIZE(record) >= 9, "_replay_copy: bad record");
  const long long unit = PyLong_AsLongLong(PyTuple_GET_ITEM(record, 4));
  const long long extents[2] = {
      PyLong_AsLongLong(PyTuple_GET_ITEM(record, 5)), PyLong_AsLongLong(PyTuple_GET_ITEM(record, 6))};
  const auto entry = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(record, 7));
  const auto params = PyLong_AsLongLong(PyTuple_GET_ITEM(record, 8));
  if (PyErr_Occurred()) {
    return nullptr;
  }
  TORCH_CHECK(unit > 0, "_replay_copy: bad record unit");
  const at::Tensor& src = *tensors[into ? 1 : 0];
  uintptr_t starts[2] = {0, start_of(src)};
  const at::Tensor* sides[2] = {into ? tensors[0] : nullptr, &src};
  for (int i = into ? 0 : 1; i < 2; ++i) {
    const at::Tensor& t = *sides[i];
    if (i == 0) {
      starts[0] = start_of(t);
      if (t.storage().data() == src.storage().data()) {
        Py_RETURN_NONE;  // one storage: Copy.cpp's same-data and overlap rules
      }
    }
    const auto end = reinterpret_cast<uintptr_t>(t.storage().data()) + t.storage().nbytes();
    if (extents[i] < 0 || end < starts[i] ||
        end - starts[i] < static_cast<uintptr_t>(extents[i])) {
      Py_RETURN_NONE;
    }
  }
  at::Tensor out;
  if (!into) {
    if (!new_from_record(record, out)) {
      return nullptr;
    }
    starts[0] = start_of(out);
  }
  if ((starts[0] | starts[1]) % static_cast<uintptr_t>(unit) != 0) {
    Py_RETURN_NONE;  // the Python path picks a smaller unit
  }
  using Loop = int64_t (*)(int64_t, int64_t, int64_t, int64_t);
  reinterpret_cast<Loop>(entry)(
      static_cast<int64_t>(starts[0]), static_cast<int64_t>(starts[1]), 0, params);
  if (into) {
    Py_INCREF(args[1]);
    return args[1];
  }
  return THPVariable_Wrap(std::move(out));
  END_HANDLE_TH_ERRORS
}

// _adopt(tensor, index): adopt_cpu_result for Python, or None. The tensor is read in place
// from its Python object (no new reference), so "nothing else holds it" is exact.
PyObject* adopt_py(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 2 || !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "_adopt(tensor, index)");
    return nullptr;
  }
  const long long index = PyLong_AsLongLong(args[1]);
  if (index == -1 && PyErr_Occurred()) {
    return nullptr;
  }
  at::Tensor adopted = adopt_cpu_result(THPVariable_Unpack(args[0]), index);
  if (!adopted.defined()) {
    Py_RETURN_NONE;
  }
  return THPVariable_Wrap(std::move(adopted));
  END_HANDLE_TH_ERRORS
}

PyMethodDef kFastMethods[] = {
    {"_signature",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(signature)),
     METH_FASTCALL,
     "(signature bytes, flags, then data_ptr, storage data_ptr, storage nbytes of each tensor) "
     "of host strided tensors, else None"},
    {"_empty_strided",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(empty_strided_py)),
     METH_FASTCALL,
     "(sizes, strides, dtype, index) -> an uninitialised strided tensor on mydev"},
    {"_replay",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(replay)),
     METH_FASTCALL,
     "(table, a[, b]) -> the output of a recorded elementwise call signature, else None"},
    {"_replay_copy",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(replay_copy)),
     METH_FASTCALL,
     "(table, dst or None, src) -> dst, or a new tensor, for a recorded copy; else None"},
    {"_adopt",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(adopt_py)),
     METH_FASTCALL,
     "(cpu tensor, index) -> the tensor's memory as a new mydev tensor when nothing else holds "
     "it (the CPU tensor is left empty), else None"},
    {"_storage_span",
     storage_span,
     METH_O,
     "(tensor) -> (storage address, storage bytes), read without materialising a "
     "copy-on-write storage"},
    {"_fill_uninitialized",
     fill_uninitialized_py,
     METH_O,
     "(new mydev tensor) -> None: NaN / the dtype's maximum under deterministic algorithms with "
     "fill_uninitialized_memory, as torch's empty"},
    {"_event_elapsed_time",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(event_elapsed_time)),
     METH_FASTCALL,
     "(start, end) -> milliseconds between the records of two torch.Event objects"},
    {nullptr, nullptr, 0, nullptr}};

} // namespace

// c10d_backend.cpp: the _MydevBackend class (a c10d::Backend over gloo and CPU aliases).
void init_c10d(pybind11::module& m);

} // namespace mydev

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  if (!mydev::device_count_error().empty()) {
    throw std::runtime_error("torch_mydev: " + mydev::device_count_error());
  }
  m.doc() = "mydev runtime stub: allocator statistics, allocation primitive, generator";
  PyModule_AddFunctions(m.ptr(), mydev::kFastMethods);
  mydev::init_c10d(m);
  // The torch release whose headers and libraries this stub was built against.
  m.attr("TORCH_BUILD_VERSION") = TORCH_VERSION;
  m.attr("HUGE_PAGE_MIN_BYTES") = mydev::kHugePageMinBytes;
  m.attr("FLAG_CONJ") = mydev::kFlagConj;
  m.attr("FLAG_NEG") = mydev::kFlagNeg;
  m.attr("FLAG_COW") = mydev::kFlagCow;
  m.def("_memory_stats", &mydev::stats_dict, pybind11::arg("index") = -1,
        "Allocator counters of one device, torch.cuda.memory_stats names");
  m.def("_reset_peak_memory_stats", [](int64_t index) {
    mydev::reset_peak_memory_stats(mydev::resolve_device(index));
  });
  m.def("_reset_accumulated_memory_stats", [](int64_t index) {
    mydev::reset_accumulated_memory_stats(mydev::resolve_device(index));
  });
  m.def("_empty_cache", &mydev::empty_cache, "Free the blocks kept for reuse (all devices)");
  m.def("_mem_get_info", [](int64_t index) {
    mydev::check_device_index(index);
    return mydev::host_memory_info();
  }, "(free, total) bytes of host memory");
  m.def("_host_memory_stats", &mydev::host_stats_dict, "Pinned host allocator counters");
  m.def("_reset_host_peak_memory_stats", [] {
    at::getHostAllocator(mydev::kDeviceType)->reset_peak_stats();
  });
  m.def("_device_count", [] { return static_cast<int>(mydev::device_count()); });
  m.def("_check_device", [](int64_t index) { mydev::check_device_index(index); });
  m.def("_current_device", [] { return static_cast<int>(mydev::current_device()); });
  m.def("_set_device", [](int64_t index) {
    mydev::set_device(mydev::resolve_device(index));
  });
  // As torch.cuda._exchange_device: a negative index changes nothing and returns -1.
  m.def("_exchange_device", [](int64_t index) {
    if (index < 0) {
      return -1;
    }
    return static_cast<int>(mydev::exchange_device(mydev::resolve_device(index)));
  });
  m.def("_is_pinned_ptr", [](uintptr_t ptr) {
    return mydev::is_pinned(reinterpret_cast<const void*>(ptr));
  });
  m.def(
      "_cpu_alias",
      &mydev::cpu_alias,
      pybind11::arg("tensor"),
      pybind11::arg("like") = pybind11::none(),
      pybind11::arg("readonly") = false,
      "A CPU tensor over the mydev tensor's bytes (same sizes, strides, offset, dtype); with "
      "`like` (an earlier alias of the same storage) it shares that alias's CPU storage. A "
      "copy-on-write storage is materialised first unless `readonly` (the alias is then "
      "copy-on-write too)");
  pybind11::module_::import("atexit").attr("register")(
      pybind11::cpp_function(&mydev::python_exit_guard));
  m.def("_hold_alias_on_a_native_thread", &mydev::hold_alias_on_a_native_thread,
        "Testing hook: a native thread holds a CPU alias of the tensor");
  m.def("_drop_held_alias_now", &mydev::drop_held_alias_now,
        "Testing hook: that thread drops its alias while this call keeps the GIL");
  m.def("_default_generator", [](int64_t index) {
    mydev::check_device_index(index);
    return mydev::default_generator(static_cast<c10::DeviceIndex>(index));
  });
}
