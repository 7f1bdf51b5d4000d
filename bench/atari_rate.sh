#!/usr/bin/env bash
# Atari agent steps/s at CleanRL's settings (issue 41, item 4) on this machine, in one call:
# first bench/investigations/callback_repro.py (which forms of a host step inside a compiled loop compile
# here), then bench/investigations/host_phases.py (where a host-loop iteration's time goes: env, policy,
# update; with `profile` a Perfetto trace of one rollout, with `spin` the learner and the
# workers spinning before they block, with `half` 4 envs, with `graphs` XLA's command buffers
# over the cuDNN calls too), then `breakout_atari` (8 envs) trained for $STEPS agent steps with
# no evaluation, once with the Python rollout loop (`host_loop=true`) and once with the
# rollout's io_callback inside the compiled iteration (`host_loop=false`: unordered on an
# accelerator, chained by the env state, since the ordered form's token aborted XLA's GPU
# compiler beside the stacked frames, benchmarks 11e and 11i); then bench/envs.py, the env's
# step alone (BatchEnv against ALE's C++ vector env on this machine's cores); with `ale`,
# breakout_atari on the process backend beside the ale backend (ALE's AtariVectorEnv) in its
# host mode (send/recv from the host loop) and its fused mode (xla(): the envs stepped inside
# the compiled rollout), $STEPS agent steps each, with their ratios; with `cleanrl`, CleanRL's own
# EnvPool script beside breakout_atari as it ships and on the ale backend in each mode
# (bench/cleanrl_envpool.py: carry .cleanrl and .whl-cleanrl); with `fused`, where the ale
# backend's fused mode spends its time (bench/ale_fused.py: ALE's raw xla() step, the env's
# step, the trainer's rollout, update and iteration, for each variant of the step; $FUSED adds
# its arguments), with a trace of one iteration; last bench/lockstep.py, what waiting for the slowest of 4, 8 or 16 envs
# leaves of one env's rate. Each run's steps/s: the median of its iterations' `sps` after the
# first (which compiles). Results and logs in $OUT; the wheels as bench/gpu_env.sh says.
#
# Usage, from the repository root:
#   bench/atari_rate.sh                          # on the GPU machine (about 3 minutes)
#   STEPS=2048 PHASES=1 OUT=/tmp/out WHEELS= bench/atari_rate.sh   # a smoke test on a CPU
#   PARTS=train,envs bench/atari_rate.sh   # some parts (callback, repro: its XLA report's alone,
#                                          # phases, profile, spin, half, graphs, graphopt,
#                                          # train, ale, fused, envs, cleanrl, lockstep)
#   PARTS=ale,cleanrl bench/atari_rate.sh  # the ale backend beside process and CleanRL
#   STEPS=3072 PARTS=ale OUT=/tmp/out WHEELS= bench/atari_rate.sh  # the ale part's smoke test
#   PARTS=fused,cleanrl bench/atari_rate.sh  # the fused mode part by part, then beside CleanRL
#   FUSED="--envs 2 --steps 8 --repeats 1 --set cnn=minatar" PARTS=fused OUT=/tmp/out WHEELS= \
#     bench/atari_rate.sh                    # the fused part's smoke test
set -u
STEPS=${STEPS:-30720}
PHASES=${PHASES:-4}
PARTS=${PARTS:-callback,phases,train,envs,lockstep}
LOOPS=${LOOPS:-true false}  # the train part's host_loop settings
FUSED=${FUSED:-}  # bench/ale_fused.py's arguments besides its JSON and trace (the fused part)
CLEANRL_STEPS=${CLEANRL_STEPS:-40960}  # agent steps of each run of the cleanrl part
CLEANRL_ROUNDS=${CLEANRL_ROUNDS:-2}  # rounds of the cleanrl part (its sides alternate)
# The cleanrl part's batchppo sides (bench/cleanrl_envpool.py --variant NAME:KEY=VALUE;...).
CLEANRL_VARIANTS=("batchppo" "ale-host:backend=ale;backend_options={mode: host}"
  "ale-fused:backend=ale;backend_options={mode: fused}")
GRAPHS=${GRAPHS:-FUSION,CUBLAS,CUBLASLT,CUDNN,CUSTOM_CALL}  # the graphs part's command buffers
part() { [[ ",$PARTS," == *",$1,"* ]]; }
. bench/gpu_env.sh
# One compilation of each program for all the processes of the call (set-up is not measured).
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/jax-cache}
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
rm -rf /tmp/atari-rate  # a run dir left by an earlier call would be resumed
part callback && timeout 120 python3 bench/investigations/callback_repro.py --json "$OUT/callback.json" 2>&1
{ part callback || part repro; } && for form in --ordered --unordered; do  # the report's program
  timeout 60 python3 bench/investigations/xla_token_repro.py $form 2>&1 | grep -e "^compiled" -e "Check failed"
done
phases() {  # bench/investigations/host_phases.py on breakout_atari: the result's name, then its arguments
  local name=$1
  shift
  timeout 150 python3 bench/investigations/host_phases.py --preset breakout_atari --iterations "$PHASES" \
    --json "$OUT/$name.json" "$@" 2>&1 | grep -v -e "^A.L.E" -e Stella
}
part phases && phases phases
# One more rollout under JAX's profiler: the compiled calls on the device against the host's gaps.
part profile && phases phases-profile --profile /tmp/atari-profile && (cd /tmp/atari-profile \
  && find . -name perfetto_trace.json.gz | tar czf "$OUT/atari-profile.tgz" -T -)
