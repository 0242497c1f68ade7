#!/usr/bin/env bash
# Replays fuzz seeds on the GPU (EMBER_FUZZ_DEVICE=cuda) with full traces, and the generated code of
# the first one: for wrong results seen in a GPU fuzz run.  Writes $OUT/replay_<mode>.txt.
#   REPLAY="inplace:700229,701712 lowp:700735" bash scripts/gpu_fuzz_replay.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/ember-gpu-out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}" EMBER_FUZZ_DEVICE=cuda
first=1
for group in ${REPLAY:?REPLAY=\"mode:seed,seed ...\"}; do
  mode=${group%%:*}; seeds=${group#*:}
  for seed in ${seeds//,/ }; do
    if [ $first = 1 ]; then logs=output_code; first=0; else logs=; fi
    EMBER_LOGS=$logs timeout 120 python3 -m tests.fuzz.replay --backend ember --mode "$mode" "$seed" \
      >> "$OUT/replay_$mode.txt" 2>&1
    grep "^== seed $seed" "$OUT/replay_$mode.txt" | tail -1
  done
done
