"""Starting `dlvm` is cheap: every command loads every installed plugin's entry point, and
those load nothing heavy (LLVM, ONNX, Ray, the TEL compiler) until a command uses it."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("llvmlite", "onnx", "ray", "dlvm.tel.codegen", "dlvm.llvm.target",
         "dlvm.llvm_gpu.target", "dlvm_sample_plugin.lowering")


def modules_loaded_by(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running `code`."""
    script = f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=120)
    return set(done.stdout.split())


def test_building_the_command_with_every_plugin_loads_nothing_heavy() -> None:
    loaded = modules_loaded_by(
        "from dlvm.cli.main import make_app\n"
        "import dlvm.ir as ir\n"
        "make_app(); ir.opdef.ensure_instructions()\n"
        "assert ir.registry().has('target', 'llvm-cpu') and 'softsign' in ir.OPS")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_a_plugin_instructions_native_code_loads_when_a_module_using_it_compiles() -> None:
    program = ("import numpy as np, dlvm.ir as ir\n"
               "m = ir.parse('''func @f: (<2 x f32>) -> <2 x f32> {\n"
               "'entry(%x: <2 x f32>):\n"
               "    %y = softsign %x: <2 x f32>\n"
               "    return %y: <2 x f32>\n"
               "}''')\n"
               "x = np.array([1.0, -3.0], np.float32)\n")
    on_interp = modules_loaded_by(program + "ir.compile(m, 'interp')['f'](x)")
    assert "dlvm_sample_plugin.lowering" not in on_interp and "llvmlite" not in on_interp
    native = modules_loaded_by(
        program + "exe = ir.compile(m, 'llvm-cpu')\n"
        "assert np.allclose(exe['f'](x), [0.5, -0.75]) and exe.fallbacks == []")
    assert "dlvm_sample_plugin.lowering" in native
