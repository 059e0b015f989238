"""Analyses of functions and modules, cached through `fn.analysis(Kind)` and
`module.analysis(Kind)` and dropped on any structural change."""

from .cfg import ControlFlowGraph
from .dominance import DominatorTree, PostDominatorTree
from .loops import Loop, LoopInfo
from .side_effects import ALL_EFFECTS, NO_EFFECTS, FunctionEffects, SideEffects
from .usedef import UseDefInfo

__all__ = [
    "ALL_EFFECTS",
    "NO_EFFECTS",
    "ControlFlowGraph",
    "DominatorTree",
    "FunctionEffects",
    "Loop",
    "LoopInfo",
    "PostDominatorTree",
    "SideEffects",
    "UseDefInfo",
]
