#!/usr/bin/env bash
# The one script for the lent GPU machine (Python 3.12, torch 2.11, no network): runs the
# suite there (the capture frontend must pass on 3.12) and leaves logs in $OUT.
# Wheels that image lacks travel in .whl/ (pure-Python: bytecode; expecttest, which torch's OpInfo
# database imports), carried with the call (`carry: [".whl"]`); fetch them here with
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --platform any -d .whl bytecode expecttest
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
{ python3 --version; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"; nvidia-smi --query-gpu=name --format=csv,noheader; } 2>&1 | tee "$OUT/env.txt"
if [ -n "${REPLAY:-}" ]; then
  # Fuzz seeds on the GPU with full traces (and the generated code of the first), for wrong
  # results a GPU fuzz run found: REPLAY="inplace:700229,701712 lowp:700735" bash scripts/gpu.sh
  first=1
  for group in $REPLAY; do
    mode=${group%%:*}; seeds=${group#*:}
    for seed in ${seeds//,/ }; do
      if [ $first = 1 ]; then logs=output_code; first=0; else logs=; fi
      EMBER_FUZZ_DEVICE=cuda EMBER_LOGS=$logs timeout 120 python3 -m tests.fuzz.replay --backend ember --mode "$mode" \
        "$seed" >> "$OUT/replay_$mode.txt" 2>&1
      grep "^== seed $seed" "$OUT/replay_$mode.txt" | tail -1
    done
  done
  exit 0
fi
if [ -n "${FUZZ_SEEDS:-}" ]; then
  # The differential fuzzer on this machine's CPU cores (ember's C++ kernels; its GPU idles), or
  # with EMBER_FUZZ_DEVICE=cuda on its GPU (inputs on the GPU: ember's Triton kernels):
  #   FUZZ_SEEDS=2000:7000 FUZZ_MODE=default FUZZ_SECONDS=540 bash scripts/gpu.sh
  # Outcomes stream into $OUT/fuzz.jsonl, so a run cut short still reports what it finished.
  timeout "${FUZZ_SECONDS:-540}" python3 -m tests.fuzz.run --backend "${FUZZ_BACKENDS:-ember,aot_eager}" \
    --seeds "$FUZZ_SEEDS" --mode "${FUZZ_MODE:-default}" --jobs "${FUZZ_JOBS:-15}" --threads 1 \
    --results "$OUT/fuzz.jsonl" --quiet > "$OUT/fuzz.txt" 2>&1
  # (--mode: the summary covers every mode that ran, one table row per backend and mode)
  python3 -m tests.fuzz.run --backend "${FUZZ_BACKENDS:-ember,aot_eager}" --seeds 0:0 --mode "${FUZZ_MODE:-default}" \
    --report-from "$OUT/fuzz.jsonl" --report "$OUT/fuzz.md" 2>&1 | tail -40
  exit 0
fi
# GPU_PART: suite (the tests), bench (the GPU benchmarks), or both (default: suite, then bench);
# final: suite, OpInfo, bandwidth and reduce-overhead in one call (then GPU_PART=models, all eight);
# opinfo: the OpInfo sweep on CUDA with backend ember (issue 10, acceptance 2), into $OUT;
# models: issue 10's models (eager, Inductor, ember), two per call (the 600 s limit):
#   GPU_PART=models MODELS=bert,gpt2 bash scripts/gpu.sh ; GPU_PART=models MODELS=resnet50,vit bash scripts/gpu.sh
# bench: bandwidth (acceptance 4) and reduce-overhead (acceptance 5)
# quick: the GPU tests of recently changed code and the reduce-overhead benchmark
# autograd: compiled autograd's tests on the GPU and its BERT backward benchmark (issue 11)
PART=${GPU_PART:-all}
if [ "$PART" = final ]; then
  # Every acceptance point but the models in one call (~9 min): the suite on GPU 0, the OpInfo
  # sweep beside it (on GPU 1 where the machine has two, else on GPU 0 too), then bandwidth and
  # reduce-overhead on GPU 0.  Each process sees one GPU.  Eight files come back: pytest.txt,
  # the four OpInfo tables, the two benchmarks' tables and env.txt.
  OPINFO_GPU=$([ "$(nvidia-smi -L | wc -l)" -ge 2 ] && echo 1 || echo 0)
  for dtype in float32 bfloat16; do
    for kind in forward backward; do
      CUDA_VISIBLE_DEVICES=$OPINFO_GPU timeout "${OPINFO_SECONDS:-520}" python3 -m tests.autograd.opinfo_report \
        --device cuda --dtypes $dtype --kinds $kind --backend ember --out "$OUT/opinfo_cuda_${dtype}_${kind}.md" \
        > "/tmp/opinfo_${dtype}_${kind}.log" 2>&1 &
    done
  done
  CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 timeout "${SUITE_SECONDS:-420}" python3 -m pytest tests -n "${SUITE_JOBS:-10}" \
    -p no:cacheprovider -p no:benchmark -q "$@" > "$OUT/pytest.txt" 2>&1
  echo "suite exit $?"; grep -E "passed|failed|^FAILED|^ERROR" "$OUT/pytest.txt" | tail -25
  CUDA_VISIBLE_DEVICES=0 timeout 90 python3 benchmarks/gpu_bandwidth.py --out "$OUT" 2>&1 | grep -E "\||copy" | tail -8
  CUDA_VISIBLE_DEVICES=0 timeout 90 python3 benchmarks/gpu_cudagraphs.py --out "$OUT" 2>&1 | grep -E "\||x " | tail -6
  wait
  grep -h "^| [a-z0-9]* | [a-z]* | [0-9]" "$OUT"/opinfo_cuda_*.md
  grep -h "Stopped at" "$OUT"/opinfo_cuda_*.md
  grep -h "^Unexpected\|^Every failure\|^No CUDA expected" "$OUT"/opinfo_cuda_*.md
  exit 0
fi
if [ "$PART" = opinfo ]; then
  # one process per dtype and direction, side by side: an op whose eager kernel asserts on the
  # device ends only its own process's CUDA context
  for dtype in float32 bfloat16; do
    for kind in forward backward; do
      timeout "${OPINFO_SECONDS:-500}" python3 -m tests.autograd.opinfo_report --device cuda --dtypes $dtype \
        --kinds $kind --backend ember --out "$OUT/opinfo_cuda_${dtype}_${kind}.md" > "$OUT/opinfo_${dtype}_${kind}.log" 2>&1 &
    done
  done
  wait
  grep -h "^| [a-z0-9]* | [a-z]* | [0-9]" "$OUT"/opinfo_cuda_*.md
  grep -h "Stopped at" "$OUT"/opinfo_cuda_*.md
  # against tests/autograd/opinfo_expected_failures_cuda.py (this torch version's list)
  grep -h "^Unexpected\|^Every failure\|^No CUDA expected" "$OUT"/opinfo_cuda_*.md
  exit 0
fi
if [ "$PART" = quick ]; then
  # the GPU-only tests of the code that changed most recently, then reduce-overhead (a short first call)
  timeout 300 python3 -m pytest tests/runtime tests/codegen/test_triton_kernels.py tests/decomp \
    tests/autograd/test_conv_layout.py tests/autograd/test_aot_regressions.py -q -x -p no:cacheprovider 2>&1 | tail -15
  timeout 200 python3 benchmarks/gpu_cudagraphs.py --out "$OUT" 2>&1 | tail -8
  exit 0
fi
if [ "$PART" = autograd ]; then
  # compiled autograd (issue 11): its tests with Triton kernels, then the BERT backward benchmark
  timeout 200 python3 -m pytest tests/compiled_autograd tests/runtime tests/codegen/test_triton_tune.py -q \
    -p no:cacheprovider 2>&1 | tail -5
  timeout "${AUTOGRAD_SECONDS:-380}" python3 benchmarks/compiled_autograd_bert.py --device cuda --out "$OUT" 2>&1 \
    | grep -v "^WARNING" | tail -14
  exit 0
fi
if [ "$PART" = models ]; then
  CUDA_VISIBLE_DEVICES=${MODELS_GPU:-0} timeout "${MODELS_SECONDS:-580}" python3 benchmarks/gpu_models.py --models "${MODELS:-bert,gpt2}" --out "$OUT" 2>&1 \
    | grep -E "^(bert|gpt2|resnet50|vit) |\||Geomean|Error" | cut -c1-400
  exit 0
fi
if [ "$PART" != bench ]; then
  PYTHONUNBUFFERED=1 python3 -m pytest tests -n 8 -p no:cacheprovider -p no:benchmark "$@" 2>&1 | tee "$OUT/pytest.txt" | tail -60
fi
if [ "$PART" != suite ]; then
  timeout "${BENCH_SECONDS:-200}" python3 benchmarks/gpu_bandwidth.py --out "$OUT" 2>&1 | tail -20
  timeout 200 python3 benchmarks/gpu_cudagraphs.py --out "$OUT" 2>&1 | tail -12
fi

