// numbers.h: a Python number operand of a replayed call and its bytes in a loop's dtype.
#include "numbers.h"

#include <c10/core/Scalar.h>
#include <c10/util/Exception.h>
#include <c10/util/TypeCast.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <limits>

namespace mydev {

// The number `value` holds, or nullopt when it is none of the four.
std::optional<Number> number_of(const c10::IValue& value) {
  Number n;
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (!t.defined() || !t.unsafeGetTensorImpl()->is_wrapped_number() ||
        t.device().type() != c10::DeviceType::CPU || t.dim() != 0) {
      return std::nullopt;
    }
    n.type = t.scalar_type();
    const void* data = t.const_data_ptr();
    switch (n.type) {
      case c10::ScalarType::Double:
        n.real = *static_cast<const double*>(data);
        return n;
      case c10::ScalarType::Long:
        n.integer = *static_cast<const int64_t*>(data);
        return n;
      case c10::ScalarType::Bool:
        n.integer = *static_cast<const bool*>(data) ? 1 : 0;
        return n;
      case c10::ScalarType::ComplexDouble:
        n.complex = *static_cast<const c10::complex<double>*>(data);
        return n;
      default:
        return std::nullopt;
    }
  }
  if (value.isDouble()) {
    n.type = c10::ScalarType::Double;
    n.real = value.toDouble();
  } else if (value.isBool()) {  // before isInt: a bool is no int here
    n.type = c10::ScalarType::Bool;
    n.integer = value.toBool() ? 1 : 0;
  } else if (value.isInt()) {
    n.type = c10::ScalarType::Long;
    n.integer = value.toInt();
  } else if (value.isComplexDouble()) {
    n.type = c10::ScalarType::ComplexDouble;
    n.complex = value.toComplexDouble();
  } else {
    return std::nullopt;  // a symbolic number: Python's path
  }
  return n;
}

namespace {

// `visit(value)` with the number as its own C++ type (double, int64_t, bool or
// c10::complex<double>); false for a number of no type.
template <typename Visit>
bool with_value(const Number& n, Visit&& visit) {
  switch (n.type) {
    case c10::ScalarType::Double:
      return visit(n.real);
    case c10::ScalarType::Long:
      return visit(n.integer);
    case c10::ScalarType::Bool:
      return visit(n.integer != 0);
    case c10::ScalarType::ComplexDouble:
      return visit(n.complex);
    default:
      return false;
  }
}

template <typename T>
struct As {
  using type = T;
};

// `*out = convert(As<T>{})` for the C++ type T of `to`; false for a dtype outside the
// switch. `convert` gives the value in T.
template <typename Convert>
bool store_as(c10::ScalarType to, void* out, Convert&& convert) {
  switch (to) {
#define MYDEV_STORE(T, name)                       \
  case c10::ScalarType::name:                      \
    *static_cast<T*>(out) = convert(As<T>{});      \
    return true;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX(MYDEV_STORE)
#undef MYDEV_STORE
    default:
      return false;
  }
}

} // namespace

// The bytes of `n` in `to`, as `c10::convert` (torch's casts, no range check) gives them;
// what Python's `kernels.scalar_bytes` gives for the same number.
bool number_bytes(const Number& n, c10::ScalarType to, void* out) {
  return with_value(n, [&](auto value) {
    return store_as(to, out, [&](auto as) {
      return c10::convert<typename decltype(as)::type>(value);
    });
  });
}

// `n` as `Scalar::to` converts it into `to` (c10::checked_convert: false where it would
// raise, and for a complex number into a real dtype: Python's path raises those).
bool checked_number_bytes(const Number& n, c10::ScalarType to, void* out) {
  if (n.type == c10::ScalarType::ComplexDouble && !c10::isComplexType(to)) {
    return false;
  }
  c10::Scalar scalar;
  if (!with_value(n, [&](auto value) {
        scalar = c10::Scalar(value);
        return true;
      })) {
    return false;
  }
  try {
    return store_as(to, out, [&](auto as) { return scalar.to<typename decltype(as)::type>(); });
  } catch (const c10::Error&) {
    return false;
  }
}

