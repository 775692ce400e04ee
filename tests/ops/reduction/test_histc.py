"""``torch.histc`` on mydev: integer inputs as CUDA counts them, the rest as CPU does.

Truth for integer inputs is CUDA's kernel (``_histc_cuda_template`` and ``getBin`` in
aten/src/ATen/native/cuda/SummaryOps.cu); with no GPU here, each expectation is worked out
by hand from its rule: bounds truncated to int64, ``min == max`` taken from the data and then
widened by one each way, bin ``(v - min) * bins / (max - min)`` in int64 rounded toward zero,
``bins`` itself meaning the last bin, values outside ``[min, max]`` ignored, counts in the
input's dtype. Truth for every other dtype is CPU's ``torch.histc`` on the same values.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_mydev
from tests.support.dtypes import INTEGERS
from torch_mydev.ops.reduction import histogram

RESIZED = "An output with one or more elements was resized"


def _histc(values, dtype, *args, **kwargs) -> torch.Tensor:
    """``torch.histc`` of ``values`` as a mydev tensor of ``dtype``, read back to CPU."""
    result = torch.histc(torch.tensor(values, dtype=dtype, device="mydev"), *args, **kwargs)
    assert result.device.type == "mydev" and result.dtype == dtype
    assert result.shape == (args[0] if args else kwargs.get("bins", 100),)
    assert result.is_contiguous()
    return result.cpu()


def _check(values, dtype, expected, *args, **kwargs) -> None:
    result = _histc(values, dtype, *args, **kwargs)
    assert torch.equal(result, torch.tensor(expected, dtype=dtype)), (result, expected)


# ---- integer inputs: CUDA's rule -------------------------------------------------------------


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_issue_example_counts_each_expert_id(dtype):
    # bins = v * 4 / 3: 0 -> 0, 1 -> 1, 3 -> 4, which is the last bin (3).
    _check([0, 1, 1, 3], dtype, [1, 2, 0, 1], bins=4, min=0, max=3)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64], ids=str)
def test_values_outside_the_range_are_ignored(dtype):
    # span 13, bin (v + 3) * 3 / 13: -3 -> 0, 0 -> 9/13 = 0, 2 -> 15/13 = 1, 7 -> 30/13 = 2,
    # 10 -> 39/13 = 3 (the last bin, 2); -5 and 11 lie outside [-3, 10].
    _check([-5, -3, 0, 2, 7, 10, 11], dtype, [2, 1, 2], 3, -3, 10)


def test_uint8_over_its_whole_range():
    # bin v * 4 / 255: 63 -> 0.99 = 0, 64 -> 1.004 = 1, 191 -> 2.996 = 2, 192 -> 3, 255 -> 4 (3)
    _check([0, 63, 64, 191, 192, 255], torch.uint8, [2, 1, 1, 2], 4, 0, 255)
    # outside [10, 20]: 9 and 21; bin (v - 10) * 5 / 10: 10 -> 0, 11 -> 0, 15 -> 2, 20 -> 5 (4)
    _check([9, 10, 11, 15, 20, 21], torch.uint8, [2, 0, 1, 0, 1], 5, 10, 20)


def test_bounds_are_truncated_toward_zero_as_scalar_to_int64():
    # min 0.5 -> 0 (CPU's float kernel would leave 0 out); bin v * 2 / 2: 0, 1, 2 -> 1.
    _check([0, 1, 2], torch.int32, [1, 2], 2, 0.5, 2)
    # min -1.5 -> -1, not -2: -2 lies outside; bin (v + 1) * 2 / 2: -1 -> 0, 0 -> 1, 1 -> 2 (1)
    _check([-2, -1, 0, 1], torch.int32, [1, 2], 2, -1.5, 1.9)


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_equal_bounds_take_the_range_from_the_data(dtype):
    # [3, 7]: bin (v - 3) * 4 / 4: 3 -> 0, 5 -> 2, 7 -> 4 (3)
    _check([3, 7, 5, 7], dtype, [1, 0, 1, 2], bins=4)  # min = max = 0, the defaults
    _check([3, 7, 5, 7], dtype, [1, 0, 1, 2], 4, 5, 5)
    # 0.2 and 0.9 both truncate to 0: equal bounds, so no "max must be larger than min";
    # 0.7 > 0.2 as floats, yet both are 0 too.
    _check([3, 7, 5, 7], dtype, [1, 0, 1, 2], 4, 0.2, 0.9)
    _check([3, 7, 5, 7], dtype, [1, 0, 1, 2], 4, 0.7, 0.2)


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_equal_data_widens_the_range_by_one(dtype):
    # [5, 5] widens to [4, 6]: bin (5 - 4) * 4 / 2 = 2.
    _check([5, 5, 5], dtype, [0, 0, 3, 0], bins=4)


@pytest.mark.parametrize("dtype", INTEGERS, ids=str)
def test_empty_input_gives_zeros_after_the_checks(dtype):
    _check([], dtype, [0, 0, 0], bins=3)  # min = max = 0 widens to [-1, 1]
    _check([], dtype, [0, 0], 2, 4, 4)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        _histc([], dtype, 3, 2, 1)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        _histc([], dtype, 0)


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [(torch.int8, 44), (torch.uint8, 44), (torch.int16, 300), (torch.int64, 300)],
    ids=str,
)
def test_counts_wrap_in_the_input_dtype(dtype, expected):
    # CUDA adds 1 to an output of the input's dtype 300 times: 300 mod 256 = 44 for 8 bits.
    _check([1] * 300, dtype, [0, expected], 2, 0, 1)


def test_large_int64_values_are_binned_exactly():
    # In float64 2**60 + 1 == 2**60; the int64 rule keeps them apart: bin k * 4 / 3.
    base = 2**60
    values = [base, base + 1, base + 2, base + 3]
    _check(values, torch.int64, [1, 1, 1, 1], 4, base, base + 3)
    # (max - min) * bins = 3 * (2**61 - 1) still fits int64, so this is CUDA's arithmetic:
    # 3 * 768614336404564650 < 2**61 - 1 <= 3 * 768614336404564651.
    span = 2**61 - 1
    below, above = span // 3, span // 3 + 1
    _check([0, below, above, span], torch.int64, [2, 1, 1], 3, 0, span)
    assert float(below) == float(above)  # a float computation could not tell them apart


def test_ranges_where_cuda_overflows_are_binned_exactly():
    # (max - min) * bins = 2**63 * 4 overflows CUDA's int64 (undefined behaviour there,
    # docs/ops.md); mydev gives the exact bin (v + 2**62) * 4 / 2**63:
    # -2**62 -> 0, -1 -> 1.99.. = 1, 0 -> 2, 2**61 -> 3, 2**62 -> 4 (3).
    values = [-(2**62), -1, 0, 2**61, 2**62]
    _check(values, torch.int64, [1, 1, 1, 2], 4, -(2**62), 2**62)
    # int64's largest value, all equal: [max - 1, max + 1] is past int64 (CUDA wraps it).
    _check([2**63 - 1] * 2, torch.int64, [0, 2], bins=2)
    _check([-(2**63)] * 3, torch.int64, [0, 3], bins=2)


def test_strided_input_and_copy_on_write_input():
    base = torch.tensor([[0, 9, 1], [9, 3, 9], [1, 9, 2]], dtype=torch.int32, device="mydev")
    diagonal = base.as_strided((3,), (4,))  # 0, 3, 2
    assert torch.histc(diagonal, 4, 0, 3).tolist() == [1, 0, 1, 1]
    transposed = base[:, ::2].t()  # 0, 9, 1, 1, 9, 2 (9 outside [0, 3])
    assert torch.histc(transposed, 4, 0, 3).tolist() == [1, 2, 1, 0]
    lazy = base._lazy_clone()
    assert torch.histc(lazy, 4, 0, 3).tolist() == [1, 2, 1, 1]
    assert torch._C._is_cow_tensor(lazy)  # read, not written: still lazy, as on CPU


def test_integer_histc_is_mydev_kernel_not_a_fallback():
    torch_mydev.reset_fallback_stats()
    x = torch.tensor([0, 1, 1, 3], dtype=torch.int32, device="mydev")
    torch.histc(x, 4, 0, 3)
    torch.histc(x, 4, 0, 3, out=torch.empty(0, dtype=torch.int32, device="mydev"))
    assert torch_mydev.fallback_stats() == {}


# ---- out= ------------------------------------------------------------------------------------


@pytest.mark.parametrize("out_dtype", [torch.int32, torch.int64, torch.float32, torch.uint16])
def test_out_receives_the_counts_cast_to_its_dtype(out_dtype):
    # _histc_out_cuda: the functional result, resize_output, then out.copy_ (which casts).
    x = torch.tensor([0, 1, 1, 3], dtype=torch.int32, device="mydev")
    out = torch.empty(0, dtype=out_dtype, device="mydev")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty out grows without a warning
        result = torch.histc(x, 4, 0, 3, out=out)
    assert result is out
    assert out.shape == (4,) and out.dtype == out_dtype
    assert torch.equal(out.cpu(), torch.tensor([1, 2, 0, 1], dtype=out_dtype))


def test_out_of_another_shape_is_resized_with_a_warning():
    x = torch.tensor([0, 1, 1, 3], dtype=torch.int8, device="mydev")
    out = torch.full((7,), 5, dtype=torch.int8, device="mydev")
    with pytest.warns(UserWarning, match=RESIZED):
        torch.histc(x, 4, 0, 3, out=out)
    assert out.tolist() == [1, 2, 0, 1]


def test_out_of_the_right_shape_keeps_its_strides():
    x = torch.tensor([0, 1, 1, 3], dtype=torch.int64, device="mydev")
    base = torch.full((8,), 9, dtype=torch.int64, device="mydev")
    out = base[::2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.histc(x, 4, 0, 3, out=out)
    assert out.stride() == (2,)
    assert base.tolist() == [1, 9, 2, 9, 0, 9, 1, 9]


def test_out_may_be_the_input():
    x = torch.tensor([0, 1, 1, 3], dtype=torch.int16, device="mydev")
    assert torch.histc(x, 4, 0, 3, out=x) is x
    assert x.tolist() == [1, 2, 0, 1]


def test_out_on_another_device_raises_before_writing():
    x = torch.tensor([0, 1, 1, 3], dtype=torch.int32, device="mydev")
    out = torch.full((4,), 7, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.histc(x, 4, 0, 3, out=out)
    assert out.tolist() == [7] * 4


def test_out_errors_come_before_any_write():
    x = torch.tensor([0, 1], dtype=torch.int32, device="mydev")
    out = torch.full((3,), 7, dtype=torch.int32, device="mydev")
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, 4, 3, 1, out=out)
    assert out.tolist() == [7] * 3


# ---- errors ----------------------------------------------------------------------------------


def _cpu_error(call) -> type[BaseException]:
    """The exception type CPU raises for ``call`` on a float tensor."""
    with pytest.raises(Exception) as caught:
        call(torch.tensor([0.0, 1.0]))
    return caught.type


ERRORS = {
    # (call, CUDA's message); CPU raises the same type for the same call on floats.
    "bins_zero": (lambda x: torch.histc(x, 0), "bins must be > 0"),
    "bins_negative": (lambda x: torch.histc(x, -3, 0, 1), "bins must be > 0"),
    "min_above_max": (lambda x: torch.histc(x, 4, 3, 1), "max must be larger than min"),
    "nan_bound": (
        lambda x: torch.histc(x, 4, float("nan"), 1),
        "value cannot be converted to type int64_t without overflow",
    ),
    "infinite_bound": (
        lambda x: torch.histc(x, 4, 0, float("inf")),
        "value cannot be converted to type int64_t without overflow",
    ),
}


@pytest.mark.parametrize("name", list(ERRORS))
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int32, torch.int64], ids=str)
def test_bad_arguments_raise_cpu_exception_types(name, dtype):
    call, message = ERRORS[name]
    with pytest.raises(_cpu_error(call), match=message):
        call(torch.tensor([0, 1], dtype=dtype, device="mydev"))


@pytest.mark.parametrize(
    "bound", [2**64 - 1, -1e19, 2.0**63, 1 + 2j], ids=["uint64", "below", "2**63", "j"]
)
def test_bounds_past_int64_raise_scalar_conversion_error(bound):
    # Scalar::to<int64_t> (c10 checked_convert); 2.0**63 is refused too (docs/ops.md).
    x = torch.tensor([0, 1], dtype=torch.int64, device="mydev")
    with pytest.raises(RuntimeError, match="cannot be converted to type int64_t"):
        torch.histc(x, 4, 0, bound)


def test_conversion_errors_come_before_the_bins_check():
    # _histc_cuda converts min and max before _histc_cuda_template checks bins.
    x = torch.tensor([0, 1], dtype=torch.int32, device="mydev")
    with pytest.raises(RuntimeError, match="cannot be converted"):
        torch.histc(x, 0, float("nan"), 1)


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint16, torch.uint32], ids=str)
def test_dtypes_neither_device_counts_raise_not_implemented(dtype):
    # CUDA: '"histc" not implemented for ...'; mydev runs CPU's kernel, which refuses too.
    x = torch.tensor([0, 1], device="mydev").to(dtype)
    with pytest.raises(NotImplementedError):
        torch.histc(x, 4, 0, 1)
    with pytest.raises(NotImplementedError):
        torch.histc(x.cpu(), 4, 0, 1)


# ---- floating inputs: CPU's kernel -----------------------------------------------------------

FLOAT_CALLS = [(10, 0, 0), (4, -1.0, 1.0), (7, -0.25, 3.5), (3, 2.0, 2.0), (5, -0.5, 0.5)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("call", FLOAT_CALLS, ids=str)
def test_float_inputs_equal_cpu(dtype, call):
    g = torch.Generator().manual_seed(0)
    cpu = (torch.randn(50, generator=g) * 2).to(dtype)
    cpu[0], cpu[1] = 0.5, 3.5
    torch_mydev.reset_fallback_stats()
    result = torch.histc(cpu.to("mydev"), *call)
    assert torch_mydev.fallback_stats() == {"aten::histc": 1}  # CPU's kernel, as before
    assert result.device.type == "mydev"
    assert torch.equal(result.cpu(), torch.histc(cpu, *call))


def test_float_out_equals_cpu_and_keeps_cpu_errors():
    cpu = torch.tensor([0.0, 0.5, 1.0, 3.0])
    out = torch.empty(0, device="mydev")
    assert torch.histc(cpu.to("mydev"), 4, 0, 3, out=out) is out
    assert torch.equal(out.cpu(), torch.histc(cpu, 4, 0, 3))
    wrong = torch.empty(0, dtype=torch.int32, device="mydev")
    with pytest.raises(RuntimeError, match="should have the same dtype"):
        torch.histc(cpu.to("mydev"), 4, 0, 3, out=wrong)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(cpu.to("mydev"), 4, 3, 0)


# ---- the CPU function itself -----------------------------------------------------------------


def test_cuda_histc_takes_cpu_tensors_and_returns_cpu_tensors():
    counts = histogram.cuda_histc(torch.tensor([0, 1, 1, 3], dtype=torch.int32), 4, 0, 3)
    assert counts.device.type == "cpu"
    assert torch.equal(counts, torch.tensor([1, 2, 0, 1], dtype=torch.int32))
