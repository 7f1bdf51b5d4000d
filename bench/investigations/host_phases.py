r"""Where a host-loop iteration's time goes (issue 41, item 4): env, policy, update.

``breakout_atari`` at CleanRL's settings trains at about 2k agent steps/s on an H200 with the
rollout a Python loop (``host_loop=true``, benchmarks journal 11e): 4 ms per step of 8 envs,
where the target is under 1 ms. This script splits that time for a preset with host envs, in
one process, after a warm-up iteration that compiles everything:

* ``iteration``: ``Trainer.iteration`` (the rollout loop, then the compiled update);
* ``rollout``: ``HostLoop.rollout`` alone over the trainer's env;
* ``env``: the part of ``rollout`` spent in the env's ``host_step`` (the workers' step, their
  shared memory read back);
* ``replay``: ``rollout`` with ``host_step`` answering at once with the steps recorded in the
  last timed ``rollout`` (in their order, so episodes end where they did), i.e. what the loop
  costs besides the env: the answers' way to the device, the compiled call between env steps
  (the bookkeeping of the step before, written into the rollout's arrays, and the policy on the
  new observation) and the action's way to the host; ``on_device`` (``REPLAYS``) the same with
  the answers on the device already;
* ``update`` = ``iteration`` - ``rollout`` (the compiled update and its metrics).

Each is the median over ``--iterations`` timed calls, in milliseconds per rollout step (one
step of all the envs), with the implied agent steps/s. ``--profile DIR`` then records one more
rollout under JAX's profiler (a Perfetto trace: the compiled calls on the device against the
host's gaps). ``--spin-us`` and ``--worker-spin-us`` set how long the learner and the workers
spin on their semaphores before blocking (``WorkerOptions``' ``spin_us`` and ``worker_spin_us``,
which the trainer leaves at their defaults: set here for this process's envs, through the
``process`` backend's batch env factory, to measure what a wake-up costs a step where cores are
many). ``--compiler-option KEY=VALUE`` (repeatable) adds
an XLA option to the trainer's hot programs (the host loop's policy step, the update).

    python bench/investigations/host_phases.py --preset breakout_atari --iterations 8 \
        --json phases.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from batchppo.algorithms.ppo import Trainer
from batchppo.algorithms.ppo.ppo import rollout_length
from batchppo.algorithms.ppo.presets import PRESETS
from batchppo.algorithms.training import trainer as trainer_module
from batchppo.backends import HostEnv, get_backend
from batchppo.envs import WorkerOptions

# bench/ on the path, as for a script run from there: the harness lives beside the stable suite.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import write_json  # bench/harness.py: the result beside its provenance

make_module = importlib.import_module("batchppo.envs.make")  # the function shadows the module

PARTS = ("iteration", "rollout", "env", "replay", "update")
REPLAYS = ("on_device",)
"""``replay`` again with the recorded answers already on the device before the rollout starts:
the compiled call with no transfer of the env's answer at all."""


