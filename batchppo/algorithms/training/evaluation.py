"""Evaluation and deployment of a trained policy, for any algorithm.

* ``Evaluator`` runs the deterministic policy (or, asked, the sampling one) in a separate eval
  env of the run's backend, in compiled chunks of steps, and takes each env's first episodes
  (no bias towards short ones).
* ``HostPolicy`` is ``obs -> action`` on the host, for deployment and visualisation.

Both see the agent only through its pure functions: ``act(params, carry, obs, first, key) ->
(action, extras, carry)`` (``simulate``'s policy signature), ``init_sim(key, env)`` and
``initial_carry(batch)``; ``params`` is whatever the agent acts with (for PPO the network
parameters and the observation statistics).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from batchppo.algorithms.training.programs import (
    Compiler,
    Program,
    cold_compiler_options,
    env_check,
    env_compiler_options,
)
from batchppo.core import spaces
from batchppo.core.env import Env
from batchppo.core.keys import raw_key
from batchppo.core.simulation import rollout
from batchppo.core.types import SimState
from batchppo.envs.episode_metrics import EpisodeInfoRecorder

Ended = tuple[jax.Array, jax.Array, jax.Array, jax.Array]
"""What an eval program hands back of its steps, ``(chunk, num_envs)`` each: whether an episode
ended there, its return, its length and whether it terminated."""

PyTree = Any
PolicyFn = Callable[..., tuple[jax.Array, dict[str, Any], PyTree]]

EVAL_CHUNK = 64
"""The most steps of one compiled eval call. An evaluation ends at the end of the call in
which its last episode ended, so the steps after it (an expensive host env's, say, whose
episodes end long before ``max_length``) are wasted: short calls bound that waste, at the
cost of one host sync per call."""


@dataclasses.dataclass
class _Episode:
    """One eval episode: its return and length, whether a cut ended it, which env ran it
    (``env``) as its ``index``-th episode, and whether it ended in a terminal state."""

    score: float
    length: int
    cut: bool
    env: int
    index: int
    terminated: bool = False


def _recorded(recorder: EpisodeInfoRecorder | None, episode: _Episode) -> dict:
    """The recorder's summary of ``episode`` (its running one for a cut episode)."""
    if recorder is None:
        return {}
    if episode.cut:
        return recorder.running()[episode.env]
    return recorder.episodes[episode.env][episode.index]


def _options(env: Env) -> dict[str, Any]:
    """XLA options of the eval programs over ``env``: they run rarely (cold), with the env's
    own (``env_compiler_options``)."""
    return env_compiler_options(cold_compiler_options(), env)


