#!/usr/bin/env bash
# Fresh seeds of the *_fast MuJoCo presets, the presets frozen (issue 56: SEEDS="20 ... 29", the
# default, then "10 ... 19"), or any seeds of a variant of them (a lever tried on the tuning
# seeds: SEEDS, VARIANT, SETS).
#
#   bench/fresh_seeds.sh train [PRESET ...]   # train what is missing into runs_fresh/, one run at
#                                              # a time (a started run resumes; published seeds skip)
#   bench/fresh_seeds.sh stage PRESET         # its finished runs -> docs/runs, compact
#   bench/fresh_seeds.sh score PRESET         # each finished run's final policy, 100 mean-
#                                              # action episodes -> docs/results/PRESET-1M-seedN.json
#   bench/fresh_seeds.sh publish PRESET       # the SEEDS' runs, all staged and scored ->
#                                              # docs/results/PRESET-1M-seedsA-B* (PUBLISH_AS:
#                                              # that name for PRESET), the manifest, results
#                                              # redrawn; a set published already is refused
#   bench/fresh_seeds.sh history PRESET V     # docs/results/PRESET-1M-seedsA-B* (SEEDS) ->
#                                              # PRESET-V-1M-seedsA-B* (git mv), the manifest
#
# docs/runs holds a run in its compact form (bench/rundata.py: config, code, the logs
# xz-compressed, a summary; no checkpoint): a seed counts as published once its summary there
# says it finished, and its checkpoints stay in runs_fresh/, where `score` evaluates them. The
# checkpoints do not outlive the machine and a set's ten runs can outlast a session: `score`
# keeps each seed's evaluation in docs/results until `publish` gathers the set's. The
# presets must not change between the runs of one preset: `train` runs the code of one commit
# (FRESH_COMMIT, default HEAD) from a worktree of its own and records it in runs_fresh/log.txt,
# and `stage` refuses runs whose config differs from the first of SEEDS' but for the seed.
# Run it with the project's virtualenv active (batchppo on PATH).
#
# A variant: SEEDS="0 1 2" VARIANT=ln SETS="mlp=layernorm discount=0.995" bench/fresh_seeds.sh
# train hopper_fast trains runs_fresh/s<seed>-hopper_fast-ln with those fields set (`train` only);
# `stage`, `score` and `publish` then take its runs' name, hopper_fast-ln, for PRESET.
#
# A preset changed and rerun on the seeds of its newest set (its runs a variant's, trained as
# above): the former recipe's set moves to history under a name of its own, then the variant's
# runs are published under the preset's own name (bench/results.py's `Task` says how its line in
# TASKS then reads; its `FreshSet` names each set's runs and results):
#   SEEDS="30 31 32 33 34 35 36 37 38 39" bench/fresh_seeds.sh history humanoid_fast adam99
#   SEEDS="30 31 32 33 34 35 36 37 38 39" PUBLISH_AS=humanoid_fast \
#     bench/fresh_seeds.sh publish humanoid_fast-v256
set -euo pipefail
cd "$(dirname "$0")/.."
export JAX_PLATFORMS=cpu
SEEDS=${SEEDS:-20 21 22 23 24 25 26 27 28 29}
VARIANT=${VARIANT:-}  # a run-name suffix: the runs of SETS
PUBLISH_AS=${PUBLISH_AS:-}  # the results name `publish` writes the runs under (default: theirs)
SETS=${SETS:-}  # FIELD=VALUE ... set on top of the preset
ALL="cheetah_fast hopper_fast walker_fast ant_fast humanoid_fast"

# The runs train with the code of one commit (FRESH_COMMIT, default HEAD), checked out in a
# worktree of its own, so that changes to the checkout while they run do not reach them.
train() {
  mkdir -p runs_fresh
  local commit code
  commit=$(git rev-parse "${FRESH_COMMIT:-HEAD}")
  code=runs_fresh/code-${commit:0:12}
  [ -d $code ] || git worktree add --detach $code $commit > /dev/null
  echo "commit $commit start $(date -Is)" >> runs_fresh/log.txt
  local sets=()
  for kv in $SETS; do sets+=(--set "$kv"); done
  for p in ${@:-$ALL}; do
    local name=$p${VARIANT:+-$VARIANT}
    for seed in $SEEDS; do
      published s$seed-$name && continue
      dir=runs_fresh/s$seed-$name
      [ -d $dir ] && python bench/rundata.py finished $dir && continue
      echo "$(date -Is) start $name seed $seed" >> runs_fresh/log.txt
      if [ -d $dir ]; then
        (cd $code && python -m batchppo.cli train --config $p --logdir ../../runs_fresh \
          --timestamp s$seed --name $name --resume --progress lines) >> $dir.out 2>&1
      else
        (cd $code && python -m batchppo.cli train --config $p --logdir ../../runs_fresh \
          --timestamp s$seed --name $name --set seed=$seed "${sets[@]}" --progress lines) \
          > $dir.out 2>&1
      fi
      echo "$(date -Is) end $name seed $seed rc=$?" >> runs_fresh/log.txt
    done
  done
}

# Whether two runs' configs are one recipe: equal but for the seed, once each is read as the
# code reads it now (a field added since a run was made takes its default, as on resume).
same_recipe() {
  python - "$1" "$2" <<'PY'
import dataclasses, sys
from batchppo.experiment.config.configs import load_config
a, b = (dataclasses.replace(load_config(path), seed=0) for path in sys.argv[1:])
changed = [f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)]
if changed:
    sys.exit(f"{sys.argv[1]}: {', '.join(changed)} differ from {sys.argv[2]}: the preset changed")