bool alpha_bytes(const c10::IValue& alpha, int sign, c10::ScalarType dtype, void* out) {
  Number n;
  if (alpha.isInt()) {  // not a bool: an IValue's bool is no int
    const int64_t value = alpha.toInt();
    if (sign < 0 && value == std::numeric_limits<int64_t>::min()) {
      return false;  // its negation is no int64 (Python's -alpha is a uint64 Scalar)
    }
    n.type = c10::ScalarType::Long;
    n.integer = sign < 0 ? -value : value;
  } else if (alpha.isDouble() && (c10::isFloatingType(dtype) || c10::isComplexType(dtype))) {
    n.type = c10::ScalarType::Double;
    n.real = sign < 0 ? -alpha.toDouble() : alpha.toDouble();
  } else {
    return false;
  }
  alignas(16) unsigned char lane[16] = {};
  if (!checked_number_bytes(n, dtype, lane)) {
    return false;
  }
  const auto widen = [&](auto value) {
    std::memcpy(out, &value, sizeof(value));
    return true;
  };
  switch (dtype) {
    case c10::ScalarType::Half:
      return widen(static_cast<float>(*reinterpret_cast<const c10::Half*>(lane)));
    case c10::ScalarType::BFloat16:
      return widen(static_cast<float>(*reinterpret_cast<const c10::BFloat16*>(lane)));
    case c10::ScalarType::Byte:
      return widen(static_cast<int64_t>(*reinterpret_cast<const uint8_t*>(lane)));
    case c10::ScalarType::Char:
      return widen(static_cast<int64_t>(*reinterpret_cast<const int8_t*>(lane)));
    case c10::ScalarType::Short:
      return widen(static_cast<int64_t>(*reinterpret_cast<const int16_t*>(lane)));
    case c10::ScalarType::Int:
      return widen(static_cast<int64_t>(*reinterpret_cast<const int32_t*>(lane)));
    case c10::ScalarType::Long:
    case c10::ScalarType::Float:
    case c10::ScalarType::Double:
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::ComplexDouble:
      std::memcpy(out, lane, c10::elementSize(dtype));
      return true;
    default:
      return false;
  }
}

// The binding `_native_number_bytes`: the bytes `number_bytes` gives a Python number in a
// dtype (tests/ops/test_native_replay.py checks them against Python's).
void init_numbers(pybind11::module& m) {
  m.def(
      "_native_number_bytes",
      [](pybind11::object value, pybind11::object dtype) {
        Number n;
        PyObject* v = value.ptr();
        if (PyBool_Check(v)) {
          n.type = c10::ScalarType::Bool;
          n.integer = v == Py_True ? 1 : 0;
        } else if (PyLong_Check(v)) {
          n.type = c10::ScalarType::Long;
          n.integer = value.cast<int64_t>();
        } else if (PyComplex_Check(v)) {
          n.type = c10::ScalarType::ComplexDouble;
          n.complex = c10::complex<double>(PyComplex_RealAsDouble(v), PyComplex_ImagAsDouble(v));
        } else {
          TORCH_CHECK(PyFloat_Check(v), "_native_number_bytes: a bool, int, float or complex");
          n.type = c10::ScalarType::Double;
          n.real = PyFloat_AsDouble(v);
        }
        TORCH_CHECK(THPDtype_Check(dtype.ptr()), "_native_number_bytes: dtype is a torch.dtype");
        const c10::ScalarType to = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
        alignas(16) unsigned char bytes[16] = {};
        TORCH_CHECK(number_bytes(n, to, bytes), "_native_number_bytes: unsupported dtype");
        return pybind11::bytes(
            reinterpret_cast<const char*>(bytes), c10::elementSize(to));
      },
      "The bytes the C++ replay converts a Python number to in `dtype` (for the tests)");
}

} // namespace mydev
