"""Native elementwise ops: ``aten`` (the registered functions, ``where``, ``fill_``),
``relu`` (the relu family), ``families`` (which overloads each op registers), ``checks``
(ATen's argument checks), ``plan`` (plan, outputs, cast temporaries), ``general`` (any
call), ``entries`` (what a repeated call signature reuses)."""
