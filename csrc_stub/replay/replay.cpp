// The stub's per-call replay (torch_mydev/ops/replay.py): `_signature`, the layout key of a
// call's tensors, and `_replay` / `_replay_copy`, which run a call signature Python has
// already answered and recorded, without entering Python. They decide nothing: every fact
// (the output's layout, the loop, its parameters, the bytes each storage must hold) comes
// from a record Python made.
#include "../mydev.h"
#include "../python_args.h"

#include <c10/core/impl/COW.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <cstdint>

namespace mydev {
namespace {

// ---- the replay record: its one definition ---------------------------------------------
// A record is a tuple (Python builds it by these names, exported as
// _C.REPLAY_RECORD_FIELDS) of
//   sizes, strides, dtype, device  the new output's layout (None, None, None, -1 for copy_,
//                                  which writes its dst)
//   entry, params                  the address of a numba C entry
//                                  `int64(out, operand0, operand1, params)` and of its
//                                  packed parameters
//   extent0, extent1               the bytes each operand's storage must hold from the
//                                  operand's first element (copy_: dst, src; else a, b)
//   unit                           what every start address must be a multiple of (1: any)
// and may hold more fields after these (Python keeps the parameters' block alive there).
enum RecordField : Py_ssize_t {
  kSizes,
  kStrides,
  kDtype,
  kDevice,
  kEntry,
  kParams,
  kExtent0,
  kExtent1,
  kUnit,
  kRecordFields,
};
constexpr std::array<const char*, kRecordFields> kRecordFieldNames = {
    "sizes", "strides", "dtype", "device", "entry", "params", "extent0", "extent1", "unit"};

using Loop = int64_t (*)(int64_t, int64_t, int64_t, int64_t);

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

constexpr Py_ssize_t kMaxTensors = 8;

} // namespace

void layout_key(
    const at::Tensor* const* tensors,
    size_t n,
    size_t words,
    c10::SmallVector<int64_t, 64>& key,
    int64_t& flags_any) {
  key.resize(words);
  size_t w = 0;
  flags_any = 0;
  for (size_t i = 0; i < n; ++i) {
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
}

uintptr_t first_byte(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.storage().data()) +
      static_cast<uintptr_t>(t.storage_offset() * t.element_size());
}

bool storage_holds(const at::Tensor& t, uintptr_t start, int64_t extent) {
  const auto end = reinterpret_cast<uintptr_t>(t.storage().data()) + t.storage().nbytes();
  return extent >= 0 && end >= start && end - start >= static_cast<uintptr_t>(extent);
}

namespace {

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
  layout_key(tensors, static_cast<size_t>(n), words, key, flags_any);
  return true;
}

PyObject* key_bytes(const LayoutKey& key) {
  return PyBytes_FromStringAndSize(
      reinterpret_cast<const char*>(key.data()),
      static_cast<Py_ssize_t>(key.size() * sizeof(int64_t)));
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
    PyTuple_SET_ITEM(result, 2 + 3 * i, PyLong_FromUnsignedLongLong(first_byte(t)));
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


// The record `table` holds for the layout key of the tensors `args[0..n)` (read into
// `tensors`), checked to be a tuple of the record's fields, borrowed; nullptr when there is
// none to use (not host strided tensors, a lazy bit, no record) or, with a Python error set,
// on an error.
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
  if (record != nullptr && !(PyTuple_Check(record) && PyTuple_GET_SIZE(record) >= kRecordFields)) {
    PyErr_SetString(PyExc_TypeError, "replay: a record is a tuple of _C.REPLAY_RECORD_FIELDS");
    return nullptr;
  }
  return record;
}

// A record's int field; -1 with a Python error set when it is not an int.
long long int_field(PyObject* record, RecordField field) {
  return PyLong_AsLongLong(PyTuple_GET_ITEM(record, field));
}

// The new output the record describes (sizes, strides, dtype, device), allocated into
// `out`; false with a TypeError set on a bad record.
bool new_from_record(PyObject* record, at::Tensor& out) {
  return new_strided(
      "replay: record",
      PyTuple_GET_ITEM(record, kSizes),
      PyTuple_GET_ITEM(record, kStrides),
      PyTuple_GET_ITEM(record, kDtype),
      PyTuple_GET_ITEM(record, kDevice),
      out);
}

// Runs the record's loop on (out, operand0, operand1); its status (0: done).
int64_t run_loop(PyObject* record, uintptr_t out, uintptr_t operand0, uintptr_t operand1) {
  const auto entry = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(record, kEntry));
  const long long params = int_field(record, kParams);
  TORCH_CHECK(!PyErr_Occurred(), "replay: bad record entry or params");
  return reinterpret_cast<Loop>(entry)(
      static_cast<int64_t>(out),
      static_cast<int64_t>(operand0),
      static_cast<int64_t>(operand1),
      params);
}