# The learner and the workers spinning 20 ms before they block: what wake-ups cost a step.
part spin && phases phases-spin --spin-us 20000 --worker-spin-us 20000
# Half the envs: what a group of 4 costs a step (envs stepped in two groups that overlap).
part half && phases phases-4envs --num-agents 4
# XLA's CUDA graphs over the convolutions too (by default each cuDNN call is launched apart).
part graphs && XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=$GRAPHS" \
  phases phases-graphs
# The same as a compiler option of the trainer's hot programs only (how batchppo would set it).
part graphopt && phases phases-graphopt --compiler-option "xla_gpu_enable_command_buffer=$GRAPHS"
# One breakout_atari run of $STEPS agent steps (no evaluation) with `--set` values: its name,
# then the values. Its rate (the median of its iterations' sps after the first) goes to
# $OUT/rates.txt, and to $OUT/rate-NAME.txt for the ratios.
train_rate() {
  local name=$1 sets=()
  shift
  for kv in "$@"; do sets+=(--set "$kv"); done
  local log="$OUT/atari-$name.log"
  timeout 200 python3 -m batchppo train --config breakout_atari --set steps="$STEPS" \
    --set eval_every=0 "${sets[@]}" --logdir /tmp/atari-rate --timestamp r --name "$name" \
    --progress lines >"$log" 2>&1
  echo "$name: exit $?; $(grep -m1 'start-up' "$log")"
  python3 - "/tmp/atari-rate/r-$name/metrics.jsonl" "$OUT/rate-$name.txt" <<'EOF' \
    | tee -a "$OUT/rates.txt"
import json, statistics, sys
try:
    rows = [json.loads(line) for line in open(sys.argv[1])]
except OSError:  # the run failed: its log says why
    rows = []
sps = [r["sps"] for r in rows if r.get("phase") == "train"][1:] or [float("nan")]
open(sys.argv[2], "w").write(f"{statistics.median(sps)}\n")
print(f"{sys.argv[1]}: {statistics.median(sps):,.0f} agent steps/s (median of {len(sps)} iterations)")
EOF
}
part train && for loop in $LOOPS; do train_rate host_loop-$loop host_loop=$loop; done
# The ale backend (ALE's C++ vector env) in each mode beside the process backend, the host loop
# as each resolves it (on an accelerator: a Python loop for process and ale host; none for ale
# fused, whose envs step inside the compiled rollout).
if part ale; then
  train_rate process
  train_rate ale-host backend=ale "backend_options={mode: host}"
  train_rate ale-fused backend=ale "backend_options={mode: fused}"
  python3 - "$OUT" <<'EOF' | tee -a "$OUT/rates.txt"
import math, sys
rate = {}
for name in ("process", "ale-host", "ale-fused"):
    try:
        rate[name] = float(open(f"{sys.argv[1]}/rate-{name}.txt").read())
    except (OSError, ValueError):
        rate[name] = math.nan
print("; ".join(f"{n} / process = {rate[n] / rate['process']:.2f}" for n in ("ale-host", "ale-fused")))
EOF
fi
# The fused mode part by part in one process; the trace of one iteration, as a Perfetto file.
if part fused; then
  rm -rf /tmp/ale-fused-profile
  timeout 300 python3 bench/ale_fused.py $FUSED --json "$OUT/ale_fused.json" \
    --profile /tmp/ale-fused-profile 2>&1 | grep -v -e "^A.L.E" -e Stella | tee "$OUT/ale_fused.log"
  (cd /tmp/ale-fused-profile && find . -name perfetto_trace.json.gz \
    | tar czf "$OUT/ale-fused-profile.tgz" -T -)
fi
# The env's step alone on this machine's cores: BatchEnv (a worker process per env) against
# ALE's C++ vector env (threads), 8 and 16 envs, the step waited for each time as the loop does.
part envs && timeout 75 python3 bench/envs.py --envs ALE/Breakout-v5 --sizes 8,16 --seconds 2 --rounds 2 \
  --peers single,parallel,batch_arr,ale_vector,make_arr --json "$OUT/envs.json" 2>&1 \
  | grep -v -e "^A.L.E" -e Stella
# CleanRL's own EnvPool script (a checkout in .cleanrl, its wheels in .whl-cleanrl, both carried)
# beside breakout_atari, each side its own process, two rounds.
part cleanrl && timeout 560 python3 bench/cleanrl_envpool.py --cleanrl-dir .cleanrl/cleanrl \
  --steps "$CLEANRL_STEPS" --rounds "$CLEANRL_ROUNDS" "${CLEANRL_VARIANTS[@]/#/--variant=}" \
  --json "$OUT/cleanrl.json" 2>&1 \
  | grep -v -e "^A.L.E" -e Stella -e "^global_step" -e "^SPS" -e "[Gg]ym" | tee "$OUT/cleanrl.log"
part lockstep && timeout 60 python3 bench/lockstep.py --sizes 4,8,16 --steps 4000 \
  --json "$OUT/lockstep.json" 2>&1 | grep -v -e "^A.L.E" -e Stella