def _timed(times: list[float], results: list[Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` that adds each call's wall time to ``times[-1]`` and appends its result."""

    def call(*args: Any) -> Any:
        start = time.perf_counter()
        results.append(fn(*args))
        times[-1] += time.perf_counter() - start
        return results[-1]

    return call


def _replayer(recorded: list[Any]) -> Callable[[Any], Any]:
    """A ``host_step`` that answers at once with the recorded answers, in their order."""
    answers = itertools.cycle(recorded)
    return lambda action: next(answers)


def with_spins(env_fns: list, *, factory: Callable[..., Any], options: Any = None, **kwargs: Any):
    """``factory`` (``process_batch_env``) with the spins of ``kwargs`` set on its options."""
    spins = {name: kwargs.pop(name) for name in ("spin_us", "worker_spin_us")}
    options = dataclasses.replace(options or WorkerOptions(), **spins)
    return factory(env_fns, options=options, **kwargs)


def phases(
    preset: str,
    iterations: int,
    overrides: dict[str, Any] | None = None,
    profile: str | None = None,
) -> dict:
    """The medians of each part (``PARTS``) of ``preset``'s host-loop iteration, ms per step.

    Args:
        preset: A preset whose envs run on the host (``backend: process``).
        iterations: Timed calls of each part (after one warm-up of each).
        overrides: Config fields to replace (e.g. ``num_agents``), besides ``host_loop=True``.
        profile: A folder for a Perfetto trace of one more rollout; None: no trace.
    """
    config = dataclasses.replace(PRESETS[preset], **(overrides or {}))
    if get_backend(config.backend).fused:
        raise ValueError(f"{preset} runs fused ({config.backend}): pick a preset of host envs")
    trainer = Trainer(dataclasses.replace(config, host_loop=True))
    env, loop = trainer.env, trainer.host_loop
    assert isinstance(env, HostEnv) and loop is not None
    steps = rollout_length(config)
    ts = trainer.init(jax.random.key(config.seed))
    ss = trainer.init_sim(ts, jax.random.key(config.seed + 1))
    times: dict[str, list[float]] = {part: [] for part in (*PARTS, *REPLAYS)}
    host_step = env.host_step
    env_time: list[float] = []
    recorded: list[Any] = []
    try:
        ts, ss, _ = trainer.iteration(ts, ss)  # compiles the loop's steps and the update
        for _ in range(iterations):
            start = time.perf_counter()
            ts, ss, _ = trainer.iteration(ts, ss)
            times["iteration"].append(time.perf_counter() - start)
        params = trainer.agent.acting_params(ts)  # the update donates the state it is given
        env.host_step = _timed(env_time, recorded, host_step)
        for i in range(iterations + 1):
            env_time.append(0.0)
            recorded.clear()
            start = time.perf_counter()
            ss, traj, _ = loop.rollout(params, ss, steps)
            jax.block_until_ready((ss, traj))
            if i:  # the first is a warm-up
                times["rollout"].append(time.perf_counter() - start)
                times["env"].append(env_time[-1])
        answers = {"replay": recorded, "on_device": [jax.device_put(a) for a in recorded]}
        for part, replies in answers.items():
            env.host_step = _replayer(replies)
            for i in range(iterations + 1):  # the first is a warm-up
                start = time.perf_counter()
                jax.block_until_ready(loop.rollout(params, ss, steps))
                if i:
                    times[part].append(time.perf_counter() - start)
        env.host_step = host_step
        if profile:
            with jax.profiler.trace(profile, create_perfetto_trace=True):
                jax.block_until_ready(loop.rollout(params, ss, steps))
    finally:
        env.host_step = host_step
        trainer.close()
    return {
        "preset": preset,
        "envs": env.num_envs,
        "steps": steps,
        "device": str(jax.devices()[0]),
        **per_step(times, env.num_envs, steps),
    }


def per_step(times: dict[str, list[float]], envs: int, steps: int) -> dict[str, dict[str, float]]:
    """Each part's median call (seconds) as ``ms_per_step`` and ``agent_steps_per_s``; the
    update, which is not timed alone, as the median iteration less the median rollout.

    Args:
        times: Seconds of each timed call, by part (parts without calls are left out).
        envs: Envs stepped together.
        steps: Steps of each env in a call (a rollout's length).
    """
    medians = {part: statistics.median(t) for part, t in times.items() if t}
    medians["update"] = medians["iteration"] - medians["rollout"]
    return {
        "ms_per_step": {part: 1e3 * medians[part] / steps for part in medians},
        "agent_steps_per_s": {part: envs * steps / medians[part] for part in medians},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="breakout_atari")
    parser.add_argument("--iterations", type=int, default=8, help="timed calls of each part")
    parser.add_argument("--num-agents", type=int, default=0, help="0: the preset's")
    parser.add_argument("--rollout-length", type=int, default=0, help="0: the preset's")
    parser.add_argument("--json", help="also write the result to this file")
    parser.add_argument("--profile", help="a folder for a Perfetto trace of one more rollout")
    parser.add_argument("--spin-us", type=float, help="WorkerOptions.spin_us (None: its default)")
    parser.add_argument("--worker-spin-us", type=float, help="WorkerOptions.worker_spin_us")
    parser.add_argument(
        "--compiler-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an XLA option of the hot programs besides the trainer's own",
    )
    args = parser.parse_args(argv)
    extra = dict(option.split("=", 1) for option in args.compiler_option)
    defaults = dataclasses.asdict(WorkerOptions())
    spins = {"spin_us": args.spin_us, "worker_spin_us": args.worker_spin_us}
    spins = {name: defaults[name] if value is None else value for name, value in spins.items()}
    overrides: dict[str, Any] = {}
    if args.num_agents:
        overrides["num_agents"] = args.num_agents
    if args.rollout_length:
        overrides["rollout_length"] = args.rollout_length
    factory = make_module.process_batch_env  # what the process backend builds its envs with
    make_module.process_batch_env = functools.partial(with_spins, factory=factory, **spins)
    hot = trainer_module.hot_compiler_options
    trainer_module.hot_compiler_options = lambda *a: {**hot(*a), **extra}
    try:
        result = phases(args.preset, args.iterations, overrides, args.profile)
    finally:
        make_module.process_batch_env = factory
        trainer_module.hot_compiler_options = hot
    result["compiler_options"] = extra
    result["spins_us"] = spins
    for part in result["ms_per_step"]:
        print(
            f"{part:>9}: {result['ms_per_step'][part]:7.3f} ms a step "
            f"({result['agent_steps_per_s'][part]:10,.0f} agent steps/s)"
        )
    if args.json:
        result = write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
