#!/usr/bin/env bash
# The device checks in one command, for a GPU machine that has no package index.
#
#   benchmarks/gpu_check.sh [env] [cpu] [threads] [gpu-tests] [nvptx] [examples]
#
# Prepare where pip works (the machine's python3 is CPython 3.12):
#   python3 -m pip wheel --no-deps packages/*/ -w .whl
#   (and, where that python3's llvmlite is not 0.50, an llvmlite 0.50 cp312 wheel
#    unpacked and packed as .whl/llvmlite.tar.xz)
# then carry .whl. Results go to $OUT (default out/gpu-check): one log per section and
# the benchmarks' JSON. A failing section is reported and the next one runs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu-check}
mkdir -p "$OUT"
site=${DLVM_SITE:-/tmp/dlvm-site}
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(env gpu-tests nvptx cpu)

rm -rf "$site" && mkdir -p "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
    .whl/dlvm_*.whl || { echo "gpu_check: could not install .whl/dlvm_*.whl"; exit 1; }
if ! python3 -c 'import llvmlite, sys; sys.exit(llvmlite.__version__ != "0.50.0")' 2>/dev/null; then
    [ -f .whl/llvmlite.tar.xz ] || { echo "gpu_check: llvmlite 0.50 needed: carry .whl/llvmlite.tar.xz"; exit 1; }
    tar xJf .whl/llvmlite.tar.xz -C "$site"
fi
export PYTHONPATH=$site PYTHONUNBUFFERED=1 DLVM_CACHE_DIR=/tmp/dlvm-cache
# CPU benchmarks measure JAX on the CPU; the GPU sections do not use JAX.
export JAX_PLATFORMS=cpu

run() {  # run NAME COMMAND...: time it, log it, never stop the script
    local name=$1; shift
    echo "=== $name: $*"
    local start=$SECONDS
    "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    tail -n "${TAIL:-25}" "$OUT/$name.log"
    echo "=== $name: exit $rc in $((SECONDS - start)) s"
}

for section in "${sections[@]}"; do
    case $section in
    env)
        run env bash -c 'nproc; lscpu | grep "Model name"; nvidia-smi -L;
            python3 -c "import sys, numpy, llvmlite, torch; print(sys.version.split()[0], \"numpy\", numpy.__version__, \"llvmlite\", llvmlite.__version__, \"torch\", torch.__version__)";
            python3 -m dlvm.cli plugins 2>&1 | head -3' ;;
    cpu)
        run llvm_cpu python3 benchmarks/llvm_cpu.py ${LLVM_CPU_ARGS:-} --json "$OUT/llvm_cpu.json" ;;
    threads)
        run threads python3 benchmarks/llvm_cpu.py --only threads --json "$OUT/threads.json" ;;
    gpu-tests)
        run gpu_tests python3 -m pytest -p no:cacheprovider -q -x packages/dlvm-llvm-gpu ;;
    nvptx)
        run nvptx python3 benchmarks/nvptx.py --json "$OUT/nvptx.json" ;;
    examples)
        run digits python3 -m dlvm.cli run examples/digits-mlp/pipeline.toml \
            --set target.name=nvptx --quiet ;;
    *)
        echo "gpu_check: unknown section $section (env cpu threads gpu-tests nvptx examples)" ;;
    esac
done
