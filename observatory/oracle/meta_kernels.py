"""torch's compiled meta kernels for the probe's shape-only forward passes.

At import, torch registers a Python meta function (``torch._meta_registrations.activate_meta``,
mostly the ``torch._refs`` decompositions) over the compiled one for several hundred aten ops, so
that FakeTensor and dynamo can trace symbolic shapes. The probe's tensors have concrete shapes, and
there the Python path costs 50-900 µs per elementwise op (mul, add, pow, mean), against a few µs
for the compiled kernel that eager CPU and CUDA calls use to size their outputs: 4-5 times the CPU
of a whole model reading. ``prefer_compiled`` drops torch's Python meta registrations and
registers back only those of ops that have no compiled meta kernel, so every op still has one.

Process-wide, and meant for the processes that probe (the oracle's children, the oracle tests);
nothing there traces with FakeTensor. The readings are the same either way: the oracle tests
compare a reading made with torch's Python meta functions in a fresh interpreter against one made
here. Where torch's internals have moved, nothing is changed and the probe is only slower.
"""

from __future__ import annotations

import functools

import torch


@functools.cache
def prefer_compiled() -> bool:
    """Once per process; True when the compiled meta kernels are now in use."""
    try:
        from torch._decomp import global_decomposition_table
        from torch._meta_registrations import (
            _meta_lib_dont_use_me_use_register_meta as python_metas,
        )

        # What activate_meta registered (its keys: "aten/<op>.<overload>/Meta"), and the function it
        # took for each op: the meta table's, else post-autograd's, else pre-autograd's.
        registered = set(python_metas._op_impls)
        chosen: dict[str, tuple] = {}
        for table in ("meta", "post_autograd", "pre_autograd"):
            for op, fn in global_decomposition_table[table].items():
                if isinstance(op, torch._ops.OpOverload):
                    chosen.setdefault(_library_key(op), (op, fn))
    except (ImportError, AttributeError):
        return False
    if not registered or not registered <= chosen.keys():
        return False  # registered some other way than this module knows: leave torch as it is
    python_metas._destroy()
    restored = torch.library.Library("aten", "IMPL", "Meta")
    for key in registered:
        op, fn = chosen[key]
        if not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta"):
            restored.impl(op, fn)  # no compiled meta kernel: torch's Python one stays
    _KEEP.append(restored)  # a Library's registrations last as long as the object
    return True


_KEEP: list = []


def _library_key(op) -> str:
    """The key ``torch.library.Library.impl`` files a Meta registration of ``op`` under."""
    schema = op._schema
    name = schema.name.split("::")[-1] + (f".{schema.overload_name}" if schema.overload_name else "")
    return f"{op.namespace}/{name}/Meta"
