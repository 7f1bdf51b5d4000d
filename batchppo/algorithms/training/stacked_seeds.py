"""Several seeds of one config trained together: one compiled program, one set of envs.

``SeedsTrainer`` trains ``num_seeds`` seeds (``config.seed + i``) of one config at once, for any
agent ([`Agent`][batchppo.algorithms.training.trainer.Agent]). Its states are the single-seed train
state and [`SimState`][batchppo.core.SimState] stacked on a leading seed axis. Each seed computes
what a separate run with its seed computes: bit for bit over host envs, to float rounding over
pure-JAX envs (the vmapped program is compiled on its own, so XLA may order or fuse float operations
differently, env steps included):

* pure-JAX backends (gymnax, brax): the whole training iteration, env included, is ``jax.vmap``-ed
  over seeds into one compiled program; except where the agent compiles its update unrolled
  (``unroll_update``: a CNN on the CPU), whose seeds run one after another through the single-seed
  programs (``SeedsTrainer.seed_after_seed``), each then bit for bit a separate run;
* host backends (process, sync, ray): one batch env of ``num_seeds x num_agents`` envs is
  shared by all seeds (one set of worker processes). Env ``j`` of seed ``s`` is row
  ``s * num_agents + j`` and is reset with the seed a separate run of seed ``s`` gives its
  env ``j``. The rollout is one ``lax.scan`` whose step vmaps the policy over seeds, steps
  all envs in one ``io_callback`` and vmaps the bookkeeping; the update is vmapped over seeds,
  each seed learning from its own slice of envs only.

Evaluation runs seed after seed through one single-seed eval program and one eval env (a
seeded reset makes it exactly the evaluation of a separate run). Several seeds train on one
device: ``config.devices`` must be None or 1.

An env's exception reaches the caller as itself, as with ``Trainer`` (not as JAX's
``JaxRuntimeError``), and over host envs an iteration donates only the sim state, so the
train state passed to an iteration that an env error stopped stays valid.

Examples:
    >>> trainer = SeedsTrainer(config, num_seeds=4, make_agent=PPO)
    >>> ts = trainer.init(init_keys)           # (4, *key_shape) raw keys: one per seed
    >>> ss = trainer.init_sim(ts, sim_keys)
    >>> ts, ss, metrics = trainer.iteration(ts, ss)   # metrics: one dict per seed
    >>> scores = [r["score"] for r in trainer.evaluate(ts, 10, eval_keys)]
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from batchppo.algorithms.training.programs import (
    Program,
    hot_compiler_options,
    iteration_donation,
)
from batchppo.algorithms.training.trainer import (
    Agent,
    Trainer,
    host_metrics,
    make_run_env,
    strong,
)
from batchppo.backends import get_backend
from batchppo.core import spaces
from batchppo.core.env import Env, EnvSpec, StepResult, mark_env_error, raise_env_error
from batchppo.core.keys import raw_key
from batchppo.core.simulation import act, advance
from batchppo.core.types import EpisodeStats, PyTree, SimState, Transition


def seeds_of(config: Any, num_seeds: int) -> list[int]:
    """The seeds of a multi-seed run: ``config.seed + i`` for ``i`` in ``range(num_seeds)``."""
    if num_seeds < 1:
        raise ValueError(f"seeds={num_seeds}: must be >= 1")
    return [config.seed + i for i in range(num_seeds)]


def stack(states: Sequence[Any]) -> Any:
    """Single-seed pytrees stacked on a new leading seed axis."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def unstack(state: Any, index: int) -> Any:
    """Seed ``index`` of a stacked pytree."""
    return jax.tree.map(lambda x: x[index], state)


class _SeedSlice:
    """What the learner of one seed sees of a shared host env: its spec and its envs' count.

    The learner (the agent) reads ``spec`` and ``num_envs`` only; the shared env is stepped by
    ``SeedsTrainer``'s own rollout, never through this view.
    """

    def __init__(self, spec: EnvSpec, num_envs: int) -> None:
        self.spec = spec
        self.num_envs = num_envs

    def reset(self, key: jax.Array) -> tuple[PyTree, jax.Array]:
        raise NotImplementedError("a seed's slice of a shared host env is not stepped alone")

    def step(self, state: PyTree, action: jax.Array, key: jax.Array) -> StepResult:
        raise NotImplementedError("a seed's slice of a shared host env is not stepped alone")

    def close(self) -> None:
        """Nothing to close: the shared env belongs to the ``SeedsTrainer``."""


