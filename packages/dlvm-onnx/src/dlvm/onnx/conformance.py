"""ONNX's own backend test cases, run through the importer and the reference interpreter.

    python -m dlvm.onnx.conformance [node|wheel] [--verbose] [--filter REGEX]
    python -m dlvm.onnx.conformance --record     # both kinds, into conformance.json

`node`: the operator tests of the installed onnx (`onnx.backend.test.loader`, one case per
`expect(...)` of `onnx/backend/test/case/node`); `wheel`: the model tests shipped as files in
the wheel (`pytorch-converted`, `pytorch-operator`, `simple`). Each case is a model, its
inputs and the outputs ONNX expects. It ends in one of:

- `pass`: imported, run by `interp`, every output of the expected data type and shape and
  within ONNX Runtime's tolerance (`rtol=1e-3`, `atol=1e-5`, NaN where NaN is expected);
- `refused`: the importer said why, naming the node and operator (`FrontendError`);
- `wrong`: imported and run, but an output differs (a bug);
- `failed`: an execution error or an internal error (a bug);
- `not numeric`: its inputs or outputs are not numeric tensors (strings, sequences,
  optionals), which DLVM functions do not take.

When the model with every input free is refused, its inputs of rank 0 or 1 (shapes, axes,
pads, sizes, counts, scales, a mask: an exporter writes them as initializers or computes
them from `Shape`) are bound to the case's values: the case then runs with them as initializers, as
an exported model would have them (counted apart: `Outcome.bound`). A case whose inputs
would all be bound stays refused: ONNX's reference implementation, evaluating it at import,
would compute it, not DLVM.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dlvm.ir as ir
import onnx
import onnx.numpy_helper
from dlvm.ir.runtime import BFLOAT16, is_float_dtype

from .importer import Importer

RTOL, ATOL = 1e-3, 1e-5  # ONNX Runtime's backend test series
BF16_RTOL = 2.0**-6
WHEEL_KINDS = ("pytorch-converted", "pytorch-operator", "simple")
NUMERIC = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
           onnx.TensorProto.BFLOAT16, onnx.TensorProto.INT8, onnx.TensorProto.INT16,
           onnx.TensorProto.INT32, onnx.TensorProto.INT64, onnx.TensorProto.UINT8,
           onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64,
           onnx.TensorProto.BOOL}
MAX_STEPS = 5_000_000
# the outcome of every case at the last `--record`, which the README's figures and operator
# table are generated from (a test checks that it is what a run gives)
RESULTS = Path(__file__).resolve().parents[3] / "conformance.json"


@dataclass
class Case:
    name: str
    model: onnx.ModelProto
    data_sets: list[tuple[list[Any], list[Any]]]


@dataclass
class Outcome:
    name: str
    status: str  # pass, refused, wrong, failed, not numeric
    message: str = ""
    bound: bool = False  # some inputs were bound as initializers


# ------------------------------------------------------------------ loading cases


def node_cases() -> list[Case]:
    """The operator tests of the installed onnx, in memory."""
    import onnx.backend.test.loader as loader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = loader.load_model_tests(kind="node")
    out = []
    for c in cases:
        model = c.model if c.model is not None else onnx.load(Path(c.model_dir) / "model.onnx")
        sets = c.data_sets if c.data_sets is not None else list(_sets_on_disk(
            Path(c.model_dir), model))
        out.append(Case(c.name, model, [([as_array(x) for x in i], [as_array(x) for x in o])
                                         for i, o in sets]))
    return out


def as_array(x: Any) -> Any:
    """A tensor of a data set as numpy (the loader gives numpy arrays, numpy scalars or
    TensorProtos); anything else (sequences, optionals) as it is."""
    if isinstance(x, onnx.TensorProto):
        return onnx.numpy_helper.to_array(x)
    if isinstance(x, np.ndarray | np.generic):
        return np.asarray(x)
    return x


def wheel_cases(kinds: Sequence[str] = WHEEL_KINDS) -> list[Case]:
    """The model tests shipped as files in the onnx wheel."""
    root = Path(onnx.__file__).parent / "backend" / "test" / "data"
    out = []
    for kind in kinds:
        for d in sorted((root / kind).iterdir()) if (root / kind).is_dir() else []:
            if (d / "model.onnx").exists():
                model = onnx.load(d / "model.onnx")
                out.append(Case(f"{kind}/{d.name}", model, list(_sets_on_disk(d, model))))
    return out


def _sets_on_disk(d: Path, model: onnx.ModelProto) -> Iterator[tuple[list[Any], list[Any]]]:
    for s in sorted(d.glob("test_data_set_*")):
        yield ([_read(p) for p in sorted(s.glob("input_*.pb"), key=_number)],
               [_read(p) for p in sorted(s.glob("output_*.pb"), key=_number)])


def _number(p: Path) -> int:
    return int(p.stem.split("_")[-1])


def _read(p: Path) -> Any:
    t = onnx.TensorProto()
    t.ParseFromString(p.read_bytes())
    return onnx.numpy_helper.to_array(t)


# ------------------------------------------------------------------ running one case


def numeric(model: onnx.ModelProto) -> bool:
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    for v in [*[i for i in graph.input if i.name not in inits], *graph.output]:
        if not v.type.HasField("tensor_type") or v.type.tensor_type.elem_type not in NUMERIC:
            return False
    return True


def run_case(case: Case) -> Outcome:
    if not numeric(case.model) or any(
            not isinstance(x, np.ndarray) for ins, outs in case.data_sets for x in [*ins, *outs]):
        return Outcome(case.name, "not numeric")
    try:
        module, bound = import_case(case)
    except ir.DlvmError as e:
        return Outcome(case.name, "refused", one_line(e))
    except Exception as e:  # an internal error: reported, never hidden
        return Outcome(case.name, "failed", f"internal error while importing: "
                       f"{type(e).__name__}: {one_line(e)}")
    return check_outputs(case, module, bound)


def import_case(case: Case) -> tuple[ir.Module, list[int]]:
    """The case's model as a module; the positions of the inputs bound as initializers when
    the model is refused with them free because a converter needs them at import (sizes,
    axes, counts: inputs of rank 0 or 1, the same in every data set). At least one input
    stays free: the choices, tried in turn, narrow from every such input to the integer
    ones, then to single values (integers first); if none imports, the refusal stands."""
    try:
        return imported(case.model), []
    except ir.DlvmError as refusal:
        inputs = case.data_sets[0][0]
        same = [all(np.array_equal(s[0][k], x) for s in case.data_sets)
                for k, x in enumerate(inputs)]
        choices = (lambda x: x.dtype.kind in "iufb" and x.ndim <= 1,
                   lambda x: x.dtype.kind in "iu" and x.ndim <= 1,
                   lambda x: x.dtype.kind in "iu" and x.size == 1,
                   lambda x: x.dtype.kind in "iufb" and x.size == 1)
        tried: list[list[int]] = []
        for qualifies in choices:
            bound = [k for k, x in enumerate(inputs) if same[k] and qualifies(x)]
            if not bound or len(bound) == len(inputs) or bound in tried:
                continue
            tried.append(bound)
            try:
                return imported(with_initializers(case.model, bound, inputs)), bound
            except ir.DlvmError:
                continue
        raise refusal


def imported(model: onnx.ModelProto) -> ir.Module:
    module = Importer(model, freeze=True, source="model.onnx").run()
    ir.verify(module)
    return module


def with_initializers(model: onnx.ModelProto, bound: list[int], values: list[np.ndarray]
                      ) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name for t in m.graph.initializer}
    free = [i for i in m.graph.input if i.name not in inits]
    for k in bound:
        m.graph.initializer.append(onnx.numpy_helper.from_array(values[k], free[k].name))
    keep = [i for k, i in enumerate(free) if k not in bound]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    m.ir_version = max(m.ir_version, 4)
    return m


def check_outputs(case: Case, module: ir.Module, bound: list[int]) -> Outcome:
    try:
        exe = ir.compile(module, "interp", max_steps=MAX_STEPS)
    except ir.DlvmError as e:
        return Outcome(case.name, "failed", f"compile: {one_line(e)}", bool(bound))
    for inputs, expected in case.data_sets:
        args = [x for k, x in enumerate(inputs) if k not in bound]
        try:
            with np.errstate(all="ignore"):
                got = exe.call("main", *args)
        except ir.DlvmError as e:
            return Outcome(case.name, "failed", f"run: {one_line(e)}", bool(bound))
        except Exception as e:
            return Outcome(case.name, "failed", f"internal error while running: "
                           f"{type(e).__name__}: {one_line(e)}", bool(bound))
        problem = differs(list(got), expected)
        if problem:
            return Outcome(case.name, "wrong", problem, bool(bound))
    return Outcome(case.name, "pass", "", bool(bound))


def differs(got: list[Any], expected: list[np.ndarray]) -> str:
    """What is wrong with `got` (empty when it matches)."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, {len(expected)} expected"
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        g = np.asarray(g)
        if g.dtype != e.dtype:
            return f"output {k}: data type {g.dtype}, {e.dtype} expected"
        if g.shape != e.shape:
            return f"output {k}: shape {g.shape}, {e.shape} expected"
        if is_float_dtype(e.dtype):
            # bfloat16 within two of its ulps, as ONNX's own runner allows
            rtol = max(RTOL, BF16_RTOL) if e.dtype == BFLOAT16 else RTOL
            ok = np.isclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=ATOL,
                            equal_nan=True)
        else:
            ok = g == e
        if not np.all(ok):
            bad = int(np.size(ok) - np.count_nonzero(ok))
            return f"output {k}: {bad} of {e.size} elements differ"
    return ""


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


