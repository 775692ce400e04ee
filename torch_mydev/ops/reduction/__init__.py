"""Native reductions: ``aten`` (``sum``, ``mean``, ``amax``, ``amin``: checks, result, plan,
kernel), ``entries`` (what a repeated functional call reuses), ``histogram`` (``histc``)."""