class SharedHostEnv:
    """A host env of ``num_seeds x per_seed`` envs, reset and stepped per seed slice.

    An exception of its reset or step is marked and kept as ``HostEnv`` keeps its own: it
    keeps errors as the env protocol says (``take_error``, ``batchppo.core.env.KeepsErrors``),
    which ``batchppo.core.env.raise_env_error`` reads. Its host calls are the ``HostEnv``'s
    (``HostEnv.host_call``).

    Args:
        env: The [`HostEnv`][batchppo.backends.HostEnv] of all seeds' envs.
        num_seeds: Number of seeds; env ``j`` of seed ``s`` is row ``s * per_seed + j``.
    """

    def __init__(self, env: Any, num_seeds: int) -> None:
        if env.num_envs % num_seeds:
            raise ValueError(f"{env.num_envs} envs do not split into {num_seeds} seeds")
        self.env = env
        self.num_seeds = num_seeds
        self.per_seed = env.num_envs // num_seeds
        self.spec: EnvSpec = env.spec
        n = env.num_envs
        obs = spaces.structs(self.spec.obs_space, (n,))
        flag = jax.ShapeDtypeStruct((n,), jnp.bool_)
        self._obs_struct = obs
        self._step_structs = (obs, jax.ShapeDtypeStruct((n,), jnp.float32), flag, flag, obs)
        self._error: Exception | None = None  # the last exception of _host_reset, untaken

    def take_error(self) -> Exception | None:
        """The exception the last failed host reset or step raised, if not taken yet."""
        error, self._error = self._error, None
        return self.env.take_error() or error  # the step's is kept by the HostEnv

    def _host_reset(self, seeds: np.ndarray) -> np.ndarray:
        try:
            return self._reset_seeds(seeds)
        except Exception as error:
            mark_env_error(error)
            self._error = error
            raise

    def _reset_seeds(self, seeds: np.ndarray) -> np.ndarray:
        # Env j of seed s gets what a separate run's reset(seed=seeds[s]) gives its env j.
        per_env = [int(s) + j for s in np.asarray(seeds) for j in range(self.per_seed)]
        obs, _ = self.env.vector_env.reset(seed=per_env)
        obs = spaces.cast(self.spec.obs_space, obs)
        if not all(np.isfinite(x).all() for x in spaces.flatten(self.spec.obs_space, obs)):
            raise ValueError("SharedHostEnv: non-finite observation after reset")
        return obs

    def _split(self, tree: PyTree) -> PyTree:
        return jax.tree.map(
            lambda x: x.reshape((self.num_seeds, self.per_seed, *x.shape[1:])), tree
        )

    def reset(self, keys: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Resets every seed's envs from its key (as ``HostEnv.reset``); returns the env states
        ``(S,)`` and obs ``(S, B, ...)``."""
        seeds = jax.vmap(self.env.seed_from_key)(keys)
        start = jnp.zeros((self.num_seeds,), jnp.int32)
        state, obs = self.env.host_call(self._host_reset, self._obs_struct, start, seeds)
        return state, self._split(obs)

    def step(self, state: jax.Array, action: jax.Array) -> StepResult:
        """Steps all envs on actions ``(S, B, ...)``; every leaf comes back as ``(S, B, ...)``."""
        flat = jax.tree.map(
            lambda a, leaf: a.reshape((-1, *a.shape[2:])).astype(leaf.dtype),
            action,
            self.spec.action_space,
        )
        state, results = self.env.host_call(self.env.host_step, self._step_structs, state, flat)
        return self.env.step_result(state, tuple(self._split(x) for x in results))


def _seeds_rollout(
    env: SharedHostEnv, agent: Agent, ts: Any, ss: SimState
) -> tuple[SimState, Transition, EpisodeStats]:
    """``rollout`` of every seed over the shared env; outputs ``(S, T, B, ...)``."""
    seed_act = jax.vmap(functools.partial(act, agent.policy_fn))
    seed_advance = jax.vmap(advance)
    params = agent.acting_params(ts)

    def body(ss: SimState, _: None) -> tuple[SimState, tuple[Transition, EpisodeStats]]:
        action, extras, carry, key, _ = seed_act(params, ss)
        res = env.step(ss.env_state, action)
        ss, transition, stats = seed_advance(ss, action, extras, carry, key, res)
        return ss, (transition, stats)

    ss, (traj, stats) = lax.scan(body, ss, None, length=agent.T)
    seed_first = functools.partial(jnp.swapaxes, axis1=0, axis2=1)
    return ss, jax.tree.map(seed_first, traj), jax.tree.map(seed_first, stats)


class SeedsTrainer:
    """The [`Trainer`][batchppo.algorithms.training.trainer.Trainer] of ``num_seeds`` seeds at once.

    States carry a leading seed axis; keys are one raw key per seed, stacked. Iterations
    donate their input states as ``Trainer``'s do (over host envs the sim state only).

    Args:
        config: The config shared by the seeds; seed ``i`` is ``config.seed + i``.
        num_seeds: Number of seeds (>= 1).
        make_agent: ``(config, env) -> Agent``, the algorithm's pure functions.
    """

    def __init__(
        self, config: Any, num_seeds: int, make_agent: Callable[[Any, Env], Agent]
    ) -> None:
        if config.host_loop:
            warnings.warn(
                "host_loop=True is not used with several seeds: their host envs are stepped "
                "inside the compiled iteration (the same results); set host_loop=false to "
                "silence this",
                stacklevel=2,
            )
        if config.devices not in (None, 1):
            raise ValueError(
                f"devices={config.devices}: several seeds train on one device (vmapped); set "
                "devices=1 (or None), or train the seeds as separate runs"
            )
        self.config = config
        self.seeds = seeds_of(config, num_seeds)
        self.num_seeds = num_seeds
        self.fused = get_backend(config.backend).fused
        self.shared: SharedHostEnv | None = None
        if self.fused:
            env: Env = make_run_env(config, config.num_agents)
            seed_env: Any = env
        else:
            host = make_run_env(config, num_seeds * config.num_agents)
            self.shared = SharedHostEnv(host, num_seeds)
            seed_env = _SeedSlice(host.spec, config.num_agents)
        self.env = seed_env
        self.spec: EnvSpec = seed_env.spec
        self.agent = make_agent(config, seed_env)
        # The single-seed programs of a Trainer over this seed's env view: evaluation (its
        # eval env is its own; each evaluation reseeds it, so one serves every seed), and the
        # training of seeds that take turns (seed_after_seed, below).
        single = dataclasses.replace(config, host_loop=False, devices=1)
        self._single = Trainer(single, make_agent, env=seed_env)
        self._init_program = Program("init", self._build_init, owner="SeedsTrainer")
        self._init_sim_program = Program("init_sim", self._build_init_sim, owner="SeedsTrainer")
        self._iteration_program = Program("iteration", self._build_iteration, owner="SeedsTrainer")
        # XLA's CPU backend runs a convolution vmapped over seeds (a kernel per seed) slower
        # than the seeds' convolutions one after another (``bench/many_seeds.py``), so where
        # the agent unrolls its update for a CNN on the CPU, the seeds take turns in the
        # single-seed program instead of sharing a vmapped one.
        unrolled = bool(getattr(self.agent, "unroll_update", False))
        self.seed_after_seed: bool = self.fused and unrolled
        """Whether the seeds run one after another through the single-seed programs (init,
        fresh episodes, iteration), rather than vmapped: fused backends whose agent unrolls
        its update."""

    @property
    def steps_per_iteration(self) -> int:
        """Env steps of one seed in one iteration."""
        return self.agent.T * self.config.num_agents

    @property
    def num_iterations(self) -> int:
        """Iterations needed for ``config.steps`` (per seed)."""
        return self.agent.num_iterations

    def _build_init(self) -> Callable:
        return jax.jit(jax.vmap(self.agent.init))

    def _build_init_sim(self) -> Callable:
        agent = self.agent
        return jax.jit(jax.vmap(lambda key: agent.init_sim(key)) if self.fused else self._init_sim)

    def _build_iteration(self) -> Callable:
        fn = jax.vmap(self.agent.iteration) if self.fused else self._iteration
        donate = iteration_donation(self.fused)
        options = hot_compiler_options(self._single.xla_convolutions)
        return jax.jit(fn, donate_argnums=donate, compiler_options=options)

    def _init_sim(self, keys: jax.Array) -> SimState:
        assert self.shared is not None
        key_reset, key_next = jax.vmap(jax.random.split, out_axes=1)(keys)
        env_state, obs = self.shared.reset(key_reset)
        S, B = self.num_seeds, self.config.num_agents
        carry = jax.vmap(lambda _: self.agent.initial_carry(B))(jnp.arange(S))
        ss = SimState(
            env_state=env_state,
            obs=obs,
            first=jnp.ones((S, B), jnp.bool_),
            policy_carry=carry,
            score=jnp.zeros((S, B), jnp.float32),
            length=jnp.zeros((S, B), jnp.int32),
            key=key_next,
        )
        return jax.tree.map(strong, ss)

    def _iteration(self, ts: Any, ss: SimState) -> tuple[Any, SimState, dict]:
        assert self.shared is not None
        ss, traj, stats = _seeds_rollout(self.shared, self.agent, ts, ss)
        ts, metrics = jax.vmap(self.agent.learn)(ts, traj, stats)
        return ts, ss, metrics

    # --- the Trainer interface, over stacked states ------------------------------------------

    def _keys(self, keys: Any) -> jax.Array:
        keys = jnp.stack([raw_key(jnp.asarray(k)) for k in keys])
        if keys.shape[0] != self.num_seeds:
            raise ValueError(f"{keys.shape[0]} keys for {self.num_seeds} seeds")
        return keys

    def init(self, keys: Any) -> Any:
        """Fresh states of every seed, stacked; ``keys``: one key per seed."""
        if self.seed_after_seed:
            return stack([self._single.init(key) for key in self._keys(keys)])
        return self._init_program(self._keys(keys))

    @contextlib.contextmanager
    def _env_errors(self) -> Iterator[None]:
        """Raises the exception a host env (training or eval) kept in place of JAX's."""
        try:
            yield
        except Exception as error:
            raise_env_error(error, self.shared, self._single.eval_env)
            raise

    def init_sim(self, train_state: Any, keys: Any) -> SimState:
        """Fresh episodes for every seed (as each seed's ``Trainer.init_sim``).

        Raises:
            Exception: A host env's own exception (as ``Trainer.init_sim``).
        """
        del train_state
        if self.seed_after_seed:
            return stack([self._single.init_sim(None, key) for key in self._keys(keys)])
        with self._env_errors():
            return self._init_sim_program(self._keys(keys))

    def iteration(
        self, train_state: Any, sim_state: SimState
    ) -> tuple[Any, SimState, list[dict[str, float]]]:
        """One collection + update of every seed in one compiled call (or, where
        ``seed_after_seed``, one call of the single-seed program per seed).

        Returns:
            ``(train_state, sim_state, metrics)`` with one metrics dict per seed (each with its
            seed's ended episodes, as ``Trainer.iteration``); with env restarts on, each carries
            the shared envs' running total ``env_restarts``.

        Raises:
            Exception: A host env's own exception (as ``Trainer.iteration``); ``train_state``
                is then still valid.
        """
        if self.seed_after_seed:
            return self._iteration_seed_after_seed(train_state, sim_state)
        with self._env_errors():
            ts, ss, metrics = self._iteration_program(train_state, sim_state)
            fetched, steps = jax.device_get((metrics, ts.step))
        per_seed = [host_metrics(fetched, i, int(steps[i])) for i in range(self.num_seeds)]
        restarts = self.env_restarts
        if restarts is not None:
            for m in per_seed:
                m["env_restarts"] = float(restarts)
        return ts, ss, per_seed

    def _iteration_seed_after_seed(
        self, train_state: Any, sim_state: SimState
    ) -> tuple[Any, SimState, list[dict[str, float]]]:
        """``iteration`` as one single-seed iteration per seed (``seed_after_seed``)."""
        runs = [
            self._single.iteration(unstack(train_state, i), unstack(sim_state, i))
            for i in range(self.num_seeds)
        ]
        states, sims, metrics = zip(*runs, strict=True)
        return stack(states), stack(sims), list(metrics)

    @property
    def env_restarts(self) -> int | None:
        """Env restarts so far in the shared training env and the eval env; None for
        backends that cannot restart envs."""
        counts = [
            getattr(env, "restarts", None)
            for env in (self.shared.env if self.shared else None, self._single.eval_env)
        ]
        counts = [count for count in counts if count is not None]
        return sum(counts) if counts else None

    def evaluate(
        self,
        train_state: Any,
        num_episodes: int,
        key: jax.Array,
        task_metrics: bool = False,
        sample: bool = False,
    ) -> dict:
        """Evaluates one seed's (unstacked) state, as ``Trainer.evaluate`` does (an eval
        env's exception included)."""
        return self._single.evaluate(train_state, num_episodes, key, task_metrics, sample)

    def policy(self, train_state: Any, deterministic: bool = True) -> Callable:
        """One seed's (unstacked) policy on the host, as ``Trainer.policy``."""
        return self._single.policy(train_state, deterministic)

    def close(self) -> None:
        """Closes the shared env and the eval env."""
        self._single.close()
        if self.shared is not None:
            self.shared.env.close()
            self.shared = None
