"""torch.library registrations of mydev's Python kernels: ``registry`` (the table), one
sub-package per family (``elementwise``, ``reduction``, ``copy``, ``fallback``), and what
they share: ``replay`` (the stub's records of answered call signatures), ``buffers``,
``factories``, ``tensor_type``, ``quantized``."""