class Evaluator:
    """Episodes of the deterministic (or the sampling) policy in an eval env of its own.

    Args:
        make_env: ``num_envs -> Env``, the eval env (seeded; built on first use, and again
            when an evaluation needs another number of envs).
        init_sim: ``(key, env) -> SimState``, fresh episodes in ``env``.
        act: The deterministic policy (``simulate``'s signature).
        sample_act: The sampling policy (the one training acts with), for evaluations that
            ask for sampled actions; None: such evaluations are refused.
        max_envs: At most this many eval envs (the run's ``num_agents``).
        max_length: The run's time limit: the compiled eval calls split it evenly (in calls of at
            most ``EVAL_CHUNK`` steps), so that episodes that run to it end at a call's end.
        max_steps: Steps each eval env may run in one evaluation (``eval_max_steps``).
        compiler: Compiles the programs that ``precompile`` lowers.
    """

    def __init__(
        self,
        *,
        make_env: Callable[[int], Env],
        init_sim: Callable[[jax.Array, Env], SimState],
        act: PolicyFn,
        sample_act: PolicyFn | None = None,
        max_envs: int,
        max_length: int | None,
        max_steps: int,
        compiler: Compiler,
    ) -> None:
        self._make_env = make_env
        self._init_sim = init_sim
        self._acts = {False: act, True: sample_act}
        self._max_envs = max_envs
        self._max_length = max_length
        self._max_steps = max_steps
        self._compiler = compiler
        self.env: Env | None = None
        """The eval env, once built; None before the first evaluation and after close."""
        # The programs over the current eval env by action mode (sampled or not): its start,
        # and its continuations by length.
        self._start: dict[bool, Program] = {}
        self._more: dict[tuple[bool, int], Program] = {}

    @property
    def programs(self) -> dict[str, Program]:
        """The compiled programs over the current eval env by name (``eval_start(envs, chunk)``,
        ``eval_more(envs, chunk)`` and their ``_sampled`` twins); empty before the first
        evaluation or ``precompile`` and after ``close``. A new dict: a view, not a way to add
        one."""
        programs = [*self._start.values(), *self._more.values()]
        return {p.name: p for p in programs}

    def layout(self, num_episodes: int) -> tuple[int, int]:
        """``(num_envs, chunk)``: envs of the eval env and steps per compiled eval call
        (``max_length`` split into even calls of at most ``EVAL_CHUNK`` steps, else
        ``EVAL_CHUNK``; at most ``max_steps``)."""
        if num_episodes < 1:
            raise ValueError(f"evaluate: num_episodes={num_episodes} must be >= 1")
        limit = self._max_length or EVAL_CHUNK
        chunk = min(math.ceil(limit / math.ceil(limit / EVAL_CHUNK)), self._max_steps)
        return min(num_episodes, self._max_envs), int(chunk)

    def _env(self, num_envs: int) -> Env:
        """The eval env of ``num_envs`` envs; another count replaces it and its programs."""
        if self.env is None or self.env.num_envs != num_envs:
            self.close()
            self.env = self._make_env(num_envs)
        return self.env

    @staticmethod
    def _name(kind: str, sample: bool, num_envs: int, chunk: int) -> str:
        """A program's name: ``eval_start(envs, chunk)``, ``eval_more_sampled(envs, chunk)``."""
        return f"eval_{kind}{'_sampled' if sample else ''}({num_envs}, {chunk})"

    def _start_program(self, num_envs: int, chunk: int, sample: bool) -> Program:
        """Fresh episodes and their first ``chunk`` steps:
        ``(params, key) -> (ss, ended)``."""
        env = self._env(num_envs)
        if sample not in self._start:
            more = self._rollout(env, chunk, sample)

            def start(params: PyTree, key: jax.Array) -> tuple[SimState, Ended]:
                return more(params, self._init_sim(key, env))

            build = lambda: jax.jit(start, compiler_options=_options(env))  # noqa: E731
            name = self._name("start", sample, num_envs, chunk)
            self._start[sample] = Program(name, build, check=env_check(env))
        return self._start[sample]

    def _more_program(self, num_envs: int, chunk: int, sample: bool) -> Program:
        """``chunk`` more steps: ``(params, ss) -> (ss, ended)``."""
        env = self._env(num_envs)
        if (sample, chunk) not in self._more:
            more = self._rollout(env, chunk, sample)
            build = lambda: jax.jit(more, compiler_options=_options(env))  # noqa: E731
            name = self._name("more", sample, num_envs, chunk)
            self._more[sample, chunk] = Program(name, build, check=env_check(env))
        return self._more[sample, chunk]

    def _rollout(self, env: Env, chunk: int, sample: bool) -> Callable:
        act = self._acts[sample]
        if act is None:
            raise ValueError("evaluate: sampled actions need the evaluator's sample_act")

        def more(params: PyTree, ss: SimState) -> tuple[SimState, Ended]:
            ss, _, stats = rollout(env, act, params, ss, chunk)
            return ss, (stats.done, stats.score, stats.length, stats.terminated)

        return more

    def precompile(
        self, num_episodes: int, params: PyTree, key: jax.Array, sample: bool = False
    ) -> None:
        """Lowers the eval calls for ``params`` and ``key`` (shapes will do) and compiles them
        in the background: the first, and its continuation unless an evaluation of
        ``num_episodes`` always ends after the first (``_first_call_suffices``); builds the eval
        env. ``sample``: the calls of ``evaluate(..., sample=True)``."""
        num_envs, chunk = self.layout(num_episodes)
        start = self._start_program(num_envs, chunk, sample)
        ss, _ = start.precompile(self._compiler, params, key)
        if not self._first_call_suffices(num_episodes, num_envs, chunk):
            self._more_program(num_envs, chunk, sample).precompile(self._compiler, params, ss)

    def _first_call_suffices(self, num_episodes: int, num_envs: int, chunk: int) -> bool:
        """Whether an evaluation of ``num_episodes`` on ``layout(num_episodes)``, ``(num_envs,
        chunk)``, always ends after its first compiled call: the call reaches ``max_steps``, or
        each env takes one episode and the time limit ends it within the call (``max_length``
        at most ``EVAL_CHUNK`` steps)."""
        one_each = num_episodes <= num_envs
        within = self._max_length is not None and self._max_length <= chunk
        return chunk >= self._max_steps or (one_each and within)

    def evaluate(
        self,
        params: PyTree,
        num_episodes: int,
        key: jax.Array,
        task_metrics: bool = False,
        sample: bool = False,
    ) -> dict:
        """Runs the deterministic policy with ``params`` until each env has its episodes.

        ``min(num_episodes, max_envs)`` envs run until each has finished enough episodes,
        and the first episodes of each env are kept. The steps run in compiled calls of
        ``chunk`` steps (the first one resets), and the evaluation stops after the call in
        which the last episode it needs ended. Each env runs at most ``max_steps`` steps: an
        episode still running then is cut and kept with its return and length so far, and a
        ``RuntimeWarning`` says how many were cut.

        Args:
            params: What the policy acts with.
            num_episodes: Episodes to collect (>= 1).
            key: PRNG key of the env resets (and, with ``sample``, of the actions' noise).
            task_metrics: Also record the eval env's infos per episode (host envs, through
                their ``record_infos``; their steps then carry infos); pure-JAX envs have
                none to record.
            sample: Act with the sampling policy (as training does) instead of the
                deterministic one.

        Returns:
            ``{"score", "length"}`` means, ``"returns"``, ``"lengths"`` and ``"terminated"`` (the
            episode ended in a terminal state, not by a time limit or a cut) arrays, ``"cut"``, the
            number of cut episodes among them, and with ``task_metrics`` the list ``"infos"``: each
            episode's ``batchppo.envs.episode_metrics.EpisodeInfoRecorder`` summary (``{}`` where
            the env records none).
        """
        num_envs, chunk = self.layout(num_episodes)
        env = self._env(num_envs)
        recorder = None
        if task_metrics and hasattr(env, "record_infos"):
            recorder = EpisodeInfoRecorder(num_envs)
            env.record_infos(recorder)
        try:
            ordered = self._episodes(params, num_episodes, key, num_envs, chunk, sample)
        finally:
            if recorder is not None:
                env.record_infos(None)
        cut = sum(e.cut for e in ordered)
        if cut:
            warnings.warn(
                f"evaluate: {cut} of {len(ordered)} eval episodes were cut at "
                f"eval_max_steps={self._max_steps} steps per env before they ended; they count "
                "with their return so far. Raise eval_max_steps, or bound episodes with "
                "max_length",
                RuntimeWarning,
                stacklevel=3,
            )
        rets = np.array([e.score for e in ordered], np.float64)
        lens = np.array([e.length for e in ordered], np.int64)
        result = {
            "score": float(rets.mean()),
            "length": float(lens.mean()),
            "returns": rets,
            "lengths": lens,
            "terminated": np.array([e.terminated for e in ordered], bool),
            "cut": cut,
        }
        if task_metrics:
            result["infos"] = [_recorded(recorder, e) for e in ordered]
        return result

    def _episodes(
        self,
        params: PyTree,
        num_episodes: int,
        key: jax.Array,
        num_envs: int,
        chunk: int,
        sample: bool,
    ) -> list[_Episode]:
        """The first ``ceil(num_episodes / num_envs)`` episodes of each env, taken env by
        env in turn, ``num_episodes`` in all."""
        per_env = math.ceil(num_episodes / num_envs)
        episodes: list[list[_Episode]] = [[] for _ in range(num_envs)]
        max_steps = self._max_steps
        ss, ended = self._start_program(num_envs, chunk, sample)(params, raw_key(key))
        steps = chunk
        while True:
            done, score, length, terminal = jax.device_get(ended)
            for t, i in zip(*np.nonzero(done), strict=True):
                k = len(episodes[i])
                episode = _Episode(float(score[t, i]), int(length[t, i]), False, i, k)
                episode.terminated = bool(terminal[t, i])
                episodes[i].append(episode)
            if min(len(e) for e in episodes) >= per_env or steps >= max_steps:
                break
            more = min(chunk, max_steps - steps)  # the last call stops at the bound exactly
            ss, ended = self._more_program(num_envs, more, sample)(params, ss)
            steps += more
        running = jax.device_get((ss.score, ss.length))
        for i, env_episodes in enumerate(episodes):
            if len(env_episodes) < per_env and running[1][i] > 0:
                k = len(env_episodes)
                env_episodes.append(_Episode(float(running[0][i]), int(running[1][i]), True, i, k))
        ordered = [e[k] for k in range(per_env) for e in episodes if k < len(e)]
        return ordered[:num_episodes]

    def close(self) -> None:
        """Closes the eval env (worker processes of host backends) and drops its programs."""
        if self.env is not None and hasattr(self.env, "close"):
            self.env.close()
        self.env = None
        self._start = {}
        self._more = {}


