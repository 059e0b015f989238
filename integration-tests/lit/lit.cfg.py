"""lit configuration for DLVM's IR tests (``*.dl`` files with ``// RUN:`` lines).

Run directly with ``python -m lit integration-tests/lit`` from a venv where DLVM and
``filecheck`` are installed; pytest runs it through integration-tests/test_lit.py.
Parameters: ``-D output=DIR`` puts the test outputs in DIR instead of ``./Output``.
"""

import os
import shutil
import sys

import lit.formats

config.name = "dlvm"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".dl"]
config.excludes = ["lit.cfg.py", "Inputs"]

config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = lit_config.params.get("output") or os.path.join(
    config.test_source_root, "Output"
)

# The tools of the active venv (dlvm, filecheck) come first.
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join(
    [bin_dir, config.environment.get("PATH", os.environ.get("PATH", ""))]
)
config.substitutions.append(("%python", sys.executable))

# Per-test timeout: lit needs psutil to kill a test's processes.
if lit_config.maxIndividualTestTimeIsSupported[0]:
    try:
        lit_config.maxIndividualTestTime = 60  # lit < 23
    except AttributeError:
        config.maxIndividualTestTime = 60  # lit >= 23: a per-suite setting

# Native code generation, when dlvm-llvm is installed (and BLAS, when numpy carries one).
try:
    from dlvm.llvm.runtime import blas as _blas

    config.available_features.add("llvm-cpu")
    if _blas.available():
        config.available_features.add("blas")
except ImportError:
    pass
# PTX generation, when dlvm-llvm-gpu is installed (no GPU needed).
try:
    import dlvm.llvm_gpu  # noqa: F401

    config.available_features.add("nvptx")
except ImportError:
    pass
if shutil.which("ptxas"):
    config.available_features.add("ptxas")
if shutil.which("nvidia-smi"):
    config.available_features.add("cuda")
