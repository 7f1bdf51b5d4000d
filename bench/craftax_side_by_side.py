r"""Craftax-Classic-Symbolic: batchppo's ``craftax_symbolic`` preset beside the Craftax
baselines' own PPO (``ppo.py`` of github.com/MichaelTMatthews/Craftax_Baselines), at equal
steps, for return and speed.

Each side runs in a process of its own, one after the other (``--rounds`` alternates them),
as one compiled program of the whole run: the baseline's ``make_train(config)`` at its
``__main__`` defaults (``--num_envs`` and ``--total_timesteps`` set from ``--envs`` and
``--steps``, Craftax-Classic-Symbolic-v1), and batchppo's ``make_train`` at the preset's
settings (the same numbers). Compilation is timed apart from the run.

The baselines' code is not part of this repository: ``--baselines-dir`` names a checkout (the
folder holding ``ppo.py``). It is imported unchanged; its Weights & Biases logging is the only
way it reports returns, so its ``wandb`` module is replaced by a recorder of the logged dicts
(``batch_log`` calls ``wandb.log`` once per update with the mean return of the episodes that
ended in that update).

The protocol both sides are scored by is the baseline's: the mean over the last ``--window``
updates of each update's mean return of the training episodes (sampled actions) that ended in
it. batchppo's own (its final policy's mean action over 16 episodes) is printed beside it.

    pip install craftax==1.6.1 --no-deps   # its pygame pin clashes with pygame-ce
    git clone https://github.com/MichaelTMatthews/Craftax_Baselines .craftax_baselines
    JAX_PLATFORMS=cpu python bench/craftax_side_by_side.py --baselines-dir .craftax_baselines \
        --steps 1048576 --envs 1024 --json docs/results/craftax-cpu-<date>.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

from harness import Result, Side, compare, spawn, time_program, write_json

ROOT = Path(__file__).resolve().parents[1]
ENV_NAME = "Craftax-Classic-Symbolic-v1"


def baseline_config(envs: int, steps: int) -> dict[str, Any]:
    """The baselines' ``ppo.py`` argparse defaults, upper-cased as ``run_ppo`` does, at
    ``envs`` and ``steps``; exploration bonuses off (their defaults), logging to the recorder."""
    return {
        "ENV_NAME": ENV_NAME,
        "NUM_ENVS": envs,
        "TOTAL_TIMESTEPS": steps,
        "LR": 2e-4,
        "NUM_STEPS": 64,
        "UPDATE_EPOCHS": 4,
        "NUM_MINIBATCHES": 8,
        "GAMMA": 0.99,
        "GAE_LAMBDA": 0.8,
        "CLIP_EPS": 0.2,
        "ENT_COEF": 0.01,
        "VF_COEF": 0.5,
        "MAX_GRAD_NORM": 1.0,
        "ACTIVATION": "tanh",
        "ANNEAL_LR": True,
        "DEBUG": True,
        "JIT": True,
        "USE_WANDB": True,
        "NUM_REPEATS": 1,
        "LAYER_SIZE": 512,
        "USE_OPTIMISTIC_RESETS": True,
        "OPTIMISTIC_RESET_RATIO": 16,
        "EXPLORATION_UPDATE_EPOCHS": 4,
        "TRAIN_ICM": False,
        "USE_E3B": False,
        "ICM_REWARD_COEFF": 1.0,
        "E3B_REWARD_COEFF": 1.0,
        "E3B_LAMBDA": 0.1,
        "ICM_LR": 3e-4,
        "ICM_FORWARD_LOSS_COEF": 1.0,
        "ICM_INVERSE_LOSS_COEF": 1.0,
        "ICM_LAYER_SIZE": 256,
        "ICM_LATENT_SIZE": 32,
    }


DIFFERENCES = [
    "The baseline normalises advantages per minibatch; batchppo per minibatch too "
    "(normalize_advantages).",
    "Both clip the value loss at clip_eps (0.2) and treat Craftax's own 10,000-step end as a "
    "termination (Craftax reports it as done).",
    "The baseline hands each step's fresh worlds to finished envs drawn at random; batchppo in "
    "env order (autoreset='optimistic', reset_ratio 16 for both).",
]


def _recorder() -> tuple[types.ModuleType, list[dict[str, Any]]]:
    """A stand-in ``wandb`` module whose ``log`` keeps the dicts it is given."""
    logged: list[dict[str, Any]] = []
    stub = types.ModuleType("wandb")
    stub.log = lambda data, *a, **k: logged.append({k: _plain(v) for k, v in data.items()})
    return stub, logged


def _plain(value: Any) -> Any:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _baseline(spec: dict[str, Any]) -> dict[str, Any]:
    import jax

    folder = str(Path(spec["baselines_dir"]).resolve())
    stub, logged = _recorder()
    sys.modules["wandb"] = stub
    sys.path.insert(0, folder)
    spec_ = importlib.util.spec_from_file_location("craftax_baselines_ppo", f"{folder}/ppo.py")
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    config = baseline_config(spec["envs"], spec["steps"])
    train = module.make_train(config)
    out = _timed_once(train, jax.random.PRNGKey(spec["seed"]))
    out["steps"] = config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"]
    out["returns"] = [d.get("episode_return") for d in logged]
    return out


def _timed_once(train: Any, key: Any) -> dict[str, Any]:
    """One call of ``train`` compiled, timed apart from its compilation; its ``output``."""
    timed = time_program(train, key, repeats=1)
    return {
        "compile_s": timed["compile_s"],
        "run_s": timed["run_s"][0],
        "cpu_s": timed["cpu_s"][0],
        "output": timed["output"],
    }


def batchppo_config(envs: int, steps: int, seed: int, lean: bool = False) -> Any:
    """The batchppo side's config: the ``craftax_symbolic`` preset at ``envs`` envs, ``steps``
    steps and ``seed``; ``lean`` leaves out the per-minibatch diagnostics (KL, clip fraction,
    grad norm), which the baseline does not compute (its parameters are the same)."""
    import dataclasses

    from batchppo.experiment.config.configs import get_preset

    return dataclasses.replace(get_preset("craftax_symbolic"), num_agents=envs, steps=steps,
                               seed=seed, minibatch_diagnostics=not lean)  # fmt: skip


def _batchppo(spec: dict[str, Any]) -> dict[str, Any]:
    import jax
    import numpy as np

    from batchppo.algorithms.ppo import make_train
    from batchppo.algorithms.ppo.ppo import num_iterations

    lean = spec["side"] == "batchppo_lean"
    config = batchppo_config(spec["envs"], spec["steps"], spec["seed"], lean)
    out = _timed_once(make_train(config), jax.random.key(spec["seed"]))
    state, metrics = out["output"]
    out["steps"] = num_iterations(config) * config.rollout_length * config.num_agents
    out["returns"] = [None if np.isnan(x) else float(x) for x in np.asarray(metrics["score"])]
    out["mean_action_eval"] = _evaluate(config, state, spec["seed"])
    return out


def _evaluate(config: Any, state: Any, seed: int) -> float:
    """The final policy's mean-action return over ``config.eval_episodes`` episodes."""
    from batchppo.algorithms.ppo import Trainer
    from batchppo.core.keys import host_key

    result = Trainer(config).evaluate(state, config.eval_episodes, host_key(seed, 2))
    return float(result["score"])


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One side of the comparison (in its own process)."""
    import jax

    out = _baseline(spec) if spec["side"] == "baseline" else _batchppo(spec)
    del out["output"]
    out["side"] = spec["side"]
    out["sps"] = out["steps"] / out["run_s"]
    # On a machine shared with other work, CPU time is the steadier measure of a side's work.
    out["cpu_sps"] = out["steps"] / out["cpu_s"]
    out["device"] = str(jax.devices()[0].device_kind)
    return out


def final_return(returns: list[float | None], window: int) -> float | None:
    """The mean of the last ``window`` updates' mean returns (updates where none ended skipped)."""
    tail = [r for r in returns[-window:] if r is not None]
    return sum(tail) / len(tail) if tail else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--baselines-dir", help="a Craftax_Baselines checkout (its ppo.py)")
    parser.add_argument("--steps", type=int, default=1_048_576)
    parser.add_argument("--envs", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", type=int, default=2, help="updates the return is read over")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sides", default="baseline,batchppo,batchppo_lean")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--json", help="write every figure here")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    sides = args.sides.split(",")
    if "baseline" in sides and not args.baselines_dir:
        parser.error("--baselines-dir is needed for the baseline side (or --sides batchppo)")
    base = {"steps": args.steps, "envs": args.envs, "seed": args.seed}
    base["baselines_dir"] = args.baselines_dir

    def side(name: str) -> Side:
        def run(_: int) -> dict[str, Any]:
            spec = json.dumps({**base, "side": name})
            row = spawn(__file__, ["--worker", spec], args.timeout)
            if "returns" in row:
                row["final_return"] = final_return(row["returns"], args.window)
            return row

        return Side(name, run)

    def show(row: dict[str, Any], _: Result) -> None:
        print(json.dumps({k: v for k, v in row.items() if k != "returns"}), flush=True)

    result = compare([side(name) for name in sides], args.rounds, on_row=show)
    _summary(result)
    if args.json:
        from batchppo.experiment.artifacts.provenance import effective_config

        # The config behind the figures, for the guard that holds the preset to it
        # (bench/results.py); the lean side's differs in minibatch_diagnostics only.
        config = effective_config(batchppo_config(args.envs, args.steps, args.seed))
        record = {"args": vars(args), "differences": DIFFERENCES, "rows": result.rows,
                  "config": config}  # fmt: skip
        write_json(args.json, record)
    return 0


def _summary(result: Result) -> None:
    for side in result.names:
        runs = result.readings(side)
        if runs:
            finals = [r["final_return"] for r in runs]
            print(
                f"{side}: {result.best(side, 'sps'):,.0f} steps/s (best of {len(runs)}), "
                f"training return {finals}"
            )
    ratios = result.ratios("baseline", "sps", how="max")
    for side in ("batchppo", "batchppo_lean"):
        if side in ratios:
            print(f"speed {side} / baseline: {ratios[side]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