# ------------------------------------------------------------------ reports


def run_all(cases: Sequence[Case], pattern: str = "") -> list[Outcome]:
    chosen = [c for c in cases if re.search(pattern, c.name)] if pattern else list(cases)
    return [run_case(c) for c in chosen]


def summary(outcomes: Sequence[Outcome]) -> str:
    counts = Counter(o.status for o in outcomes)
    numeric_cases = len(outcomes) - counts["not numeric"]
    rate = counts["pass"] / numeric_cases if numeric_cases else 0.0
    parts = ", ".join(f"{counts[s]} {s}" for s in ("pass", "refused", "wrong", "failed",
                                                    "not numeric"))
    return f"{len(outcomes)} cases: {parts}; {rate:.1%} of the numeric cases pass"


def recorded() -> dict[str, dict[str, list[str]]]:
    """{kind: {case: [status, op types]}} as last recorded (empty without the file)."""
    if not RESULTS.exists():
        return {}
    data = json.loads(RESULTS.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if k != "onnx"}


def recorded_onnx_version() -> str:
    """The version of onnx whose cases were recorded (other versions have other cases)."""
    if not RESULTS.exists():
        return ""
    return str(json.loads(RESULTS.read_text(encoding="utf-8")).get("onnx", ""))


def as_record(cases: Sequence[Case], outcomes: Sequence[Outcome]) -> dict[str, list[str]]:
    ops = {c.name: sorted({n.op_type for n in c.model.graph.node}) for c in cases}
    return {o.name: [o.status + (" (bound)" if o.bound else ""), *ops[o.name]]
            for o in outcomes}


def record() -> None:
    results: dict[str, Any] = {"onnx": onnx.__version__}
    for kind, load in (("node", node_cases), ("wheel", wheel_cases)):
        cases = load()
        outcomes = run_all(cases)
        results[kind] = as_record(cases, outcomes)
        print(f"{kind}: {summary(outcomes)}")
    RESULTS.write_text(json.dumps(results, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlvm.onnx.conformance")
    parser.add_argument("kind", choices=("node", "wheel"), nargs="?", default="node")
    parser.add_argument("--filter", default="", help="a regular expression on case names")
    parser.add_argument("--verbose", action="store_true", help="a line per case")
    parser.add_argument("--record", action="store_true",
                        help=f"run both kinds and write every outcome to {RESULTS.name}")
    args = parser.parse_args(argv)
    if args.record:
        record()
        return 0
    cases = node_cases() if args.kind == "node" else wheel_cases()
    outcomes = run_all(cases, args.filter)
    for o in outcomes:
        if args.verbose or o.status in ("wrong", "failed"):
            print(f"{o.status:12} {o.name}{' (bound inputs)' if o.bound else ''}: {o.message}")
    print(summary(outcomes))
    return 1 if any(o.status in ("wrong", "failed") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
