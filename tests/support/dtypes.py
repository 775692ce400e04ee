"""The dtype lists the tests draw from, written once.

They are the tests' own statement of what mydev supports, kept apart from the package's
(``torch_mydev/kernels/dtypes.py``) so that a dtype dropped there fails a test here.
"""

from __future__ import annotations

import torch

# The dtypes mydev's elementwise and reduction kernels compute in: what the device tests of
# those ops draw from (kernels/dtypes.py SUPPORTED_DTYPES).
DEVICE_DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
)
# Every dtype mydev's copy kernels cast (kernels/dtypes.py COPY_DTYPES): the copy, clone,
# contiguous and .to() tests draw from these.
COPY_DTYPES = (
    *DEVICE_DTYPES,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.complex32,
    *((torch.bcomplex32,) if hasattr(torch, "bcomplex32") else ()),  # torch 2.14
    torch.float8_e4m3fn,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2,
    torch.float8_e5m2fnuz,
    torch.float8_e8m0fnu,
)
# The dtypes torch CPU (and mydev) only moves to their own dtype (kernels/dtypes.py
# STORAGE_DTYPES minus COPY_DTYPES): casts to or from them raise NotImplementedError.
MOVE_ONLY_DTYPES = (
    torch.bits1x8,
    torch.bits2x4,
    torch.bits4x2,
    torch.bits8,
    torch.bits16,
    torch.float4_e2m1fn_x2,
)
# Every dtype this torch defines (quantized and bits types included), in a stable order.
EVERY_DTYPE = sorted({v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=str)

# The reduced-precision floats (uint16 lanes in the kernels), and every floating dtype the
# native kernels compute in, reduced precision first.
REDUCED = (torch.float16, torch.bfloat16)
FLOATS = (*REDUCED, torch.float32, torch.float64)
# The integer dtypes the native kernels compute in (no bool).
INTEGERS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
UNSIGNED = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
# The integer dtype of each element size: any dtype's bits as integers (`t.view(...)`).
SAME_WIDTH = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# A cheap spread for the parallel-loop tests: a float, a reduced float and an integer.
FEW = (torch.float32, torch.float16, torch.int64)
