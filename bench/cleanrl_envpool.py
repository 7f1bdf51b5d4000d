r"""CleanRL's fastest Atari PPO against ``breakout_atari``, side by side on one machine.

CleanRL's ``cleanrl/ppo_atari_envpool_xla_jax_scan.py`` (the script behind the rate that issue 41
measures batchppo's Atari speed against: 10M agent steps in 35-40 minutes on CleanRL's GPU)
steps EnvPool's C++ Atari envs from inside its compiled rollout. This script runs it as
published, in its own process and interpreter (``--cleanrl-python``: EnvPool 1.2.7 needs
Python >= 3.12 and, for its XLA handlers, jaxlib >= 0.11), and ``batchppo train --config
breakout_atari`` (CleanRL's settings: 8 envs x 128 steps, 4 epochs of 4 minibatches, the Nature
CNN) in another, alternating over ``--rounds``, and prints each side's agent steps/s: the median
over the iterations after the first (which compiles) of each side's own per-iteration rate
(CleanRL's ``charts/SPS_update``; batchppo's ``sps`` in ``metrics.jsonl``), and their ratio.

The script is not ours and is not in this repository: ``--cleanrl-dir`` names a checkout's
``cleanrl/`` folder (commit fe8d8a0 of github.com/vwxyzjn/cleanrl was read for this). It runs
unchanged but for what this script does at import time, because EnvPool 1.2.7 has left the
Gym API the script was written for:

* ``envpool.make`` returns the env behind the old API: ``reset()`` gives the observations
  alone, the spaces are ``gym`` spaces, and the step of ``xla()`` gives four values, ``done =
  terminated | truncated``, with ``info["TimeLimit.truncated"]`` the truncation;
* ``torch.utils.tensorboard.SummaryWriter`` (the script's only use of torch) is a writer that
  keeps the scalars in a JSON-lines file, which this script reads;
* the script's ``flax.struct`` dataclasses answer ``key in params`` with False: Flax 0.12's
  ``TrainState`` asks whether its parameters hold fp8 ``OVERWRITE_WITH_GRADIENT`` entries,
  which the Flax the script was written for did not;
* ``jax.tree_map``, which JAX 0.11 no longer has, is ``jax.tree.map``.

Each side's settings and protocol go to the JSON (``--json``). On a GPU machine without a
package index, the CleanRL side's packages travel as wheels (``bench/gpu.py``'s docstring):
EnvPool 1.2.7 (63.9 MB) and ``envpool-assets`` (91.6 MB) exceed the device tool's transfer
limit together; only their Atari parts are needed.

    python bench/cleanrl_envpool.py --cleanrl-dir .cleanrl/cleanrl \
        --cleanrl-python /path/to/py312-venv/bin/python --steps 40960 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCRIPT = "ppo_atari_envpool_xla_jax_scan.py"
SETTINGS = {
    "envs": 8,
    "steps_per_env": 128,
    "epochs": 4,
    "minibatches": 4,
    "network": "Nature CNN, shared torso",
    "learning_rate": "2.5e-4 annealed",
}
PROTOCOL = (
    "agent steps/s: the median over the iterations after the first (compiling) of each side's "
    "own per-iteration rate (rollout, update and logging of one iteration); each side in its "
    "own process; rounds alternate which side goes first"
)
DIFFERENCES = {
    "cleanrl": "EnvPool's C++ Atari envs (Breakout-v5: frame skip 4, 30 no-ops, episodic life, "
    "reward clipping, 84x84 grey stack of 4) stepped from inside the compiled rollout",
    "batchppo": "Gymnasium's ALE/Breakout-v5 with the same preprocessing in 8 worker processes "
    "(BatchEnv), stepped from a Python loop around the compiled policy on an accelerator, "
    "from inside the compiled rollout on the CPU",
}


# ---------------------------------------------------------------------------------------------
# CleanRL's side (runs under --cleanrl-python: standard library at module level)
# ---------------------------------------------------------------------------------------------


class _ScalarWriter:
    """``SummaryWriter`` as the script uses it: each scalar a JSON line in the file that
    ``run_cleanrl`` names in ``CLEANRL_SCALARS`` (``log_dir`` is not used)."""

    def __init__(self, log_dir: str) -> None:
        self._file = open(os.environ["CLEANRL_SCALARS"], "a")  # noqa: SIM115

    def add_scalar(self, tag: str, value: Any, step: int) -> None:
        self._file.write(json.dumps({"tag": tag, "value": float(value), "step": int(step)}) + "\n")
        self._file.flush()

    def add_text(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        self._file.close()


class _OldGymEnvPool:
    """An EnvPool 1.2.7 env behind the Gym API of EnvPool 0.8, as the script calls it."""

    def __init__(self, env: Any) -> None:
        import gym

        self._env = env
        space = env.observation_space
        self.observation_space = gym.spaces.Box(space.low, space.high, space.shape, space.dtype)
        self.action_space = gym.spaces.Discrete(int(env.action_space.n))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def reset(self) -> Any:
        return self._env.reset()[0]

    def xla(self) -> tuple[Any, Any, Any, Any]:
        handle, recv, send, step = self._env.xla()

        def old_step(handle: Any, action: Any) -> tuple[Any, tuple[Any, Any, Any, Any]]:
            handle, (obs, reward, terminated, truncated, info) = step(handle, action)
            info = {**info, "TimeLimit.truncated": truncated}
            return handle, (obs, reward, terminated | truncated, info)

        return handle, recv, send, old_step


def adapt_imports() -> None:
    """What the script imports, adapted as the module docstring lists: ``envpool.make``,
    ``jax.tree_map``, ``flax.struct.dataclass`` and ``torch.utils.tensorboard``'s
    ``SummaryWriter`` (scalars in JSON lines)."""
    import envpool

    make = envpool.make
    if not getattr(make, "_old_gym_api", False):

        def old_make(*args: Any, **kwargs: Any) -> _OldGymEnvPool:
            return _OldGymEnvPool(make(*args, **kwargs))

        old_make._old_gym_api = True  # type: ignore[attr-defined]
        envpool.make = old_make
    import flax.struct
    import jax

    try:
        jax.tree_map  # noqa: B018
    except AttributeError:
        jax.tree_map = jax.tree.map

    dataclass = flax.struct.dataclass
    if not getattr(dataclass, "_answers_in", False):

        def answering(clz: Any = None, **kwargs: Any) -> Any:
            def wrap(cls: Any) -> Any:
                cls = dataclass(cls, **kwargs)
                if "__contains__" not in vars(cls):
                    cls.__contains__ = lambda self, key: False
                return cls

            return wrap if clz is None else wrap(clz)

        answering._answers_in = True  # type: ignore[attr-defined]
        flax.struct.dataclass = answering
    try:
        import torch.utils.tensorboard as board
    except ImportError:  # no torch here: a stand-in package with what tyro checks for
        for name in ("torch", "torch.utils", "torch.utils.tensorboard"):
            sys.modules[name] = types.ModuleType(name)
        torch = sys.modules["torch"]
        torch.device = torch.Tensor = type("Stand-in", (), {})  # type: ignore[attr-defined]
        board = sys.modules["torch.utils.tensorboard"]
    board.SummaryWriter = _ScalarWriter  # type: ignore[attr-defined]


def run_cleanrl(script: str, argv: list[str], scalars: str, workdir: str) -> None:
    """Runs CleanRL's ``script`` as ``__main__`` with ``argv``, its scalars to ``scalars``."""
    import runpy

    adapt_imports()
    os.environ["CLEANRL_SCALARS"] = scalars
    os.chdir(workdir)  # the script writes runs/<name> under the working directory
    sys.argv = [script, *argv]
    runpy.run_path(script, run_name="__main__")


