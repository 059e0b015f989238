"""The pipeline an LLVM target runs before code generation, on a copy of the module.

Both LLVM targets run `O3` by default, whose passes come from dlvm-opt, a package of its
own. Without it the code still runs, unoptimized (element-wise code is not fused into
kernels), and one warning per process says so and how to fix it. A pass that no installed
package and no DLVM package provides is the user's mistake, reported as the pass manager
reports an unknown pass (before any warning about a missing package).
"""

from __future__ import annotations

import warnings

import dlvm.ir as ir
from dlvm.ir.pipeline import PipelineError
from dlvm.ir.plugin import KNOWN_PROVIDERS, PluginWarning, failed_plugin_notes, install_hint

_warned: set[str] = set()  # the messages this process has shown


def optimized(module: ir.Module, passes: str, target: str) -> ir.Module:
    """`module` after the pipeline `passes`, run on a copy; `module` itself when `passes`
    is empty or names passes of a DLVM package that is not installed (said once)."""
    if not passes:
        return module
    reg = ir.registry()
    specs = ir.parse_pipeline(passes)
    missing = [spec for spec in specs
               if not (reg.has("pass", spec.name) or reg.has("pipeline", spec.name))]
    for spec in missing:  # a pass nobody provides: an error, even beside a missing package
        if spec.name not in KNOWN_PROVIDERS:
            raise PipelineError(reg.unknown("pass", spec.name), passes, spec.column,
                                notes=failed_plugin_notes(reg))
    if missing:
        warn_unoptimized(target, passes, [spec.name for spec in missing])
        return module
    copy = ir.clone(module)
    ir.run_passes(copy, passes)
    return copy


def warn_unoptimized(target: str, passes: str, missing: list[str]) -> None:
    providers = list(dict.fromkeys(KNOWN_PROVIDERS[name] for name in missing))
    names = list(dict.fromkeys(missing))
    if len(names) == len(ir.parse_pipeline(passes)):
        what = f"its passes '{passes}' come"
    else:
        quoted = ", ".join(f"'{name}'" for name in names)
        what = f"{quoted} of its passes '{passes}' come{'s' if len(names) == 1 else ''}"
    which = "which is" if len(providers) == 1 else "which are"
    message = (f"target '{target}' runs unoptimized code (element-wise code is not fused "
               f"into kernels): {what} from {' and '.join(providers)}, {which} not "
               f"installed; {install_hint(*providers)}")
    if message in _warned:
        return
    _warned.add(message)
    warnings.warn(message, PluginWarning, stacklevel=2)
