# Sourced by the bench scripts that run on a lent GPU machine (gpu.sh, atari_rate.sh): the
# machine has no package index, so the packages its image lacks travel as wheels in $WHEELS
# (default .whl; WHEELS= where they are installed already, as on a CPU for a smoke test), with
# .whl-cleanrl where present (bench/envpool_wheels.py), and are installed under /tmp/site.
# Also makes $OUT and prints the GPU and the cores.
OUT=${OUT:-/tmp/out}
WHEELS=${WHEELS-.whl}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
mkdir -p "$OUT"
if [ -n "$WHEELS" ]; then
  extra=()  # CleanRL's EnvPool side (bench/envpool_wheels.py), where it travels
  [ -d .whl-cleanrl ] && extra=(.whl-cleanrl/*.whl)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$WHEELS"/*.whl "${extra[@]}" || exit 1
  export PYTHONPATH=/tmp/site:$PWD
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
echo "cpus: $(nproc)"
