"""NNKit as a front end: a Python file of staged functions is a module.

`dlvm verify model.py`, `dlvm run` with `[module] path = "model.py"`: the file is run, and
every staged function it defines at top level (with declared argument types) is staged into
one module, under the name of the variable that holds it; gradients and tangents become
their declarations, which the pipeline's `differentiation` fills in.
"""

from __future__ import annotations

import runpy
import traceback
from pathlib import Path

import dlvm.ir as ir
from dlvm.ir import DlvmError, FrontendError

from .staging import DerivativeFunction, Program, StagedFunction


def load_file(path: str) -> ir.Module:
    """The module of the staged functions a Python file defines."""
    try:
        names = runpy.run_path(path, run_name="__nnkit__")
    except DlvmError:
        raise
    except Exception as e:  # the user's code failed: say where, in one line
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if Path(f.filename).resolve() == Path(path).resolve()]
        where = f"{path}:{frames[-1].lineno}" if frames else path
        raise FrontendError(f"{where}: error: {type(e).__name__}: {e}") from None
    staged = [(name, value) for name, value in names.items()
              if isinstance(value, StagedFunction) and not name.startswith("_")]
    if not staged:
        raise FrontendError(f"{path}: error: the file defines no staged function (make them "
                            "with nnkit.lambda_, @nnkit.function or nnkit.gradient)")
    program = Program(Path(path).stem)
    for name, fn in staged:
        if not fn.named:
            fn.name = name
    for name, fn in staged:
        if isinstance(fn, DerivativeFunction):
            specs = fn.of.arg_specs
            fn.printing = True  # the seed and the tangents follow from the primal types
        else:
            specs = fn.arg_specs
        if specs is None:
            raise FrontendError(f"{path}: error: '{name}' declares no argument types (give them "
                                "as annotations or to lambda_) so it cannot be staged on its own")
        try:
            program.function(fn, tuple(specs))
        finally:
            if isinstance(fn, DerivativeFunction):
                fn.printing = False
    return program.module
