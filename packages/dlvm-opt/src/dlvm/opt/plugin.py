"""dlvm-opt's registrations: its passes and the named pipelines O0–O3."""

from __future__ import annotations

from collections.abc import Callable

from dlvm.ir.plugin import hookimpl

PASSES = {
    "dce": ("dead_code:DeadCodeElimination",
            "remove instructions, block arguments and blocks whose results are never used"),
    "cse": ("cse:CommonSubexpressionElimination",
            "reuse an equal pure computation that dominates (commutativity-aware)"),
    "constant-fold": ("constant_fold:ConstantFolding",
                      "evaluate instructions whose operands are all literals"),
    "algebra-simplify": ("algebra_simplify:AlgebraSimplification",
                         "algebraic identities exact for floats (x+0, x·1, exp(log x), …)"),
    "literal-broadcast-promotion": ("literal_broadcast:LiteralBroadcastPromotion",
                                    "turn splat tensor literals into broadcast scalars"),
    "matrix-chain-reordering": ("matrix_chain:MatrixChainReordering",
                                "reassociate chains of dot by the optimal-order DP"),
    "inline": ("inline:Inlining", "inline !inline functions and small callees"),
    "cfg-simplify": ("cfg_simplify:CFGSimplification",
                     "merge straight-line blocks, fold constant branches, drop dead blocks"),
    "cfg-canonicalize": ("cfg_canonicalize:CFGCanonicalization",
                         "loop preheaders, single exit blocks and dedicated loop exits"),
    "licm": ("licm:LoopInvariantCodeMotion", "hoist loop-invariant pure code to the preheader"),
    "fuse-elementwise": ("fuse_elementwise:ElementwiseFusion",
                         "outline element-wise regions into !kernel functions"),
    "mixed-precision": ("mixed_precision:MixedPrecision",
                        "compute differentiated functions in bf16 or f16, keeping their f32 "
                        "signatures"),
    "loss-scaling": ("loss_scaling:LossScaling",
                     "scale a training step's gradients by a run-time factor and skip its "
                     "update when they are not finite"),
}

PIPELINES = {
    "O0": ("verify", "no optimization"),
    "O1": ("constant-fold,algebra-simplify,cse,dce,cfg-simplify",
           "cheap clean-ups: folding, simplification, CSE, DCE"),
    "O2": ("inline,constant-fold,algebra-simplify,literal-broadcast-promotion,cse,dce,"
           "cfg-simplify,licm,constant-fold,algebra-simplify,cse,dce",
           "the standard pipeline: O1 plus inlining and loop-invariant code motion, twice"),
    "O3": ("O2,matrix-chain-reordering,algebra-simplify,cse,dce,fuse-elementwise,dce",
           "O2 plus matrix-chain reordering and element-wise kernel fusion"),
}


@hookimpl
def register_passes(register: Callable[..., None]) -> None:
    for name, (factory, summary) in PASSES.items():
        register(name, f"dlvm.opt.transforms.{factory}", summary)


@hookimpl
def register_pipelines(register: Callable[..., None]) -> None:
    for name, (text, summary) in PIPELINES.items():
        register(name, text, summary)
