"""DLVM's intermediate representation: types, instructions, text format,
verifier, analyses, pass manager, plugin registry and reference interpreter.

    import dlvm.ir as ir
    m = ir.parse(text, filename="x.dl")
    ir.verify(m)
    ir.run_passes(m, "cse,dce")
    outs = ir.compile(m, target="interp").call("f", x)
"""

from . import instructions as _instructions  # registers the instruction set
from .api import clone, compile, has_gradient_declarations, run_passes
from .builder import Builder, constant
from .core import (
    AggregateLiteral,
    Argument,
    Block,
    BranchTarget,
    BuiltinRef,
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
from .opdef import OPS, OpDef, TypeRuleError, define, lookup
from .parser import parse, parse_file
from .passes import FunctionPass, Pass, PassContext, PassError, PassManager, PassRecord
from .pipeline import PipelineError, build_pipeline, parse_pipeline
from .plugin import Registry, RegistryError, hookimpl, make_registry, registry
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
)
from .verifier import verify

del _instructions

__all__ = [
    "BOOL",
    "F16",
    "F32",
    "F64",
    "I1",
    "I8",
    "I16",
    "I32",
    "I64",
    "OPS",
    "STACK",
    "VOID",
    "AggregateLiteral",
    "Argument",
    "ArrayType",
    "Block",
    "BoxType",
    "BranchTarget",
    "Builder",
    "BuiltinRef",
    "DataType",
    "DerivativeDecl",
    "Diagnostic",
    "DiagnosticError",
    "DlvmError",
    "Executable",
    "ExecutionError",
    "FieldKey",
    "Function",
    "FunctionPass",
    "FunctionType",
    "GlobalVariable",
    "Instruction",
    "KeywordLiteral",
    "Literal",
    "LiteralValue",
    "Location",
    "Module",
    "NominalType",
    "OpDef",
    "Pass",
    "PassContext",
    "PassError",
    "PassManager",
    "PassRecord",
    "PipelineError",
    "PointerType",
    "Registry",
    "RegistryError",
    "ScalarLiteral",
    "Source",
    "StackType",
    "Target",
    "TensorType",
    "TupleType",
    "Type",
    "TypeRuleError",
    "Value",
    "build_pipeline",
    "clone",
    "compile",
    "constant",
    "define",
    "has_gradient_declarations",
    "hookimpl",
    "lookup",
    "make_registry",
    "parse",
    "parse_file",
    "parse_pipeline",
    "print_function",
    "print_instruction",
    "print_module",
    "registry",
    "run_passes",
    "verify",
]
