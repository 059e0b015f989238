#!/usr/bin/env bash
# The device checks in one command, for a GPU machine that has no package index.
#
#   benchmarks/gpu_check.sh [env] [cpu] [threads] [gpu-tests] [nvptx] [examples]
#                           [bf16-tests] [transformer] [chars]
#
# Prepare where pip works (the machine's python3 is CPython 3.12):
#   python3 -m pip wheel --no-deps packages/*/ -w .whl
#   (and, where that python3's llvmlite is not 0.50, an llvmlite 0.50 cp312 wheel
#    unpacked and packed as .whl/llvmlite.tar.xz; and cp312 wheels of the dependencies
#    that machine may lack in .whl/deps, e.g. ml_dtypes: each installed only where its
#    import fails)
# then carry .whl. Results go to $OUT (default out/gpu-check): one log per section and
# the benchmarks' JSON, and summary.txt (each section's exit status and time). Each
# section has its own time limit; a failing one is reported and the next one runs. The
# default sections (env gpu-tests nvptx examples) take at most 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu-check}
mkdir -p "$OUT"
site=${DLVM_SITE:-/tmp/dlvm-site}
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(env gpu-tests nvptx examples)

rm -rf "$site" && mkdir -p "$site"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
    .whl/dlvm_*.whl || { echo "gpu_check: could not install .whl/dlvm_*.whl"; exit 1; }
if ! python3 -c 'import llvmlite, sys; sys.exit(llvmlite.__version__ != "0.50.0")' 2>/dev/null; then
    [ -f .whl/llvmlite.tar.xz ] || { echo "gpu_check: llvmlite 0.50 needed: carry .whl/llvmlite.tar.xz"; exit 1; }
    tar xJf .whl/llvmlite.tar.xz -C "$site"
fi
for wheel in .whl/deps/*.whl; do
    [ -f "$wheel" ] || continue
    module=$(basename "$wheel" | cut -d- -f1)
    python3 -c "import $module" 2>/dev/null ||
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheel"
done
export PYTHONPATH=$site PYTHONUNBUFFERED=1 DLVM_CACHE_DIR=/tmp/dlvm-cache
# CPU benchmarks measure JAX on the CPU; the GPU sections do not use JAX.
export JAX_PLATFORMS=cpu

run() {  # run NAME LIMIT COMMAND...: time it (killed past LIMIT s), log it, go on
    local name=$1 limit=$2; shift 2
    echo "=== $name: $*"
    local start=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    tail -n "${TAIL:-25}" "$OUT/$name.log"
    local verdict="exit $rc"
    [ $rc -eq 124 ] && verdict="stopped at its limit of $limit s"
    echo "=== $name: $verdict in $((SECONDS - start)) s"
    echo "$name: $verdict in $((SECONDS - start)) s" >>"$OUT/summary.txt"
}

: >"$OUT/summary.txt"
for section in "${sections[@]}"; do
    case $section in
    env)
        run env 60 bash -c 'nproc; lscpu | grep "Model name"; nvidia-smi -L;
            python3 -c "import sys, numpy, llvmlite, torch; print(sys.version.split()[0], \"numpy\", numpy.__version__, \"llvmlite\", llvmlite.__version__, \"torch\", torch.__version__)";
            python3 -m dlvm.cli plugins 2>&1 | head -3' ;;
    cpu)
        run llvm_cpu 240 python3 benchmarks/llvm_cpu.py ${LLVM_CPU_ARGS:-} --json "$OUT/llvm_cpu.json" ;;
    threads)
        run threads 120 python3 benchmarks/llvm_cpu.py --only threads --json "$OUT/threads.json" ;;
    gpu-tests)
        run gpu_tests 120 python3 -m pytest -p no:cacheprovider -q ${GPU_TESTS:-packages/dlvm-llvm-gpu} ;;
    nvptx)
        run nvptx 100 python3 benchmarks/nvptx.py --json "$OUT/nvptx.json" ;;
    examples)
        run digits 40 python3 -m dlvm.cli run examples/digits-mlp/pipeline.toml \
            --set target.name=nvptx
        run tel_rnn 40 python3 -m dlvm.cli run examples/tel-rnn/pipeline.toml \
            --set target.name=nvptx --set train.epochs=1
        run onnx_cnn 40 python3 -m dlvm.cli run examples/onnx-cnn/pipeline.toml \
            --set target.name=nvptx --set train.epochs=1
        run onnx_cnn_cpu 40 python3 -m dlvm.cli run examples/onnx-cnn/pipeline.toml \
            --set target.name=llvm-cpu --set train.epochs=1
        run tel_rnn_cpu 40 python3 -m dlvm.cli run examples/tel-rnn/pipeline.toml \
            --set target.name=llvm-cpu --set train.epochs=1 ;;
    bf16-tests)  # bf16 on the GPU: the interpreter's spec tests, cuBLAS GemmEx
        run bf16_tests 100 env DLVM_TEST_TARGET=nvptx python3 -m pytest -p no:cacheprovider \
            -q packages/dlvm-ir/tests/test_interp_bfloat16.py packages/dlvm-llvm-gpu/tests \
            -k "bfloat16 or bf16 or tensor_cores" ;;
    transformer)  # the character transformer's training throughput against PyTorch
        run transformer_bench 130 python3 benchmarks/transformer.py --device cuda \
            --precision f32,bf16 --steps ${TRANSFORMER_STEPS:-40} --output "$OUT/transformer-gpu.md" ;;
    chars)  # examples/char-transformer trained on nvptx in f32 and bf16, then sampled
        for toml in pipeline pipeline-bf16; do
            run "chars_$toml" 90 python3 -m dlvm.cli run examples/char-transformer/$toml.toml \
                --set target.name=nvptx
            cp "examples/char-transformer/out/$toml/latest/metrics.jsonl" "$OUT/chars_$toml.jsonl"
            run "sample_$toml" 40 python3 examples/char-transformer/sample.py --length 40 \
                --checkpoint "examples/char-transformer/out/$toml/latest/params.npz"
        done ;;
    *)
        echo "gpu_check: unknown section $section (env cpu threads gpu-tests nvptx examples" \
             "bf16-tests transformer chars)" ;;
    esac
done