// _replay(table, a[, b]): the per-call path of an elementwise call signature Python has
// recorded (torch_mydev/ops/replay.py `record`), in one call: the output is new, laid out
// as the record says. Anything else (not tensors, a lazy bit, no record, a storage too
// small) answers None and the Python path runs.
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
  uintptr_t starts[2] = {0, 0};
  for (Py_ssize_t i = 0; i < n; ++i) {
    starts[i] = first_byte(*tensors[i]);
    const long long extent = int_field(record, static_cast<RecordField>(kExtent0 + i));
    if (!storage_holds(*tensors[i], starts[i], extent)) {
      if (PyErr_Occurred()) {
        return nullptr;
      }
      Py_RETURN_NONE;  // a storage smaller than the layout: the Python path raises
    }
  }
  at::Tensor out;
  if (!new_from_record(record, out)) {
    return nullptr;
  }
  const int64_t status = run_loop(record, first_byte(out), starts[0], n == 2 ? starts[1] : starts[0]);
  TORCH_CHECK(status == 0, "ZeroDivisionError");
  return THPVariable_Wrap(std::move(out));
  END_HANDLE_TH_ERRORS
}

// _replay_copy(table, dst, src): `dst.copy_(src)` (returns dst), or with dst None a new
// tensor laid out by the record filled from src (clone), for a layout pair Python has
// recorded (torch_mydev/ops/replay.py `record_copy`; extent0 is dst's, extent1 src's). One
// storage on both sides (Copy.cpp's overlap rules), a lazy bit (a copy-on-write storage too:
// dst is written at the address read here, so it must not be one), a start address that is
// not a multiple of the record's unit or a storage too small answer None: the Python path
// runs.
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
  const long long unit = int_field(record, kUnit);
  const long long extents[2] = {int_field(record, kExtent0), int_field(record, kExtent1)};
  if (PyErr_Occurred()) {
    return nullptr;
  }
  TORCH_CHECK(unit > 0, "_replay_copy: bad record unit");
  const at::Tensor& src = *tensors[into ? 1 : 0];
  uintptr_t starts[2] = {0, first_byte(src)};
  if (!storage_holds(src, starts[1], extents[1])) {
    Py_RETURN_NONE;
  }
  at::Tensor out;
  if (into) {
    const at::Tensor& dst = *tensors[0];
    if (dst.storage().data() == src.storage().data()) {
      Py_RETURN_NONE;  // one storage: Copy.cpp's same-data and overlap rules
    }
    starts[0] = first_byte(dst);
    if (!storage_holds(dst, starts[0], extents[0])) {
      Py_RETURN_NONE;
    }
  } else {
    if (!new_from_record(record, out)) {
      return nullptr;
    }
    starts[0] = first_byte(out);
  }
  if ((starts[0] | starts[1]) % static_cast<uintptr_t>(unit) != 0) {
    Py_RETURN_NONE;  // the Python path picks a smaller unit
  }
  run_loop(record, starts[0], starts[1], 0);
  if (into) {
    return Py_NewRef(args[1]);
  }
  return THPVariable_Wrap(std::move(out));
  END_HANDLE_TH_ERRORS
}

PyMethodDef kReplayMethods[] = {
    {"_signature",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(signature)),
     METH_FASTCALL,
     "(signature bytes, flags, then data_ptr, storage data_ptr, storage nbytes of each tensor) "
     "of host strided tensors, else None"},
    {"_replay",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(replay)),
     METH_FASTCALL,
     "(table, a[, b]) -> the output of a recorded elementwise call signature, else None"},
    {"_replay_copy",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(replay_copy)),
     METH_FASTCALL,
     "(table, dst or None, src) -> dst, or a new tensor, for a recorded copy; else None"},
    {nullptr, nullptr, 0, nullptr}};

} // namespace

void init_replay(pybind11::module& m) {
  PyModule_AddFunctions(m.ptr(), kReplayMethods);
  m.attr("FLAG_CONJ") = kFlagConj;
  m.attr("FLAG_NEG") = kFlagNeg;
  m.attr("FLAG_COW") = kFlagCow;
  pybind11::tuple fields(static_cast<size_t>(kRecordFields));
  for (Py_ssize_t i = 0; i < kRecordFields; ++i) {
    fields[static_cast<size_t>(i)] = pybind11::str(kRecordFieldNames[static_cast<size_t>(i)]);
  }
  m.attr("REPLAY_RECORD_FIELDS") = fields;
}

} // namespace mydev
