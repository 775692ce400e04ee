// A Python number operand of a replayed call, and its bytes in a loop's dtype.
//
// A number reaches a `.Tensor` overload as a wrapped 0-dim CPU tensor (double, int64, bool or
// complex128) and a `.Scalar` overload as a Scalar; either way its type is one of those four.
// `number_bytes` converts it as `c10::convert` does (torch's casts, no range check: what
// Python's `kernels.scalar_bytes` gives), `checked_number_bytes` as `Scalar::to` does (with
// c10::checked_convert's overflow check: a fill's value). native_replay.cpp uses both.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>
#include <c10/util/complex.h>

#include <cstdint>
#include <optional>

namespace mydev {

struct Number {
  c10::ScalarType type = c10::ScalarType::Undefined;
  double real = 0;
  int64_t integer = 0;
  c10::complex<double> complex;
};

// The number `value` holds, or nullopt when it is none of the four types.
std::optional<Number> number_of(const c10::IValue& value);

// `n`'s bytes in `to`, as c10::convert gives them; false for a dtype it does not know.
bool number_bytes(const Number& n, c10::ScalarType to, void* out);

// `n` as `Scalar::to` converts it into `to`: false where that would raise, and for a complex
// number into a real dtype (Python's path raises those).
bool checked_number_bytes(const Number& n, c10::ScalarType to, void* out);

// add's (`sign` 1) or sub's (-1) `alpha` as the loop's compute value for `dtype`: `sign *
// alpha` converted as `Scalar::to` does, then widened as Python's `kernels.compute_scalar`
// widens it (float16 and bfloat16 to float, the integers to int64). False where Python must
// decide: a bool, complex or symbolic alpha, a float alpha for an integral dtype (ATen's
// alpha_check raises), a value `Scalar::to` refuses, a bool dtype or one with no native loop.
bool alpha_bytes(const c10::IValue& alpha, int sign, c10::ScalarType dtype, void* out);

} // namespace mydev
