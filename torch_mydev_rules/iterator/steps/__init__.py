"""The steps of TensorIterator's build (ATen/TensorIterator.cpp), one module each, which
``plan.build`` runs in ATen's order: ``shape``, ``compute_types``, ``fast_setup``,
``strides``, ``coalesce``."""