# ---------------------------------------------------------------------------------------------
# The driver (runs under the project's interpreter)
# ---------------------------------------------------------------------------------------------


def iteration_rate(rates: list[float]) -> dict[str, Any]:
    """The median of per-iteration rates after the first (which compiles)."""
    later = rates[1:]
    if not later:
        raise ValueError(f"need at least two iterations for a rate, got {len(rates)}")
    return {"agent_steps_per_s": statistics.median(later), "iterations": len(later)}


def cleanrl_side(args: argparse.Namespace, seed: int, work: Path) -> dict[str, Any]:
    """One run of CleanRL's script in its own process, in the fresh folder ``work``; its rate
    from ``charts/SPS_update``."""
    script = str(Path(args.cleanrl_dir).resolve() / SCRIPT)
    work.mkdir(parents=True)
    scalars = work / "scalars.jsonl"
    argv = ["--env-id", "Breakout-v5", "--total-timesteps", str(args.steps), "--seed", str(seed)]
    call = f"run_cleanrl({script!r}, {argv!r}, {str(scalars)!r}, {str(work)!r})"
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
    code += f"from cleanrl_envpool import run_cleanrl; {call}"
    subprocess.run([args.cleanrl_python, "-c", code], check=True, timeout=args.timeout)
    rows = [json.loads(line) for line in scalars.read_text().splitlines()]
    rates = [row["value"] for row in rows if row["tag"] == "charts/SPS_update"]
    return {"side": "cleanrl", "seed": seed, **iteration_rate(rates)}


def parse_variant(spec: str) -> tuple[str, list[str]]:
    """``NAME`` or ``NAME:KEY=VALUE;KEY=VALUE``: a batchppo side's name and its ``--set`` values."""
    name, _, sets = spec.partition(":")
    fields = [kv for kv in sets.split(";") if kv]
    if not name or name == "cleanrl" or any("=" not in kv for kv in fields):
        raise argparse.ArgumentTypeError(
            f"--variant {spec!r}: write NAME or NAME:KEY=VALUE;KEY=VALUE (NAME not 'cleanrl')"
        )
    return name, fields


