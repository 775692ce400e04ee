"""Copies: ``aten`` (``copy_`` on mydev and between mydev and CPU: Copy.cpp's checks, the
plan, the kernel) and ``conversions`` (``clone``, ``_to_copy``)."""
