"""NNKit as a front end: a Python file of staged functions is a module.

`dlvm verify model.py`, `dlvm run` with `[module] path = "model.py"`: the file is run, and
every staged function it defines at top level (with declared argument types) is staged into
one module; gradients and tangents become their declarations, which the pipeline's
`differentiation` fills in.

Names: a top-level staged function is `@NAME` after the `name=` it was given, else after the
variable that holds it — the name `dlvm exec -f NAME` calls. Two functions that would take
one name are refused (never `@g` and `@g_1`, where `-f g` could run the other one); a
function held by two variables is staged once, under the first. Functions staged only as
callees get names the top-level ones leave free (`@f_1`, …).
"""

from __future__ import annotations

import sys
import traceback
import types
from pathlib import Path
from typing import Any

import dlvm.ir as ir
from dlvm.ir import DlvmError, FrontendError
from dlvm.ir.files import read_text

from .staging import DerivativeFunction, Program, StagedFunction
from .types import TensorSpec

RUN_NAME = "__nnkit__"  # the `__name__` the file runs under


def load_file(path: str) -> ir.Module:
    """The module of the staged functions a Python file defines."""
    names = run_file(path)
    staged = [(name, value) for name, value in names.items()
              if isinstance(value, StagedFunction) and not name.startswith("_")]
    if not staged:
        raise FrontendError(f"{path}: error: the file defines no staged function (make them "
                            "with nnkit.lambda_, @nnkit.function or nnkit.gradient)")
    program = Program(Path(path).stem)
    entries = public_functions(path, staged)
    for name, fn, specs in entries:
        program.publish(fn, specs, name)
    for _name, fn, specs in entries:
        if not isinstance(fn, DerivativeFunction):
            program.function(fn, specs)
            continue
        fn.printing = True  # the seed and the tangents follow from the primal types
        try:
            program.function(fn, specs)
        finally:
            fn.printing = False
    return program.module


def public_functions(path: str, staged: list[tuple[str, StagedFunction]]
                     ) -> list[tuple[str, StagedFunction, tuple[TensorSpec, ...]]]:
    """Each top-level staged function once, with its name in the module and its argument
    types; two functions of one name, or one without types, are errors."""
    taken: dict[str, tuple[str, StagedFunction]] = {}  # module name → (variable, function)
    seen: set[int] = set()
    out = []
    for variable, fn in staged:
        if id(fn) in seen:  # another variable for a function already listed
            continue
        seen.add(id(fn))
        name = fn.name if fn.explicit else variable
        if name in taken:
            first, other = taken[name]
            raise FrontendError(
                f"{fn.origin}: error: '{variable}' would be staged as '@{name}', the name of "
                f"'{first}' ({other.origin}): give one of them another name (name=…), so "
                f"that `dlvm exec -f {name}` calls the one meant")
        taken[name] = (variable, fn)
        if not fn.explicit:
            fn.name = variable  # messages name the variable, as the module does
        specs = fn.of.arg_specs if isinstance(fn, DerivativeFunction) else fn.arg_specs
        if specs is None:
            untyped = f"'{fn.of.name}', the function it differentiates," if isinstance(
                fn, DerivativeFunction) else f"'{variable}'"
            raise FrontendError(f"{fn.origin}: error: {untyped} declares no argument types "
                                "(give them as annotations or to lambda_) so it cannot be "
                                "staged on its own")
        out.append((name, fn, tuple(specs)))
    return out


def run_file(path: str) -> dict[str, Any]:
    """The top-level names of the Python file `path`, run as a module of its own; its
    failures are one-line errors that name its line."""
    text = read_text(path, what="module")
    try:
        code = compile(text, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        where = f"{path}:{e.lineno}:{e.offset}" if e.lineno else path
        raise FrontendError(f"{where}: error: SyntaxError: {e.msg}") from None
    except ValueError as e:  # a NUL byte in the source
        raise FrontendError(f"{path}: error: not Python source ({e})") from None
    module = types.ModuleType(RUN_NAME)
    module.__file__ = path
    previous = sys.modules.get(RUN_NAME)
    sys.modules[RUN_NAME] = module  # for what looks itself up there (dataclasses, pickle)
    try:
        exec(code, module.__dict__)
    except DlvmError:
        raise
    except SystemExit as e:
        raise FrontendError(f"{path}: error: the file exits (SystemExit: {e.code}) while it is "
                            "run for its staged functions") from None
    except Exception as e:  # the user's code failed: say where, in one line
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if f.filename == path or Path(f.filename).resolve() == Path(path).resolve()]
        where = f"{path}:{frames[-1].lineno}" if frames else path
        detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise FrontendError(f"{where}: error: {type(e).__name__}"
                            + (f": {detail}" if detail else "")) from None
    finally:
        if previous is None:
            sys.modules.pop(RUN_NAME, None)
        else:
            sys.modules[RUN_NAME] = previous
    return dict(module.__dict__)