class HostPolicy:
    """``obs -> action`` on the host for deployment and visualisation.

    Recurrent policies carry their state across calls (call ``reset`` at episode starts). Sampling
    policies draw from a key seeded by ``seed``.

    Args:
        act: The policy (``simulate``'s signature), jitted here.
        params: What it acts with.
        initial_carry: ``batch -> carry``, the recurrent state at an episode start.
        obs_shape: The observation space tree (``batchppo.core.spaces``); a shape tuple stands for
            one float32 ``Box`` of that shape.
        seed: Seed of the sampling key.
    """

    def __init__(
        self,
        act: PolicyFn,
        params: PyTree,
        initial_carry: Callable[[int], PyTree],
        obs_shape: Any,
        seed: int,
    ) -> None:
        self._params = params
        self._fn = jax.jit(act)
        self._initial_carry = initial_carry
        if isinstance(obs_shape, tuple) and not any(map(spaces.is_leaf, obs_shape)):
            obs_shape = spaces.box(obs_shape, np.float32)
        self._obs_space = obs_shape
        self._key = jax.random.key(seed)
        self._carry: PyTree = None

    def reset(self) -> None:
        """Forgets the recurrent state; the next call starts new episodes."""
        self._carry = None

    def __call__(self, obs: Any) -> Any:
        """Actions ``(B, *action_shape)`` for observations ``(B, *obs_shape)`` (pytrees of
        those for Dict/Tuple spaces); each observation leaf is cast to its space's dtype."""
        obs = spaces.cast(self._obs_space, obs)
        for leaf, x in zip(
            spaces.leaves(self._obs_space), spaces.flatten(self._obs_space, obs), strict=True
        ):
            if x.shape[1:] != leaf.shape:
                raise ValueError(
                    f"policy: observations of shape {x.shape} do not match (B, "
                    f"*{leaf.shape}); pass a batch"
                )
        batch = spaces.flatten(self._obs_space, obs)[0].shape[0]
        first = self._carry is None
        if first:
            self._carry = self._initial_carry(batch)
        self._key, key = jax.random.split(self._key)
        first_arr = jnp.full((batch,), first)
        action, _, self._carry = self._fn(self._params, self._carry, obs, first_arr, key)
        return jax.tree.map(np.asarray, action)
