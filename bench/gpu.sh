#!/usr/bin/env bash
# bench/gpu.py's workloads on a lent GPU machine (the `device` tool), in one call of about 9
# minutes: CartPole against PureJaxRL at 4 envs (with a Perfetto trace of each side), then Brax
# `humanoid` and `ant` against Brax's own PPO, each with batchppo's restart modes beside its
# default. The machine has no package index: the packages its image lacks travel as wheels in
# .whl/ (bench/gpu.py's docstring lists them), PureJaxRL's checkout in .purejaxrl/ (both
# ignored; name them in the call's `carry`).
#
# What it measures is what 11e and 11i left open: CartPole at 2048 envs (1.04x in both of 11e's
# calls) is not rerun; 4 envs (1.02x, one round) is; `humanoid` and `ant` with the default restart
# beside `first` (Brax's restart, the like-for-like side: 1.23x and 1.30x), now with one trace of
# the env's reset per run (their set-up and compile times). `optimistic` (1.12x on humanoid, as
# the default) is not rerun unless AUTORESET names it.
#
# Usage, from the repository root:
#   bench/gpu.sh                   # on the GPU machine; results in $OUT
#   SMALL=1 WHEELS= OUT=/tmp/out bench/gpu.sh   # the same steps at tiny sizes, on a CPU
#   ONLY=humanoid AUTORESET=cond,optimistic bench/gpu.sh   # some steps (cartpole, humanoid, ant)
set -u
SMALL=${SMALL:-0}
ONLY=${ONLY:-cartpole,humanoid,ant}
AUTORESET=${AUTORESET:-cond,first}
. bench/gpu_env.sh

if [ "$SMALL" = 1 ]; then
  CARTPOLE="--cartpole-envs 4 --cartpole-steps 8192 --cartpole-lean"
  SIZES="--brax-num-envs 16 --brax-unroll 4 --brax-minibatches 4 --brax-epochs 2
    --brax-policy-layers 32,32 --brax-value-layers 32,32 --brax-steps 256"
else
  CARTPOLE="--cartpole-envs 4 --cartpole-steps 5e5 --cartpole-lean"
  SIZES="--brax-steps 1048576"
fi
PJX=.purejaxrl/purejaxrl
[ -d $PJX ] || { echo "no PureJaxRL checkout at $PJX"; exit 1; }
bench() {  # a step's time limit, its name, then bench/gpu.py's arguments
  local limit=$1 name=$2
  shift 2
  [[ ",$ONLY," == *",$name,"* ]] || return 0
  timeout "$limit" python3 bench/gpu.py "$@" --rounds 1 --repeats 2 --json "$OUT/$name.json" 2>&1 \
    | grep --line-buffered -v warp | tee "$OUT/$name.log"
}
# shellcheck disable=SC2086
bench 110 cartpole --purejaxrl-dir $PJX $CARTPOLE --brax-envs none --timeout 90 \
  --profile /tmp/gpu-profile
[ -d /tmp/gpu-profile ] && (cd /tmp/gpu-profile && find . -name perfetto_trace.json.gz | tar czf "$OUT/profiles.tgz" -T -)
# shellcheck disable=SC2086
bench 270 humanoid --cartpole-envs none --brax-envs humanoid --brax-autoreset "$AUTORESET" \
  $SIZES --timeout 120
# shellcheck disable=SC2086
bench 170 ant --cartpole-envs none --brax-envs ant --brax-autoreset "$AUTORESET" $SIZES --timeout 100
