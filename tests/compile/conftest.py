"""Compile tests: the caches that keep whole graphs are off (a cached graph would hide a
registration failure), dynamo's state is cleared after each test (its caches hold compiled
graphs).

Inductor's code cache stays on: it keys each build by its source and flags, so a build found
there is the build this compile would make. The run has a cache of its own
(tests/conftest.py). ``force_disable_caches`` gave every compile a new empty cache: each
process's first compile built inductor's probes of the CPU's vector ISAs again (about 6 s of
g++ here), and each compile of the CPU reference built the kernel the mydev compile had just
built from the same source (0.7 to 1 s a test). Where the environment forces a whole-graph
cache on (``TORCHINDUCTOR_FX_GRAPH_CACHE=1``, ``TORCHINDUCTOR_AUTOGRAD_CACHE=1``,
``TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO=1``, read once at import and stronger than a
patch), every cache is off again, as before.
"""

import contextlib

import pytest


@pytest.fixture(autouse=True)
def fresh_inductor():
    import torch._dynamo
    import torch._functorch.config
    import torch._inductor.config
    import torch.compiler.config

    torch._dynamo.reset()
    with contextlib.ExitStack() as caches:
        caches.enter_context(
            torch._inductor.config.patch(fx_graph_cache=False, fx_graph_remote_cache=False)
        )
        caches.enter_context(torch._functorch.config.patch(enable_autograd_cache=False))
        caches.enter_context(torch._dynamo.config.patch(automatic_dynamic_local_pgo=False))
        if (
            torch._inductor.config.fx_graph_cache
            or torch._functorch.config.enable_autograd_cache
            or torch._dynamo.config.automatic_dynamic_local_pgo
        ):
            caches.enter_context(torch.compiler.config.patch(force_disable_caches=True))
        yield
    torch._dynamo.reset()