PY
}

# Whether docs/runs holds the run (its summary says it finished).
published() {
  python bench/rundata.py finished docs/runs/$1
}

# Writes the compact form of the preset's finished runs to docs/runs (config, code, the logs
# xz-compressed, the summary; the checkpoints stay in runs_fresh/); with "all", every seed must
# be finished.
stage() {
  local p=$1 need=${2:-}
  for seed in $SEEDS; do
    local src=runs_fresh/s$seed-$p dst=docs/runs/s$seed-$p
    published s$seed-$p && continue
    if ! python bench/rundata.py finished $src 2> /dev/null; then
      [ "$need" = all ] && { echo "$src: not finished" >&2; exit 1; }
      continue
    fi
    local seed0=${SEEDS%% *}
    local first=docs/runs/s$seed0-$p/config.yaml
    [ -f $first ] || first=runs_fresh/s$seed0-$p/config.yaml
    same_recipe $src/config.yaml $first || exit 1
    python bench/rundata.py compact $src $dst
  done
}

# The final policy of each finished seed, by the published protocol (100 mean-action episodes,
# whatever the runs' eval_actions), into docs/results/PRESET-1M-seed<N>.json, its run named
# where it is kept (docs/runs); a seed already scored is skipped.
score() {
  local p=$1
  for seed in $SEEDS; do
    local src=runs_fresh/s$seed-$p out=docs/results/$p-1M-seed$seed.json
    [ -f $out ] || ! python bench/rundata.py finished $src 2> /dev/null && continue
    batchppo evaluate $src --episodes 100 --mean-action --reference targets-1m --json $out
    python - "$out" <<'PY'
import json, pathlib, sys
path = pathlib.Path(sys.argv[1])
data = json.loads(path.read_text())
for run in data["runs"]:
    run["run_dir"] = f"docs/runs/{pathlib.Path(run['run_dir']).name}"
path.write_text(json.dumps(data, indent=2) + "\n")
PY
  done
}

# The stem of the SEEDS' set of results named $1 in docs/results.
set_stem() {
  local seeds=($SEEDS)
  echo docs/results/$1-1M-seeds${seeds[0]}-${seeds[-1]}
}

# The SEEDS' runs of $1 gathered into one set of results, named PUBLISH_AS (default $1); a set
# of that name is never overwritten: the set it holds moves to history first (`history`).
publish() {
  local p=$1 name=${PUBLISH_AS:-$1}
  local out scored=() dirs=()
  out=$(set_stem $name)
  [ -f $out.json ] && { echo "$out.json: published already; move that set to history first:" \
    "SEEDS=\"$SEEDS\" bench/fresh_seeds.sh history $name VARIANT" >&2; exit 1; }
  stage $p all
  score $p
  for seed in $SEEDS; do
    local one=docs/results/$p-1M-seed$seed.json
    [ -f $one ] || { echo "$one: seed $seed is not scored and its checkpoint is gone:" \
      "train it again (rm -r docs/runs/s$seed-$p)" >&2; exit 1; }
    scored+=($one)
    dirs+=(docs/runs/s$seed-$p)
  done
  batchppo evaluate "${scored[@]}" --reference targets-1m \
    --json $out.json --csv $out-runs.csv --stats-json $out-stats.json
  rm "${scored[@]}"  # each seed's entry is in $out.json now
  python bench/results.py --seeds-csv $out.json $out.csv
  batchppo evaluate "${dirs[@]}" --training-window 100 --max-eval-mean 1001472 \
    --json $out-training-window.json --stats-json $out-training-window-stats.json
  python bench/rundata.py manifest --write
  python bench/results.py --write README.md docs/benchmarks.md --figure
}

# The SEEDS' set of results of preset $1 moved to history: each file of
# docs/results/$1-1M-seedsA-B* renamed $1-$2-1M-seedsA-B* (git mv; their runs keep their names),
# so that the preset's own name is free for the set of its recipe as changed.
history() {
  local p=$1 variant=$2 old new
  [ -n "$variant" ] || { echo "history $p: name the variant the set moves to:" \
    "bench/fresh_seeds.sh history $p VARIANT" >&2; exit 1; }
  old=$(set_stem $p)
  new=$(set_stem $p-$variant)
  [ -f $old.json ] || { echo "$old.json: no such set to move (SEEDS=\"$SEEDS\")" >&2; exit 1; }
  [ -e $new.json ] && { echo "$new.json: history of that name exists; name another variant" >&2
    exit 1; }
  for f in $old.* $old-*; do  # its .json, .csv, -runs.csv, -stats.json, -training-window*
    if [ -e "$f" ]; then git mv "$f" "$new${f#"$old"}"; fi
  done
  python bench/rundata.py manifest --write
}

# Every command runs the project's `python` and `batchppo`: refuse to start without them.
if ! command -v batchppo > /dev/null || ! python -c "import batchppo" 2> /dev/null; then
  echo "fresh_seeds.sh: no batchppo on PATH: activate the project's virtualenv" \
    "(. .venv/bin/activate) and run it again" >&2
  exit 1
fi

case "${1:-}" in
  train) shift; train "$@" ;;
  stage) stage "$2" ;;
  score) score "$2" ;;
  publish) publish "$2" ;;
  history) history "$2" "${3:-}" ;;
  *) sed -n '2,/^[^#]/{/^#/p;}' "$0"; exit 2 ;;  # the header comment
esac
