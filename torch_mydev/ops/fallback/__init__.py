"""The CPU fallback of every op without a mydev kernel: ``boxed`` (the boxed kernel and its
general path), ``fast`` (the common path in one pass), ``schema`` (what an overload's
schema says, once), ``copy`` (aliases, copies, write-back), ``devices`` (CUDA's device
checks), ``random`` (each generator's stream), and the ops it treats apart: ``structured``,
``rnn``, ``sdpa``, ``sparse`` with ``sparse_convert``."""
