"""TEL, the Tensor Expression Language: a declarative, shape-typed language for neural
networks, compiled to DLVM IR.

    import dlvm.tel as tel
    module = tel.compile_file("mnist.tel")      # @inference, @loss, @loss_grad, @init_params…
    print(module)

The language is specified in docs/tel.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir.lazy import lazy_exports

if TYPE_CHECKING:
    from .checker import Checked, check
    from .codegen import generate
    from .compiler import compile, compile_file, read_source
    from .parser import parse
    from .syntax import Program

# loaded on first use: every `dlvm` command imports the plugin module beside this one
__getattr__ = lazy_exports(__name__, {
    "Checked": ".checker", "check": ".checker", "generate": ".codegen", "parse": ".parser",
    "Program": ".syntax", "compile": ".compiler", "compile_file": ".compiler",
    "read_source": ".compiler",
})

__all__ = ["Checked", "Program", "check", "compile", "compile_file", "generate", "parse",
           "read_source"]
