#!/usr/bin/env bash
# One Atari preset for a long budget on a lent GPU machine (the `device` tool): the machine has
# no package index, so the packages its image lacks travel as wheels in .whl/ (see
# docs/benchmarks-journal.md, section 8c, for the list and the command that fetched them).
#
# Usage (from the repository root, on the GPU machine):
#   PRESET=breakout_atari STEPS=1250000 LIMIT=540 bench/atari_gpu.sh          # a new run
#   PRESET=breakout_atari STEPS=1250000 LIMIT=150 RESUME=1 bench/atari_gpu.sh # resume it
# LIMIT is the training's wall-clock limit in seconds: at the limit the run gets SIGTERM,
# writes its checkpoint and stops; a later call on the same machine resumes it. What comes
# back in $OUT: the log, config.yaml, metrics.jsonl and the last checkpoint (split in parts
# of at most 15 MB, the tool's limit per file; `cat ckpt.part-* > ckpt.msgpack` joins them).
set -u
PRESET=${PRESET:-breakout_atari}
STEPS=${STEPS:-1250000}
LIMIT=${LIMIT:-540}
RESUME=${RESUME:-0}
OUT=${OUT:-/tmp/out}
LOGDIR=/tmp/runs
RUN=$LOGDIR/gpu-$PRESET
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p "$OUT"

if [ "$RESUME" = 0 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "cpus: $(nproc)"
python3 -c "import jax, flax, ale_py, batchppo; print('jax', jax.__version__, jax.devices())" || exit 1

if [ "$RESUME" = 0 ]; then
  # A short run first: a failure of the GPU path shows in seconds, not after the budget.
  python3 -m batchppo train --config "$PRESET" --set steps=2048 --set eval_every=1024 \
    --set eval_episodes=2 --set eval_max_steps=300 --logdir /tmp/smoke --timestamp s \
    --progress lines 2>&1 | tail -5
  [ "${PIPESTATUS[0]}" = 0 ] || exit 1
fi

# The standard 108,000-frame cap on an evaluation game (27,000 agent steps).
timeout -s TERM -k 60 "$LIMIT" python3 -m batchppo train --config "$PRESET" \
  --set steps="$STEPS" --set eval_every=500000 --set eval_max_steps=27000 \
  --set checkpoint_every=250000 --set keep_checkpoints=1 \
  --logdir "$LOGDIR" --timestamp gpu --progress lines >>"$OUT/train.log" 2>&1
echo "train exit: $?"
tail -4 "$OUT/train.log"
cp "$RUN/config.yaml" "$RUN/metrics.jsonl" "$OUT/"
ckpt=$(ls "$RUN"/checkpoints/ckpt-*.msgpack | tail -1)
echo "checkpoint: $ckpt"
split -b 15M -d "$ckpt" "$OUT/$(basename "$ckpt").part-"
