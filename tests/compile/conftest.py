"""Compile tests: inductor's caches off (a cached graph would hide a registration failure),
dynamo's state cleared after each test (its caches hold compiled graphs)."""

import pytest


@pytest.fixture(autouse=True)
def fresh_inductor():
    import torch._dynamo
    import torch.compiler.config

    torch._dynamo.reset()
    with torch.compiler.config.patch(force_disable_caches=True):
        yield
    torch._dynamo.reset()
