"""Data types the LLVM targets compile: every one but `bf16`, which the interpreter runs.

A module that uses `bf16` anywhere (an argument, a result, an instruction's type) is refused
before code generation, in one line naming the function and the type, rather than compiled
with a layout that would read its bits as something else.
"""

from __future__ import annotations

import dlvm.ir as ir
from dlvm.ir.types import ArrayType, DataType, FunctionType, TensorType, TupleType, Type

UNSUPPORTED = {"bfloat": "bf16"}


def unsupported_dtype(t: Type, module: ir.Module) -> DataType | None:
    """The first data type in `t` (tuples and arrays looked into) no LLVM target compiles."""
    t = module.resolve(t)
    if isinstance(t, TensorType):
        return t.dtype if t.dtype.kind in UNSUPPORTED else None
    inner: tuple[Type, ...] = ()
    if isinstance(t, TupleType):
        inner = t.elements
    elif isinstance(t, ArrayType):
        inner = (t.element,)
    elif isinstance(t, FunctionType):
        inner = (*t.arguments, t.result)
    for e in inner:
        found = unsupported_dtype(e, module)
        if found is not None:
            return found
    return None


def check_data_types(module: ir.Module, target: str) -> None:
    """Raise a one-line `DlvmError` if the module uses a data type `target` cannot compile."""
    for fn in module.functions:
        types = [fn.type]
        for block in fn.blocks:
            types += [a.type for a in block.arguments]
            types += [i.type for i in block.instructions]
        for t in types:
            found = unsupported_dtype(t, module)
            if found is not None:
                raise ir.DlvmError(f"target '{target}' does not compile {found} ('@{fn.name}' "
                                   f"uses '{t}'); the interpreter ('interp') runs it")
