"""Soak test: a long host-env training whose envs crash, hang and leak, with restarts on.

A child process trains PPO (preset ``pendulum_fast``) on ``soak:FlakyPendulum-v0``
(Pendulum-v1 in ``BatchEnv`` worker processes) with ``backend_options.max_restarts`` and
``backend_options.step_timeout`` set. Each env step, at random
(its own generator, seeded from the env's reset seed):

* raises ``RuntimeError`` with probability ``--crash`` (the env is rebuilt in its worker),
* sleeps past ``step_timeout`` with probability ``--hang`` (the worker is killed and
  respawned, after dumping its stacks),
* and always grows a buffer of the env by ``--leak`` bytes (a slow leak, freed when the env
  is rebuilt or its worker respawned).

This process samples, every ``--every`` seconds, the resident memory of the learner (the
child) and of its env workers (every process below it), and counts the restarts by kind from
the child's ``EnvRestartWarning`` lines. After ``--minutes`` the child gets SIGTERM (the
graceful stop: checkpoint, exit 143); then this process checks that no process the child
started is still running and that none of the ``/dev/shm`` entries (semaphores, shared memory)
its processes mapped is left.

Example (docs/benchmarks-journal.md):
    nice -n 19 python bench/soak.py --minutes 60 --out soak.jsonl > soak.txt 2>&1
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv

ENV_ID = "FlakyPendulum-v0"
HERE = Path(__file__).resolve().parent


class FlakyPendulumEnv(PendulumEnv):
    """Pendulum-v1 whose steps crash, hang or leak at random (see the module docstring)."""

    def __init__(
        self,
        crash: float = 0.0,
        hang: float = 0.0,
        hang_seconds: float = 3600.0,
        leak: int = 0,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.crash, self.hang, self.hang_seconds, self.leak = crash, hang, hang_seconds, leak
        self._faults = np.random.default_rng()
        self._leaked = bytearray()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self._faults = np.random.default_rng([seed, 24])
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self._leaked.extend(bytes(self.leak))
        draw = self._faults.random()
        if draw < self.crash:
            raise RuntimeError("FlakyPendulum: the simulator crashed")
        if draw < self.crash + self.hang:
            time.sleep(self.hang_seconds)
        return super().step(action)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=FlakyPendulumEnv, max_episode_steps=200)


def _child(args: argparse.Namespace) -> int:
    """The training run (in its own process, so that the parent can watch it from outside)."""
    import warnings

    from batchppo import cli
    from batchppo.envs import EnvRestartWarning

    warnings.simplefilter("always", EnvRestartWarning)  # every restart on a line, to count

    # Fixed-point numbers: YAML reads 3e-05 (no dot) as a string.
    env_kwargs = f"{{crash: {args.crash:.12f}, hang: {args.hang:.12f}, leak: {args.leak}}}"
    overrides = [
        "env=soak:" + ENV_ID,
        f"env_kwargs={env_kwargs}",
        "steps=1000000000",
        f"num_agents={args.envs}",
        f"backend_options.num_workers={args.workers}",
        "backend_options.max_restarts=1000000000",
        f"backend_options.step_timeout={args.timeout}",
        "log_every=100000",
        "eval_every=500000",
        "checkpoint_every=500000",
        "eval_episodes=8",
    ]
    argv = ["train", "--config", "pendulum_fast", "--logdir", args.logdir, "--progress", "lines"]
    for override in overrides:
        argv += ["--set", override]
    return cli.main(argv)


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def _mapped_shm(pids: list[int]) -> set[str]:
    """The ``/dev/shm`` entries (semaphores, shared memory) that processes ``pids`` map: the
    run's own, told from those of other programs sharing the machine's ``/dev/shm``."""
    names = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as maps:
                for line in maps:
                    at = line.find("/dev/shm/")
                    if at >= 0:
                        names.add(line[at + 9 :].strip().removesuffix(" (deleted)"))
        except OSError:
            continue
    return names


def _rss_mib(proc: Any) -> float:
    return proc.memory_info().rss / 2**20


def _kind(line: str) -> str | None:
    """The kind of restart an ``EnvRestartWarning`` line reports, or None for other lines."""
    if "EnvRestartWarning" not in line:
        return None
    if "did not answer" in line:
        return "hang"
    if " raised " in line:
        return "crash"
    return "worker died" if " died " in line else "other"


def _watch(args: argparse.Namespace) -> int:
    import psutil

    shm_before = _shm()
    ours: set[str] = set()  # /dev/shm entries the run's processes mapped at some sample
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    log_path = Path(args.out).with_suffix(".child.txt")
    with log_path.open("w") as child_log:
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", *sys.argv[1:]],
            stdout=child_log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        learner = psutil.Process(child.pid)
        seen: set[int] = set()
        start = time.monotonic()
        end = start + 60 * args.minutes
        with open(args.out, "w") as out:
            while child.poll() is None:
                if time.monotonic() >= end:
                    child.send_signal(signal.SIGTERM)
                    end = float("inf")
                try:
                    # The learner's children: multiprocessing's forkserver (and tensorboard's
                    # or XLA's helpers, if any); the env workers are the forkserver's children.
                    below = learner.children(recursive=True)
                    workers = [w for c in learner.children() for w in c.children()]
                    sample = {
                        "t": round(time.monotonic() - start, 1),
                        "learner_mib": round(_rss_mib(learner), 1),
                        "processes_below": len(below),
                        "workers": len(workers),
                        "workers_mib": round(sum(_rss_mib(w) for w in workers), 1),
                        "max_worker_mib": round(max((_rss_mib(w) for w in workers), default=0), 1),
                    }
                except psutil.Error:
                    break  # the child is ending
                seen |= {p.pid for p in below}
                ours |= _mapped_shm([child.pid, *(p.pid for p in below)])
                out.write(json.dumps(sample) + "\n")
                out.flush()
                time.sleep(args.every)
            code = child.wait()
    time.sleep(2.0)  # the workers' own parent-death watch needs a moment
    orphans = [pid for pid in sorted(seen) if psutil.pid_exists(pid)]
    kinds: dict[str, int] = {}
    for line in log_path.read_text().splitlines():
        kind = _kind(line)
        if kind:
            kinds[kind] = kinds.get(kind, 0) + 1
    runs = sorted(Path(args.logdir).glob("*-pendulum_fast/metrics.jsonl"), key=os.path.getmtime)
    records = [json.loads(line) for line in runs[-1].read_text().splitlines()] if runs else []
    train = [r for r in records if r["phase"] == "train"]
    summary = {
        "exit_status": code,
        "run_dir": str(runs[-1].parent) if runs else None,
        "steps": train[-1]["step"] if train else 0,
        "env_restarts_metric": train[-1].get("env_restarts") if train else None,
        "minutes": args.minutes,
        "restart_warnings_by_kind": kinds,
        "processes_started": len(seen),
        "orphans": orphans,
        "dev_shm_entries_of_the_run": len(ours),
        "leaked_dev_shm_entries_of_the_run": sorted(ours & _shm()),
        "new_in_dev_shm_any_program": len(_shm() - shm_before),
    }
    print(json.dumps(summary, indent=1))
    return 0 if not orphans and not summary["leaked_dev_shm_entries_of_the_run"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="how long to train")
    parser.add_argument("--out", default="soak.jsonl", help="memory samples (JSON lines)")
    parser.add_argument("--logdir", default="/tmp/batchppo-soak", help="the run's logdir")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--envs", type=int, default=16, help="training envs")
    parser.add_argument("--workers", type=int, default=2, help="env worker processes")
    parser.add_argument("--crash", type=float, default=1e-5, help="crash chance per env step")
    parser.add_argument("--hang", type=float, default=2e-6, help="hang chance per env step")
    parser.add_argument("--leak", type=int, default=64, help="bytes leaked per env step")
    parser.add_argument("--timeout", type=float, default=5.0, help="step_timeout (s)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    return _child(args) if args.child else _watch(args)


if __name__ == "__main__":
    sys.exit(main())