def batchppo_side(
    args: argparse.Namespace, seed: int, work: Path, sets: list[str] | tuple[str, ...] = ()
) -> dict[str, Any]:
    """One ``batchppo train --config breakout_atari`` run (with ``sets`` as ``--set`` values) in
    the fresh folder ``work`` (a run dir already there would be resumed); its rate from
    ``metrics.jsonl``."""
    work.mkdir(parents=True)
    command = [sys.executable, "-m", "batchppo", "train", "--config", "breakout_atari"]
    command += ["--set", f"steps={args.steps}", "--set", "eval_every=0", "--set", f"seed={seed}"]
    for kv in sets:
        command += ["--set", kv]
    command += ["--logdir", str(work), "--timestamp", "r", "--name", "run", "--progress", "lines"]
    subprocess.run(command, check=True, timeout=args.timeout)
    metrics = work / "r-run" / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    rates = [row["sps"] for row in rows if row.get("phase") == "train"]
    return {"side": "batchppo", "seed": seed, **iteration_rate(rates)}


PACKAGES = ("jax", "jaxlib", "flax", "optax", "envpool", "gym", "gymnasium", "ale-py", "batchppo")


def versions(python: str) -> dict[str, str]:
    """The versions of ``PACKAGES`` that ``python`` imports (absent ones left out)."""
    code = (
        "import importlib.metadata as m, json\n"
        "def v(p):\n"
        "    try:\n"
        "        return m.version(p)\n"
        "    except m.PackageNotFoundError:\n"
        "        return None\n"
        f"print(json.dumps({{p: v(p) for p in {PACKAGES!r}}}))"
    )
    out = subprocess.run(  # away from a checkout whose metadata sys.path's '' would find
        [python, "-c", code], check=True, capture_output=True, text=True, cwd=tempfile.gettempdir()
    )
    return {k: v for k, v in json.loads(out.stdout).items() if v is not None}


def _print_row(row: dict[str, Any], _: Any) -> None:
    print(json.dumps(row), flush=True)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cleanrl-dir", required=True, help=f"a checkout's folder of {SCRIPT}")
    parser.add_argument("--cleanrl-python", default=sys.executable, help="its interpreter")
    parser.add_argument("--steps", type=int, default=40960, help="agent steps a run")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0, help="per run, seconds")
    parser.add_argument(
        "--variant",
        action="append",
        type=parse_variant,
        help="a batchppo side NAME[:KEY=VALUE;...] (repeatable; default one side, 'batchppo', "
        "the preset as it ships), e.g. ale-fused:backend=ale",
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    # Here, not at the top: CleanRL's interpreter imports this module, with no psutil.
    from harness import Side, compare, write_json

    variants = dict(args.variant or [("batchppo", [])])
    if not (Path(args.cleanrl_dir) / SCRIPT).is_file():
        parser.error(f"no {SCRIPT} in --cleanrl-dir {args.cleanrl_dir}: name a checkout's cleanrl/")

    def side_of(name: str, sets: list[str]) -> Callable[..., dict[str, Any]]:
        def run(args: argparse.Namespace, seed: int, work: Path) -> dict[str, Any]:
            return {**batchppo_side(args, seed, work, sets), "side": name, "sets": sets}

        return run

    runs = {"cleanrl": cleanrl_side, **{n: side_of(n, s) for n, s in variants.items()}}
    failures = (subprocess.CalledProcessError, subprocess.TimeoutExpired)
    with tempfile.TemporaryDirectory() as tmp:
        # One side failing (say a mode a platform lacks) leaves the others measured: the
        # failure is a row of its own, and the side gets no rate from it.
        sides = [
            Side(
                name, lambda r, name=name, run=run: run(args, args.seed, Path(tmp) / f"{name}-{r}")
            )
            for name, run in runs.items()
        ]
        measured = compare(sides, args.rounds, catch=failures, on_row=_print_row)
    rate = {name: measured.median(name, "agent_steps_per_s") or math.nan for name in runs}
    ratios = {name: rate[name] / rate["cleanrl"] for name in variants}
    record = {
        "steps": args.steps,
        "settings": SETTINGS,
        "protocol": PROTOCOL,
        "differences": DIFFERENCES,
        "versions": {
            "cleanrl": versions(args.cleanrl_python),
            "batchppo": versions(sys.executable),
        },
        "rows": measured.rows,
        "variants": variants,
        "agent_steps_per_s": rate,
        "ratios_over_cleanrl": ratios,
    }
    if "batchppo" in ratios:
        record["ratio_batchppo_over_cleanrl"] = ratios["batchppo"]
    sides_text = ", ".join(f"{name} {rate[name]:,.0f} ({ratios[name]:.2f}x)" for name in variants)
    print(f"agent steps/s: CleanRL {rate['cleanrl']:,.0f}; {sides_text} (x: over CleanRL)")
    if args.json:
        return write_json(args.json, record)
    return record


if __name__ == "__main__":
    main()
