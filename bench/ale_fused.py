"""Where the ``ale`` backend's fused mode spends its time (issue 57), in one process.

``breakout_atari`` on ``backend=ale`` in ``mode=fused`` steps ALE's envs inside the compiled
rollout through the XLA FFI targets of ``AtariVectorEnv.xla()``. This script times, for the
preset's settings (8 envs x 128 steps; ``--envs``, ``--steps`` and ``--set`` change them), each
call compiled first and then ``--repeats`` times, waited for with ``block_until_ready``, and
reports the medians:

* ``raw_step``: ALE's own ``xla()`` step alone, in a jitted ``lax.scan`` of ``--steps`` calls
  with fixed actions (ALE's next-step autoreset, no game bookkeeping, no conditional): the floor
  of any step;

and for each variant of ``AleFusedEnv.step`` (``VARIANTS``; ``--variants`` picks some):

* ``env``: the same scan over ``AleFusedEnv.step`` (same-step autoreset, lives, game scores);
* ``rollout``: the trainer's rollout of one iteration (the policy and the env, ``core.rollout``
  over the trainer's env and agent, compiled with the trainer's options);
* ``update``: the trainer's own compiled update (its ``learn`` program) on that rollout;
* ``iteration``: ``Trainer.iteration``, the call a training run makes (rollout and update in one
  compiled program, then its metrics and game scores brought to the host).

Each is given in ms per call and in agent steps/s (``envs * steps`` per call). ``step_calls``
gives, for each variant, the ALE step calls (``atari_vector_xla_step``) in the compiled HLO of
its ``env`` scan (XLA's default options), ``rollout`` and ``iteration`` (the trainer's options,
which turn off XLA's GPU dynamic-slice fusion there): one each where XLA copied no step call
(``ale_env.check_step_calls``, which refuses the trainer's programs otherwise). ``--profile DIR``
then writes a ``jax.profiler`` trace (Perfetto) of one more iteration of the first variant.

    python bench/ale_fused.py --json ale_fused.json --profile /tmp/ale-profile
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from harness import time_calls, write_json
from jax.experimental import io_callback

from batchppo.algorithms.ppo import Trainer
from batchppo.algorithms.ppo.presets import PRESETS
from batchppo.backends.ale import AleOptions
from batchppo.backends.ale_env import AleFusedEnv, _vector_env, atari_stack, step_calls
from batchppo.core.simulation import rollout
from batchppo.experiment.config.configs import apply_overrides


class WhileLoopReset(AleFusedEnv):
    """``AleFusedEnv`` resetting the envs whose game ended one FFI call each, in a
    ``lax.while_loop`` on ``pending.any()`` (the step before its single switched reset)."""

    def _reset_ended(
        self, handle: jax.Array, ended: jax.Array, obs: jax.Array, lives: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        def reset_next(carry: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
            handle, pending, _, _ = carry
            i = jnp.argmax(pending).astype(jnp.int32)
            handle, obs, lives = self._reset_call(handle, i[None], jnp.full((1,), -1, jnp.int32))
            return handle, pending.at[i].set(False), obs, lives

        handle, _, obs, lives = jax.lax.while_loop(
            lambda carry: carry[1].any(), reset_next, (handle, ended, obs, lives)
        )
        return handle, obs, lives


class Before(WhileLoopReset):
    """``WhileLoopReset`` that also calls the host where a game ended, in a ``lax.cond`` on
    ``ended.any()`` (the step before the scores stayed in the state; what that call costs: the
    games are counted in the state all the same)."""

    def step(self, state: Any, action: jax.Array, key: jax.Array) -> Any:
        res = super().step(state, action, key)
        ended = res.state.steps == 0  # the games that ended (their counts restart)
        jax.lax.cond(
            ended.any(),
            lambda: io_callback(lambda *_: None, None, ended, state.scores, ordered=False),
            lambda: None,
        )
        return res


VARIANTS: dict[str, type[AleFusedEnv]] = {
    "package": AleFusedEnv,
    "while_loop": WhileLoopReset,
    "before": Before,
}
"""The steps compared: ``package`` is the backend's own ``AleFusedEnv``; ``while_loop`` resets
as the step before did; ``before`` is that step whole (host callback and reset loop)."""

PARTS = ("env", "rollout", "update", "iteration")


def timed(fn: Callable[[Any], Any], carry: Any, repeats: int) -> tuple[list[float], Any]:
    """Seconds of ``repeats`` calls ``carry = fn(carry)`` after one untimed call (which
    compiles), each waited for; returns the times and the last carry."""
    state = [carry]

    def call() -> Any:
        state[0] = jax.block_until_ready(fn(state[0]))
        return state[0]

    calls = time_calls(call, repeats, warmup=1)
    return calls.wall_s, calls.last


def summary(times: list[float], agent_steps: int) -> dict[str, float]:
    """The median call of ``times`` (seconds) in ms and as agent steps/s."""
    median = statistics.median(times)
    return {"ms": 1e3 * median, "agent_steps_per_s": agent_steps / median}


def fixed_actions(steps: int, envs: int, num_actions: int) -> jax.Array:
    """The actions of the env-only scans: ``(steps, envs)`` int32, drawn once from seed 0."""
    draws = np.random.default_rng(0).integers(0, num_actions, (steps, envs))
    return jnp.asarray(draws, jnp.int32)


def raw_step_times(config: Any, repeats: int) -> tuple[list[float], jax.Array]:
    """Times of a scan of ALE's own ``xla()`` step over fixed actions, on a vector env of its
    own (the preset's preprocessing and threads); and those actions (``fixed_actions``)."""
    stack = atari_stack(config.env, None, config.env_kwargs)
    options = AleOptions(**config.backend_options)
    vec = _vector_env(config.env, config.num_agents, stack, num_threads=options.num_threads)
    try:
        actions = fixed_actions(
            config.rollout_length, config.num_agents, int(vec.single_action_space.n)
        )
        handle, reset, step = vec.xla()
        handle, _ = jax.jit(lambda h: reset(h, seed=config.seed))(handle)

        @jax.jit
        def scan(handle: jax.Array) -> tuple[jax.Array, jax.Array]:
            def body(handle: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
                handle, (_, reward, *_) = step(handle, action)
                return handle, reward

            handle, rewards = jax.lax.scan(body, handle, actions)
            return handle, rewards.sum()

        times, _ = timed(lambda carry: scan(carry[0]), (handle, None), repeats)
        return times, actions
    finally:
        vec.close()


def compiled(jitted: Any, *args: Any) -> tuple[Any, int]:
    """``jitted`` compiled for ``args``, and the ALE step calls in its compiled HLO."""
    program = jitted.lower(*args).compile()
    return program, step_calls(program.as_text())


def env_scan(env: AleFusedEnv, actions: jax.Array) -> Callable[[Any], Any]:
    """``state -> (state, reward sum)``: a compiled scan of ``env.step`` over ``actions``."""

    @jax.jit
    def scan(state: Any) -> Any:
        def body(state: Any, action: jax.Array) -> tuple[Any, jax.Array]:
            res = env.step(state, action, jax.random.key(0))
            return res.state, res.reward

        state, rewards = jax.lax.scan(body, state, actions)
        return state, rewards.sum()

    return scan


def variant_times(
    config: Any, cls: type[AleFusedEnv], actions: jax.Array, repeats: int, profile: str | None
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Times of each part (``PARTS``) over an env of class ``cls`` and a trainer around it, and
    the step calls of its compiled ``env``, ``rollout`` and ``iteration``; with ``profile``, a
    trace of one more iteration there."""
    stack = atari_stack(config.env, None, config.env_kwargs)
    options = AleOptions(**config.backend_options)
    env = cls(config.env, config.num_agents, stack, num_threads=options.num_threads)
    trainer = Trainer(config, env=env)
    times: dict[str, list[float]] = {}
    calls: dict[str, int] = {}
    try:
        state, _ = jax.jit(env.reset)(jax.random.key(config.seed))
        scan, calls["env"] = compiled(env_scan(env, actions), state)
        times["env"], _ = timed(lambda carry: scan(carry[0]), (state, None), repeats)
        agent = trainer.agent
        ts = trainer.init(jax.random.key(config.seed))
        ss = trainer.init_sim(ts, jax.random.key(config.seed + 1))
        collect = jax.jit(
            lambda params, ss: rollout(env, agent.policy_fn, params, ss, agent.T),
            compiler_options=trainer._hot_options,
        )
        params = agent.acting_params(ts)
        collect, calls["rollout"] = compiled(collect, params, ss)
        times["rollout"], (ss, traj, stats) = timed(
            lambda carry: collect(params, carry[0]), (ss, None, None), repeats
        )
        env.take_games(ss.env_state)  # the rollouts' games are no iteration's
        learn = trainer.programs["learn"]
        times["update"], (ts, _) = timed(lambda c: learn(c[0], traj, stats), (ts, None), repeats)

        def iteration(carry: tuple[Any, Any]) -> tuple[Any, Any]:
            ts, ss, _ = trainer.iteration(*carry)
            return ts, ss

        times["iteration"], (ts, ss) = timed(iteration, (ts, ss), repeats)
        calls["iteration"] = step_calls(trainer.programs["iterations(1)"].stage.as_text())
        if profile:
            with jax.profiler.trace(profile, create_perfetto_trace=True):
                jax.block_until_ready(iteration((ts, ss)))
    finally:
        trainer.close()
    return times, calls


def measure(
    config: Any, variants: list[str], repeats: int, profile: str | None = None
) -> dict[str, Any]:
    """The medians of ``raw_step`` and of each variant's parts (see the module docstring)."""
    steps, envs = int(config.rollout_length), int(config.num_agents)
    raw, actions = raw_step_times(config, repeats)
    result: dict[str, Any] = {
        "env": config.env,
        "envs": envs,
        "steps": steps,
        "repeats": repeats,
        "device": str(jax.devices()[0]),
        "raw_step": summary(raw, steps * envs),
        "variants": {},
        "step_calls": {},
    }
    for i, name in enumerate(variants):
        trace = profile if i == 0 else None
        times, calls = variant_times(config, VARIANTS[name], actions, repeats, trace)
        result["variants"][name] = {part: summary(times[part], steps * envs) for part in PARTS}
        result["step_calls"][name] = calls
    return result


def bench_config(preset: str, envs: int, steps: int, sets: list[str]) -> Any:
    """``preset`` on the ale backend in fused mode, with ``envs`` envs (0: the preset's),
    ``steps`` steps per rollout (0: the preset's) and the ``--set`` overrides."""
    config = PRESETS[preset]
    changes: dict[str, Any] = {"backend": "ale", "backend_options": {"mode": "fused"}}
    if envs:
        changes["num_agents"] = envs
    if steps:
        changes["rollout_length"] = steps
    config = dataclasses.replace(config, **changes)
    return apply_overrides(config, sets)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="breakout_atari")
    parser.add_argument("--envs", type=int, default=0, help="0: the preset's (8)")
    parser.add_argument("--steps", type=int, default=0, help="steps a rollout; 0: the preset's")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls of each part")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", help="also write the result to this file")
    parser.add_argument("--profile", help="a folder for a trace of one more iteration")
    args = parser.parse_args(argv)
    variants = [name for name in args.variants.split(",") if name]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or not variants:
        parser.error(f"--variants {args.variants!r}: pick from {', '.join(VARIANTS)}")
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: must be >= 1")
    config = bench_config(args.preset, args.envs, args.steps, args.set)
    result = measure(config, variants, args.repeats, args.profile)
    result["preset"], result["sets"] = args.preset, args.set
    rows = [("raw_step", result["raw_step"])]
    for name, parts in result["variants"].items():
        rows += [(f"{part}[{name}]", parts[part]) for part in PARTS]
    for label, row in rows:
        print(f"{label:>20}: {row['ms']:9.2f} ms ({row['agent_steps_per_s']:10,.0f} agent steps/s)")
    if args.json:
        return write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
