"""Building small ONNX models and comparing DLVM with ONNX Runtime on them: the harness of
the operator tests, shared by every test module of the package (`tests/test_*.py`).

A `Case` is a model (one node from `op`, or a few from `graph`), its graph inputs — drawn per
seed, a dynamic dimension taking another size with each seed — and initializers; `check`
runs it in ONNX Runtime and in DLVM on each target and compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dlvm.ir as ir
import onnx
from dlvm.ir.runtime import is_float_dtype
from onnx import TensorProto, helper

from .importer import load

# native code is built once with the functions' own dynamic dimensions, not for each shape
# LLVM's -O0 on llvm-cpu: these tests are about the importer's semantics, not the speed of
# the code, and LLVM's optimizer would take 60% of their time (DLVM's own passes still run).
TARGETS = {"interp": {}, "llvm-cpu": {"specialize": False, "opt_level": 0}}
SEEDS = (0, 1, 2)
TOL = (1e-5, 1e-6)  # rtol, atol for float32
LOOSE = (1e-4, 1e-5)  # transcendental functions, long sums
INT_MAX = np.iinfo(np.int64).max


# ------------------------------------------------------------------ cases


@dataclass(frozen=True)
class In:
    """A graph input: its shape, how its values are drawn and which dimensions are dynamic
    (declared by name; their size changes with the seed: as given, 1, then 2 more)."""

    shape: tuple[int, ...]
    kind: str = "normal"  # normal | positive | int | nonzero | bool
    dtype: Any = np.float32
    dynamic: tuple[int, ...] = ()

    def dims(self) -> list[int | str]:
        return [("batch" if i == 0 else f"d{i}") if i in self.dynamic else d
                for i, d in enumerate(self.shape)]

    def sample(self, rng: np.random.Generator, seed: int) -> np.ndarray:
        shape = tuple((d, 1, d + 2)[seed % 3] if i in self.dynamic else d
                      for i, d in enumerate(self.shape))
        if self.kind == "normal":
            x = rng.standard_normal(shape)
        elif self.kind == "positive":
            x = rng.uniform(0.1, 4.0, shape)
        elif self.kind == "int":
            x = rng.integers(-6, 7, shape)
        elif self.kind == "nonzero":
            x = rng.integers(1, 7, shape) * rng.choice([-1, 1], shape)
        else:
            x = rng.random(shape) < 0.5
        return np.asarray(x).astype(self.dtype)


def dyn(*shape: int, kind: str = "normal", dtype: Any = np.float32) -> In:
    """An input of a dynamic "batch" (2, 1, 4 with the seeds) of `shape`."""
    return In((2, *shape), kind, dtype, (0,))


@dataclass
class Case:
    """A model to compare: its nodes, graph inputs, initializers and outputs."""

    id: str
    nodes: list[onnx.NodeProto]
    inputs: dict[str, In]
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: tuple[str, ...] = ("y",)
    opset: int = 18
    tol: tuple[float, float] = TOL
    seeds: tuple[int, ...] = SEEDS
    domain: tuple[str, int] | None = None  # another domain the nodes use, and its version
    # what computes the expected outputs: ONNX Runtime, or ONNX's reference evaluator for
    # operators that ONNX Runtime has no kernel for
    oracle: str = "onnxruntime"

    def model(self) -> onnx.ModelProto:
        inputs = [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(np.dtype(s.dtype)), s.dims())
            for n, s in self.inputs.items()]
        outputs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                   for o in self.outputs]
        graph = helper.make_graph(
            self.nodes, "test", inputs, outputs,
            [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in self.consts.items()])
        opsets = [helper.make_opsetid("", self.opset)]
        if self.domain is not None:
            opsets.append(helper.make_opsetid(*self.domain))
        model = helper.make_model(graph, opset_imports=opsets)
        # the outputs' types as ONNX infers them (the checker wants them)
        return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def short(x: In | np.ndarray | None) -> str:
    if x is None:
        return "_"
    if isinstance(x, In):
        dims = "x".join(str(d) for d in x.dims()) or "scalar"
        return dims if x.dtype == np.float32 else f"{dims}{np.dtype(x.dtype).name}"
    if x.dtype.kind in "ib" and x.size <= 4:
        return np.array2string(x.reshape(-1), separator=",").replace(" ", "")
    return "const" + ("x".join(map(str, x.shape)) or "scalar")


def op(op_type: str, *args: In | np.ndarray | None, outputs: int = 1, opset: int = 18,
       tol: tuple[float, float] = TOL, seeds: tuple[int, ...] = SEEDS, id: str | None = None,
       domain: tuple[str, int] | None = None, oracle: str = "onnxruntime",
       **attrs: Any) -> Case:
    """One node of `op_type` (of `domain`, a name and version, if not the default one); its
    inputs in order are graph inputs (`In`), initializers (arrays) or absent (None)."""
    names: list[str] = []
    inputs: dict[str, In] = {}
    consts: dict[str, np.ndarray] = {}
    for i, a in enumerate(args):
        if a is None:
            names.append("")
        elif isinstance(a, In):
            names.append(f"x{i}")
            inputs[f"x{i}"] = a
        else:
            names.append(f"c{i}")
            consts[f"c{i}"] = np.asarray(a)
    outs = ("y",) if outputs == 1 else tuple(f"y{k}" for k in range(outputs))
    node = helper.make_node(op_type, names, list(outs), name=f"the_{op_type}",
                            domain=domain[0] if domain else None, **attrs)
    if id is None:
        parts = [short(a) for a in args]
        parts += [f"{k}={v}" for k, v in attrs.items()]
        id = "-".join([op_type, *parts] + ([f"opset{opset}"] if opset != 18 else []))
    return Case(id.replace(" ", ""), [node], inputs, consts, outs, opset, tol, seeds, domain,
                oracle)


def weights(*shape: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def graph(id: str, nodes: list[onnx.NodeProto], inputs: dict[str, In],
          consts: dict[str, np.ndarray] | None = None, outputs: tuple[str, ...] = ("y",),
          opset: int = 18, tol: tuple[float, float] = TOL) -> Case:
    return Case(id, nodes, inputs, consts or {}, outputs, opset, tol)



def check(case: Case, freeze: bool = False, targets: dict[str, dict[str, Any]] | None = None
          ) -> None:
    """ONNX Runtime's outputs (or the reference evaluator's, per the case) and DLVM's, on
    every target of `targets` (default `TARGETS`) and every seed, of the same data type and
    shape, and equal (floats: within the case's tolerance)."""
    model = case.model()
    session = oracle(case, model)
    module = load(model, freeze=freeze)
    runs = {t: ir.compile(module, t, **options)["main"]
            for t, options in (targets or TARGETS).items()}
    rtol, atol = case.tol
    for seed in case.seeds:
        rng = np.random.default_rng(seed)
        feeds = {name: spec.sample(rng, seed) for name, spec in case.inputs.items()}
        expected = session.run(None, feeds)
        for target, run in runs.items():
            got = run(*feeds.values())
            got = list(got) if len(case.outputs) > 1 else [got]
            for want, have in zip(expected, got, strict=True):
                have = np.asarray(have)
                where = f"{target}, seed {seed}"
                assert (have.shape, have.dtype) == (want.shape, want.dtype), where
                if is_float_dtype(want.dtype):
                    np.testing.assert_allclose(have, want, rtol, atol, err_msg=where)
                else:
                    np.testing.assert_array_equal(have, want, err_msg=where)


def oracle(case: Case, model: onnx.ModelProto) -> Any:
    """What runs the model for the expected outputs: `run(None, feeds)` of either."""
    if case.oracle == "reference":
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model)
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def refusal(case: Case) -> str:
    """The error that importing the case's model reports (a test failure if it imports)."""
    try:
        load(case.model())
    except ir.DlvmError as e:
        return str(e)
    raise AssertionError(f"{case.id}: imported, where a refusal was expected")
