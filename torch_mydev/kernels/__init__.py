"""Kernels: numba loops over raw storage bytes, driven by a plan; no torch dispatch here.

``copy.copy_strided`` is the copy/cast kernel. Importing this package (or ``copy``) imports
neither numba nor any compiled loop: ``import torch`` loads this package through device
autoload, so the numba modules (``_strided``, ``_convert``) load on the first copy.
"""
