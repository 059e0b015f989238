"""PTX for every instruction and every program, accepted by NVIDIA's assembler.

LLVM aborts the process on an intrinsic the NVPTX back end cannot select, so code is
generated in child processes: an abort fails a test instead of ending the run. `ptxas`
(on the PATH of this project's machines) then assembles each PTX file for its
architecture; without it these tests skip and say so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import corpus
from dlvm.llvm_gpu import nvptx

ROOT = Path(__file__).resolve().parents[3]
needs_ptxas = pytest.mark.skipif(nvptx.ptxas_path() is None,
                                 reason="ptxas (NVIDIA's PTX assembler) is not on the PATH")

EVERY_INSTRUCTION = textwrap.dedent('''
    import json, sys
    import dlvm.ir as ir
    from dlvm.ir.opdef import OPS
    from dlvm.ir.types import TensorType, parse_data_type
    from llvmlite import ir as ll
    from dlvm.llvm.codegen.scalar import SCALAR
    from dlvm.llvm_gpu import nvptx
    from dlvm.llvm_gpu.kernels import NVPTXFlavour, RegionBuilder

    arch, out, dtype_names = sys.argv[1], sys.argv[2], sys.argv[3:]
    ptx, kernels, skipped = {}, {}, {}


    def bodies_of(dtype_name):
        t = f"<33 x 5 x {dtype_name}>"
        b = "<33 x 5 x bool>"
        bodies = {}
        for op in sorted(SCALAR):
            d = OPS.get(op)
            if d is None or "elementwise" not in d.traits:
                continue
            if op in ("select",):
                bodies[op] = (f"({t}, {t}, {b}) -> {t}", f"%r = select %a: {t}, %b: {t} by %m: {b}")
            elif op == "dataTypeCast":
                for target in ("i8", "i32", "i64", "f16", "f32", "f64", "bool"):
                    bodies[f"cast_{target}"] = (f"({t}) -> <33 x 5 x {target}>",
                                                f"%r = dataTypeCast %a: {t} to {target}")
            elif op in ("not", "and", "or"):
                continue  # bool only: compiled with the compares below
            elif len(d.value_fields) == 1:
                bodies[op] = (f"({t}) -> {t}", f"%r = {op} %a: {t}")
            else:
                result = b if op in ("lessThan", "lessThanOrEqual", "greaterThan",
                                     "greaterThanOrEqual", "equal", "notEqual") else t
                bodies[op] = (f"({t}, {t}) -> {result}", f"%r = {op} %a: {t}, %b: {t}")
        bodies["logic"] = (f"({b}, {b}) -> {b}",
                           f"%x = and %m: {b}, %n: {b}\\n    %y = or %x: {b}, %m: {b}\\n"
                           f"    %r = not %y: {b}")
        for comb in ("add", "multiply", "max", "min"):
            bodies[f"reduce_{comb}"] = (f"({t}) -> <33 x {dtype_name}>",
                                        f"%r = reduce %a: {t} by {comb} init 1: {dtype_name} along 1")
            bodies[f"reduce_all_{comb}"] = (f"(<70000 x {dtype_name}>) -> {dtype_name}",
                                            f"%r = reduce %a: <70000 x {dtype_name}> by {comb} "
                                            f"init 1: {dtype_name}")
        return bodies


    for dtype_name in dtype_names:
        print("building", dtype_name, file=sys.stderr, flush=True)  # for an abort's message
        module = ll.Module(name=f"every_{dtype_name}")
        flavour = NVPTXFlavour(libdevice=nvptx.libdevice_path() is not None)
        kernels[dtype_name], skipped[dtype_name] = [], []
        for name, (sig, line) in bodies_of(dtype_name).items():
            args, result = sig.split(" -> ")
            names_ = ["%a", "%b", "%m"] if name == "select" else (
                ["%m", "%n"] if name == "logic" else ["%a", "%b"])
            plist = ", ".join(f"{n}: {ty}" for n, ty in zip(names_, args.strip("()").split(", ")))
            text = (f"func @k: {sig} {{\\n'entry({plist}):\\n    {line}\\n"
                    f"    return %r: {result}\\n}}\\n")
            try:
                m = ir.parse(text)
                ir.verify(m)
            except ir.DlvmError as e:  # an instruction this data type does not have
                skipped[dtype_name].append([name, str(e).splitlines()[0]])
                continue
            fn = m.function("k")
            insts = fn.entry.instructions[:-1]
            params_ = list(fn.entry.arguments)
            types = {v: v.type for v in [*params_, *insts]}
            code = RegionBuilder(f"{name}", insts, params_, [insts[-1]], types,
                                 [False] * len(params_), flavour, module).build()
            kernels[dtype_name] += code.kernel_names
        ptx[dtype_name] = nvptx.emit_ptx(str(module), arch, kernels[dtype_name])
    with open(out, "w") as f:
        json.dump({"ptx": ptx, "kernels": kernels, "skipped": skipped}, f)
''')
DTYPES = ("f32", "f64", "f16", "i32", "i64", "i8")


@needs_ptxas
@pytest.mark.parametrize("arch", nvptx.ARCHS)
def test_every_instruction_compiles_for_every_architecture(arch: str, tmp_path: Path) -> None:
    """Every element-wise instruction and reduction, in every data type (a module each),
    made in one child process per architecture."""
    out = tmp_path / "every.json"
    run = subprocess.run([sys.executable, "-c", EVERY_INSTRUCTION, arch, str(out), *DTYPES],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]  # an abort inside LLVM shows here
    data = json.loads(out.read_text())
    for dtype in DTYPES:
        assert len(data["kernels"][dtype]) >= 20, (dtype, data["skipped"][dtype])
        try:
            nvptx.ptxas_check(data["ptx"][dtype], arch)
        except nvptx.PTXError as e:
            pytest.fail(f"{dtype}: {e}")


EMIT_PROGRAMS = textwrap.dedent('''
    import json, sys
    import dlvm.ir as ir
    from dlvm.llvm_gpu import nvptx
    out, arch, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    results = {}
    for path in paths:
        with open(out + ".progress", "w") as f:
            f.write(path)  # which program was being compiled, should LLVM abort
        module = ir.parse_file(path)
        target = ir.registry().make_target("nvptx", arch=arch)
        results[path] = target.emit(module, "ptx")
    with open(out, "w") as f:
        json.dump(results, f)
''')


@pytest.fixture(scope="module")
def program_ptx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """PTX of every program of the repository, for sm_80 and sm_90, made in child
    processes."""
    folder = tmp_path_factory.mktemp("ptx")
    paths = [str(p) for p in corpus(ROOT)]
    found: dict[str, dict[str, str]] = {}
    for arch in ("sm_80", "sm_90"):
        out = folder / f"{arch}.json"
        run = subprocess.run([sys.executable, "-c", EMIT_PROGRAMS, str(out), arch, *paths],
                             capture_output=True, text=True, timeout=900)
        if run.returncode != 0:
            progress = Path(str(out) + ".progress")
            at = progress.read_text() if progress.exists() else "?"
            pytest.fail(f"PTX generation failed at {at} for {arch}:\n{run.stderr[-4000:]}")
        found[arch] = json.loads(out.read_text())
    return found


@needs_ptxas
@pytest.mark.parametrize("path", corpus(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_program_compiles_to_ptx_that_ptxas_accepts(
        path: Path, program_ptx: dict[str, dict[str, str]]) -> None:
    for arch, ptx_by_path in program_ptx.items():
        ptx = ptx_by_path[str(path)]
        assert f".target {arch}" in ptx
        nvptx.ptxas_check(ptx, arch)


GRADIENTS = textwrap.dedent('''
    import sys
    import dlvm.ir as ir
    from dlvm.ir.testing import mlp_cross_entropy
    from dlvm.llvm_gpu import nvptx
    text = mlp_cross_entropy(batch="_", inputs=784, hidden=512, outputs=10, dtype="f32")
    rnn = sys.argv[2]
    for source in (text, rnn):
        ptx = ir.registry().make_target("nvptx", arch="sm_90").emit(ir.parse(source), "ptx")
        nvptx.ptxas_check(ptx, "sm_90")
        print(ptx.count(".entry"))
''')


@needs_ptxas
def test_gradients_compile_to_ptx(rnn_text: str) -> None:
    """The MLP cross-entropy gradient and a recurrent loop's backpropagation through time."""
    run = subprocess.run([sys.executable, "-c", GRADIENTS, "", rnn_text], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    counts = [int(x) for x in run.stdout.split()]
    assert all(c >= 3 for c in counts), counts


def test_libdevice_is_found_and_linked_away() -> None:
    """tanh comes from libdevice, inlined: the PTX calls nothing."""
    import dlvm.ir as ir

    if nvptx.libdevice_path() is None:
        pytest.skip("libdevice is not installed (CUDA_HOME, or the nvidia-nvvm wheel)")
    text = ("func @f: (<256 x f32>) -> <256 x f32> {\n'entry(%x: <256 x f32>):\n"
            "    %y = tanh %x: <256 x f32>\n    return %y: <256 x f32>\n}\n")
    llvm_ir = str(ir.registry().make_target("nvptx").emit(ir.parse(text), "llvm"))
    assert "define ptx_kernel" in llvm_ir and "call float @__nv_tanhf" not in llvm_ir
    ptx = ir.registry().make_target("nvptx").emit(ir.parse(text), "ptx")
    assert "call" not in str(ptx) and ".extern" not in str(ptx)


def test_unknown_architectures_are_refused_and_new_ones_mapped() -> None:
    with pytest.raises(nvptx.PTXError, match="unknown GPU architecture 'sm_5'"):
        nvptx.check_arch("sm_5")
    assert nvptx.nearest_arch("sm_90") == "sm_90"
    assert nvptx.nearest_arch("sm_120") == "sm_100"
    assert nvptx.nearest_arch("sm_87") == "sm_86"
    with pytest.raises(nvptx.PTXError, match="older than sm_75"):
        nvptx.nearest_arch("sm_70")


SUM_KERNELS = textwrap.dedent('''
    import json, sys
    import dlvm.ir as ir
    from llvmlite import ir as ll
    from dlvm.llvm_gpu import nvptx
    from dlvm.llvm_gpu.kernels import NVPTXFlavour, RegionBuilder

    out, cases = sys.argv[1], json.loads(sys.argv[2])
    ptx = {}
    for name, (dtype, dims, along) in cases.items():
        t = "<" + " x ".join(map(str, dims)) + f" x {dtype}>"
        kept = [d for k, d in enumerate(dims) if k != along]
        r = "<" + " x ".join(map(str, kept)) + f" x {dtype}>" if kept else dtype
        m = ir.parse(f"func @k: ({t}) -> {r} {{\\n'entry(%a: {t}):\\n"
                     f"    %r = reduce %a: {t} by add init 0: {dtype} along {along}\\n"
                     f"    return %r: {r}\\n}}\\n")
        ir.verify(m)
        fn = m.function("k")
        insts, params = fn.entry.instructions[:-1], list(fn.entry.arguments)
        module = ll.Module(name=name)
        code = RegionBuilder(name, insts, params, [insts[-1]], {v: v.type for v in
                             [*params, *insts]}, [False], NVPTXFlavour(libdevice=False),
                             module).build()
        ptx[name] = nvptx.emit_ptx(str(module), "sm_80", code.kernel_names)
    with open(out, "w") as f:
        json.dump(ptx, f)
''')
# each way a GPU reduction runs (see kernels.py), for the data types that sum wider
SUM_CASES = {
    "thread_f32": ("f32", [5, 3], 1),  # few reduced elements: one thread per output
    "block_f32": ("f32", [100, 5000], 1),  # one block per output, a tree of shuffles
    "split_f32": ("f32", [70000], 0),  # partials in scratch memory, then their fold
    "split_f16": ("f16", [70000], 0),
    "block_f16": ("f16", [100, 5000], 1),
}


@pytest.fixture(scope="module")
def sum_ptx(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("sums") / "sums.json"
    run = subprocess.run([sys.executable, "-c", SUM_KERNELS, str(out), json.dumps(SUM_CASES)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", sorted(SUM_CASES))
def test_gpu_sums_of_narrow_floats_add_in_double_and_round_once(
        case: str, sum_ptx: dict[str, str]) -> None:
    """Every fold, shuffle tree and partial of a float16/float32 sum adds in float64 (no
    add in the data type itself, partials in scratch stored as 64 bits), and the result is
    rounded once, where it is stored."""
    ptx = sum_ptx[case]
    dtype = SUM_CASES[case][0]
    assert "add.rn.f64" in ptx
    assert f"add.rn.{dtype}" not in ptx and f"add.{dtype}" not in ptx
    assert ptx.count(f"cvt.f64.{dtype}") >= 1  # each element widened as it is read
    narrowing = "cvt.rn.f32.f64" if dtype == "f32" else "cvt.rn.f16.f32"
    assert ptx.count(narrowing) == 1
    if case.startswith("split"):
        assert "st.global.b64" in ptx  # the partials keep their 64 bits
    if nvptx.ptxas_path() is not None:
        nvptx.ptxas_check(ptx, "sm_80")


def test_random_rounds_each_float_step_as_numpy_does() -> None:
    """The stream's multiply and add carry `.rn`, so `ptxas` does not fuse them into a
    multiply-add (whose single rounding would draw other numbers than the CPU's)."""
    text = ("func @f: (f32) -> <256 x f32> {\n'entry(%lo: f32):\n"
            "    %r = random 256 from %lo: f32 upto 1.0: f32\n    return %r: <256 x f32>\n}\n")
    ptx = str(ir.registry().make_target("nvptx", arch="sm_90").emit(ir.parse(text), "ptx"))
    assert "mul.rn.f64" in ptx and "add.rn.f64" in ptx and "fma" not in ptx
    assert "_advance" in ptx  # the one-thread kernel that moves the counter on


BF16_OPS = """
func @f: (<64 x f32>, <8 x 16 x bf16>, <16 x 4 x bf16>) -> (<64 x bf16>, <8 x 4 x bf16>) {
'entry(%x: <64 x f32>, %a: <8 x 16 x bf16>, %b: <16 x 4 x bf16>):
    %n = dataTypeCast %x: <64 x f32> to bf16
    %c = dot %a: <8 x 16 x bf16>, %b: <16 x 4 x bf16>
    return (%n: <64 x bf16>, %c: <8 x 4 x bf16>): (<64 x bf16>, <8 x 4 x bf16>)
}
"""


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90"])
def test_bf16_rounds_with_the_gpus_own_conversion_from_sm_80(arch: str) -> None:
    """From sm_80 a rounding to bf16 is one `cvt.rn.bf16.f32`; before, integer operations
    (round to nearest even on the bits) do it."""
    ptx = str(ir.registry().make_target("nvptx", arch=arch).emit(ir.parse(BF16_OPS), "ptx"))
    assert ("cvt.rn.bf16.f32" in ptx) == (arch != "sm_75")
    if nvptx.ptxas_path() is not None:
        nvptx.ptxas_check(ptx, arch)


def test_bf16_products_stay_bf16_for_the_gemm_library() -> None:
    """Arithmetic on bf16 is computed in f32 with casts around it, but `dot` keeps its bf16
    operands: the GPU's GEMM takes them as they are (tensor cores, f32 sums)."""
    target = ir.registry().make_target("nvptx", device="host")
    prepared = target.prepare(ir.parse(BF16_OPS))
    (dot,) = [i for i in prepared.function("f").instructions() if i.opcode == "dot"]
    assert str(dot.lhs.type) == "<8 x 16 x bf16>" and str(dot.type) == "<8 x 4 x bf16>"


def test_bf16_products_sum_in_f32_and_round_once_without_a_library() -> None:
    """The generated GEMM (the host emulation's, and a GPU's where cuBLAS has no bf16
    routine) widens each bf16, sums in f32 and rounds the total once."""
    bf = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 16)).astype(bf)
    b = rng.standard_normal((16, 4)).astype(bf)
    exe = ir.compile(ir.parse(BF16_OPS), "nvptx", device="host")
    got = exe.call("f", np.zeros(64, np.float32), a, b)[1]
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(bf)
    assert got.dtype == bf
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                               rtol=2.0**-7, atol=0)
    assert exe.plan.stats["gemm library calls"] == 0


def test_kernels_of_functions_with_dotted_names_are_ptx_identifiers() -> None:
    """`@dloss.scaled` (the loss-scaling pass's gradient) is a DLVM name but not a PTX one:
    the kernels a launch plan builds for it are named with the dots replaced."""
    from llvmlite import ir as ll

    from dlvm.llvm_gpu.kernels import NVPTXFlavour, RegionBuilder

    m = ir.parse("func @k: (<64 x f32>) -> <64 x f32> {\n'entry(%a: <64 x f32>):\n"
                 "    %r = tanh %a: <64 x f32>\n    return %r: <64 x f32>\n}\n")
    fn = m.function("k")
    assert fn is not None
    insts, params = fn.entry.instructions[:-1], list(fn.entry.arguments)
    module = ll.Module(name="dotted")
    code = RegionBuilder("train_step_dloss.scaled_kernel1", insts, params, [insts[-1]],
                         {v: v.type for v in [*params, *insts]}, [False],
                         NVPTXFlavour(libdevice=False), module).build()
    assert all(name.replace("_", "").isalnum() for name in code.kernel_names)
    ptx = nvptx.emit_ptx(str(module), "sm_80", code.kernel_names)
    if nvptx.ptxas_path() is not None:
        nvptx.ptxas_check(ptx, "sm_80")
