"""DLVM's intermediate representation: types, instructions, text format,
verifier, analyses, pass manager, plugin registry and reference interpreter.

    import numpy as np
    import dlvm.ir as ir
    m = ir.parse('''
    func @f: (<3 x f32>) -> f32 {
    'entry(%x: <3 x f32>):
        %s = reduce %x: <3 x f32> by add init 0.0: f32
        return %s: f32
    }''', filename="f.dl")
    ir.run_passes(m, "verify")                   # any pipeline text, e.g. "differentiation,O2"
    f = ir.compile(m, target="interp")["f"]      # or the fastest installed target: target=None
    print(f(np.arange(3, dtype=np.float32)))    # 3.0

`ir.load_module(path)` reads a file through the front end for it (`.dl`, `.tel`, …);
`ir.Builder` builds functions in Python (`b.add(x, y)`, `b.dot(a, w)`, `b.ret(v)`);
`ir.define` adds an instruction; `dlvm.ir.patterns` helps passes match IR; plugins add
passes, targets and front ends through the entry-point group `dlvm.plugins` (see
docs/plugins.md). The language is specified in docs/ir-reference.md.
"""

from . import instructions as _instructions  # registers the instruction set
from .api import clone, compile, has_gradient_declarations, replace_all_uses, run_passes
from .builder import Builder, constant
from .core import (
    AggregateLiteral,
    Argument,
    Block,
    BranchTarget,
    BuiltinRef,
    DenseLiteral,
    DerivativeDecl,
    FieldKey,
    Function,
    GlobalVariable,
    Instruction,
    KeywordLiteral,
    Literal,
    LiteralValue,
    Module,
    ScalarLiteral,
    Value,
)
from .diagnostics import Diagnostic, DiagnosticError, DlvmError, Location, Source
from .frontends import FrontendError, load_module
from .link import link
from .opdef import OPS, OpDef, TypeRuleError, define, ensure_instructions, lookup
from .parser import parse, parse_file
from .passes import FunctionPass, Pass, PassContext, PassError, PassManager, PassRecord
from .pipeline import PipelineError, build_pipeline, parse_pipeline
from .plugin import (
    NotedError,
    PluginWarning,
    RegisterEngine,
    RegisterFrontend,
    RegisterPass,
    RegisterPipeline,
    RegisterTarget,
    Registry,
    RegistryError,
    hookimpl,
    make_registry,
    registry,
)
from .printer import print_function, print_instruction, print_module
from .runtime import ExecutionError
from .target import Executable, Target
from .types import (
    BOOL,
    F16,
    F32,
    F64,
    I1,
    I8,
    I16,
    I32,
    I64,
    STACK,
    VOID,
    ArrayType,
    BoxType,
    DataType,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    TensorType,
    TupleType,
    Type,
    scalar,
    tensor,
)
from .verifier import verify

del _instructions

# The names most programs need; `help(dlvm.ir)` documents these. Everything imported above
# stays importable from here, and the submodules hold the rest (`dlvm.ir.types`, …).
__all__ = [
    "BOOL",
    "F16",
    "F32",
    "F64",
    "I8",
    "I16",
    "I32",
    "I64",
    "Block",
    "Builder",
    "DataType",
    "DenseLiteral",
    "DiagnosticError",
    "DlvmError",
    "Executable",
    "ExecutionError",
    "FrontendError",
    "Function",
    "FunctionPass",
    "FunctionType",
    "Instruction",
    "Module",
    "OpDef",
    "Pass",
    "PassContext",
    "PassError",
    "RegistryError",
    "Target",
    "TensorType",
    "TupleType",
    "Type",
    "Value",
    "clone",
    "compile",
    "constant",
    "define",
    "link",
    "load_module",
    "parse",
    "parse_file",
    "print_function",
    "print_module",
    "registry",
    "replace_all_uses",
    "run_passes",
    "scalar",
    "tensor",
    "verify",
]
