"""The trainer of a run, for any agent: the object API the experiment's driver iterates.

An algorithm supplies an *agent* ([`Agent`][batchppo.algorithms.training.trainer.Agent]): pure,
jittable functions over its own train state (``init``, ``init_sim``, ``iteration``, ``learn``, a
sampling and a deterministic policy). [`Trainer`][batchppo.algorithms.training.trainer.Trainer]
compiles and runs them:

* ``iteration`` is one compiled call (rollout + update) for every backend: pure-JAX envs fuse with
  the learner, host envs (Gymnasium in processes) enter the same compiled rollout through
  ``io_callback`` ([`HostEnv`][batchppo.backends.HostEnv]). ``iterations(n)`` runs ``n`` of them in
  one ``lax.scan``. With ``host_loop`` the host envs are stepped instead from a Python loop around
  the compiled policy ([`HostLoop`][batchppo.backends.HostLoop]), and the update (``agent.learn``)
  is one compiled call.
* ``precompile`` compiles a run's programs side by side in the background (``programs``), which
  halves a cold start on CPU.
* With several JAX devices and a pure-JAX backend, the programs run data-parallel over all of them
  (``config.devices``; ``sharding``).
* ``evaluate`` and ``policy`` run the deterministic policy in an eval env and on the host
  (``evaluation``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from batchppo.algorithms.training.episodes import ENDED, ended_episodes
from batchppo.algorithms.training.evaluation import Evaluator, HostPolicy
from batchppo.algorithms.training.programs import (
    Compiler,
    Program,
    cold_compiler_options,
    env_check,
    env_compiler_options,
    hot_compiler_options,
    iteration_donation,
    resolve_host_loop,
    resolve_xla_convolutions,
)
from batchppo.algorithms.training.sharding import Sharding, learner_devices
from batchppo.backends import get_backend, make_env
from batchppo.core.env import Env, EnvSpec, raise_env_error
from batchppo.core.keys import key_data_aval, raw_key
from batchppo.core.simulation import rollout
from batchppo.core.types import EpisodeStats, SimState, Transition

if TYPE_CHECKING:
    from batchppo.backends.host_loop import HostLoop

PyTree = Any


class Agent(Protocol):
    """What [`Trainer`][batchppo.algorithms.training.trainer.Trainer] needs of an algorithm: pure
    functions over its train state.

    The train state is the algorithm's own pytree; it must have a ``step`` counter (env steps
    so far), which the experiment loop reads. ``T`` is the rollout length of one iteration.
    ``minibatch_sharding`` is set by the trainer over a device mesh (None on one device); an
    agent that shuffles its batch into minibatches constrains them with it.
    """

    env: Env
    spec: EnvSpec
    T: int
    num_iterations: int
    minibatch_sharding: jax.sharding.Sharding | None

    def init(self, key: jax.Array) -> Any: ...
    def init_sim(self, key: jax.Array, env: Env | None = None) -> SimState: ...
    def iteration(self, ts: Any, ss: SimState) -> tuple[Any, SimState, dict]: ...
    def learn(self, ts: Any, traj: Transition, stats: EpisodeStats) -> tuple[Any, dict]: ...
    def acting_params(self, ts: Any) -> PyTree: ...
    def initial_carry(self, batch: int) -> PyTree: ...
    def policy_fn(self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array,
                  key: jax.Array) -> tuple[jax.Array, dict, PyTree]: ...  # fmt: skip
    def mode_fn(self, params: PyTree, carry: PyTree, obs: jax.Array, first: jax.Array,
                key: jax.Array) -> tuple[jax.Array, dict, PyTree]: ...  # fmt: skip


def make_run_env(config: Any, num_envs: int, env_kwargs: Mapping[str, Any] | None = None) -> Env:
    """The env of a run's config: ``num_envs`` envs of ``config.env`` on ``config.backend``,
    with its ``backend_options`` as the one object they were parsed into
    (``parsed_backend_options``), seeded by the key of their first ``reset``.

    Args:
        config: The run's config.
        num_envs: Batch size.
        env_kwargs: The env's keywords; None: ``config.env_kwargs``.
    """
    return make_env(
        config.env,
        num_envs,
        config.backend,
        max_length=config.max_length,
        normalize_ranges=config.normalize_ranges,
        env_kwargs=config.env_kwargs if env_kwargs is None else env_kwargs,
        options=config.parsed_backend_options,
        run_options=get_backend(config.backend).run_settings(config),
    )


def _eval_env_kwargs(config: Any) -> dict[str, Any]:
    """The evaluation env's constructor arguments: ``config.eval_env_kwargs`` over
    ``config.env_kwargs`` (the Atari presets' whole games)."""
    return {**config.env_kwargs, **config.eval_env_kwargs}


def eval_env_config(config: Any) -> Any:
    """``config`` with the evaluation env's constructor arguments as its ``env_kwargs``:
    ``config.eval_env_kwargs`` over ``config.env_kwargs`` (the Atari presets' whole games).
    ``batchppo visualize`` builds its envs from it."""
    return dataclasses.replace(config, env_kwargs=_eval_env_kwargs(config))


def make_run_eval_env(config: Any, num_envs: int) -> Env:
    """The evaluation env of a run's config: ``make_run_env`` with ``config.eval_env_kwargs`` over
    ``config.env_kwargs``, and the same options object as the training env's."""
    return make_run_env(config, num_envs, _eval_env_kwargs(config))


def strong(x: Any) -> Any:
    """``x`` with a strong dtype where it is a weakly typed array (else ``x``).

    Some envs reset to weakly typed arrays and step to strong ones; a sim state made of
    strong types keeps a compiled iteration from being compiled a second time.
    """
    if isinstance(x, jax.Array) and getattr(x, "weak_type", False):
        return x.astype(x.dtype)
    return x


def mean_where(x: jax.Array, w: jax.Array) -> jax.Array:
    """Mean of ``x`` weighted by ``w``; nan where ``w`` sums to 0."""
    n = w.sum()
    return jnp.where(n > 0, (x * w).sum() / jnp.maximum(n, 1), jnp.nan)


def episode_metrics(stats: EpisodeStats) -> dict[str, Any]:
    """Count and means of the episodes that ended in a rollout (nan means when none did), and
    the rollout's ``stats`` themselves under ``ENDED``, from which the trainer lists each
    episode on the host (``episodes``)."""
    done = stats.done.astype(jnp.float32)
    return {
        "episodes": done.sum(),
        "score": mean_where(stats.score, done),
        "length": mean_where(stats.length.astype(jnp.float32), done),
        ENDED: stats,
    }


def scan_iterations(agent: Agent, n: int, keep_ended: bool = True) -> Callable:
    """``n`` training iterations under one ``lax.scan``; metrics stacked per iteration.

    Args:
        agent: The agent whose ``iteration`` is scanned.
        n: Iterations.
        keep_ended: Keep the per-step episode stats (``ENDED``) among the stacked metrics;
            False leaves them out of the program (a whole run's worth, as ``make_train``).
    """

    def many(ts: Any, ss: SimState) -> tuple[Any, SimState, dict]:
        def body(carry: tuple[Any, SimState], _: None) -> tuple[Any, dict]:
            ts, ss, metrics = agent.iteration(*carry)
            if not keep_ended:
                metrics = {k: v for k, v in metrics.items() if k != ENDED}
            return (ts, ss), metrics

        (ts, ss), metrics = lax.scan(body, (ts, ss), None, length=n)
        return ts, ss, metrics

    return many


def host_metrics(fetched: dict[str, Any], index: int | None, end_step: int) -> dict[str, Any]:
    """One iteration's metrics on the host, from metrics fetched by ``jax.device_get``.

    Args:
        fetched: The metrics of one call: numpy scalars, or arrays stacked on a leading axis
            (the iterations of a scan, or the seeds of a ``SeedsTrainer``).
        index: This iteration's place on that axis; None: not stacked.
        end_step: The run's env step after this iteration.

    Returns:
        The scalar metrics as Python floats, and ``ENDED`` (where the agent reports it) as the
        iteration's ``EndedEpisodes``.
    """

    def pick(x: Any) -> Any:
        return x if index is None else x[index]

    out: dict[str, Any] = {}
    for key, value in fetched.items():
        if key == ENDED:
            out[key] = ended_episodes(jax.tree.map(pick, value), end_step)
        else:
            out[key] = float(pick(value))
    return out


class Trainer:
    """The object API of a run (used by the experiment loop), over an algorithm's agent.

    Examples:
        One iteration and an evaluation of a run's ``config`` (each compiles a program: the docs
        test skips them):

        >>> trainer = Trainer(config, PPO)  # doctest: +SKIP
        >>> ts = trainer.init(jax.random.key(config.seed))  # doctest: +SKIP
        >>> ss = trainer.init_sim(ts, jax.random.key(1))  # doctest: +SKIP
        >>> ts, ss, metrics = trainer.iteration(ts, ss)  # doctest: +SKIP
        >>> trainer.evaluate(ts, 10, jax.random.key(2))["score"]  # doctest: +SKIP

    Note: ``iteration``/``iterations`` donate their input states (the arrays are reused in
    place); keep using the returned states, not the ones passed in. Over host envs they
    donate the sim state only, so the train state passed to an iteration that an env error
    stopped stays valid (the experiment loop checkpoints it).

    With several devices (``config.devices``, default all, pure-JAX backends) the init, env reset
    and training programs run over a 1-D mesh: the sim state's envs sharded, the train state
    replicated (``sharding``; ``batchppo.algorithms.training.sharding``). Evaluation and ``policy``
    run on one device.

    An exception of a host env (its own, re-raised by ``BatchEnv`` with the worker's traceback, or
    ``WorkerDiedError``) reaches the caller of ``init_sim``, ``iteration``, ``iterations`` and
    ``evaluate`` as itself, not as the ``JaxRuntimeError`` of the compiled call it happened in
    (``batchppo.core.env.raise_env_error``, through the env protocol's ``take_error``).

    Args:
        config: The run's config (an algorithm's config with the run-level fields: env,
            backend, num_agents, seed, max_length, eval_max_steps, devices, host_loop...).
        make_agent: ``(config, env) -> Agent``, the algorithm's pure functions.
        env: Optional prebuilt training env (tests); built from the config otherwise.
    """

    def __init__(
        self, config: Any, make_agent: Callable[[Any, Env], Agent], env: Env | None = None
    ) -> None:
        self.config = config
        self.env = env if env is not None else make_run_env(config, config.num_agents)
        self.spec: EnvSpec = self.env.spec
        self.agent = make_agent(config, self.env)
        self.fused = get_backend(config.backend).fused
        self.xla_convolutions: bool = resolve_xla_convolutions(
            config.xla_convolutions, self.spec.obs_space, getattr(config, "image_encoding", "auto")
        )
        """Whether the hot programs keep convolutions on XLA's own kernels
        (``config.xla_convolutions``)."""
        self._hot_options = env_compiler_options(
            hot_compiler_options(self.xla_convolutions), self.env
        )
        self._host_loop: HostLoop | None = None
        backend = get_backend(config.backend)
        loop_envs = backend.host and not backend.steps_in_program(config.parsed_backend_options)
        if resolve_host_loop(config.host_loop, host=loop_envs):
            from batchppo.backends.host_loop import HostLoop

            self._host_loop = HostLoop(self.env, self.agent.policy_fn, self._hot_options)
        self._compiler = Compiler()
        self._evaluator = Evaluator(
            make_env=lambda n: make_run_eval_env(config, n),
            init_sim=lambda key, env: self.agent.init_sim(key, env),
            act=self.agent.mode_fn,
            sample_act=self.agent.policy_fn,
            max_envs=config.num_agents,
            max_length=config.max_length,
            max_steps=config.eval_max_steps,
            compiler=self._compiler,
        )
        self._key_aval = key_data_aval()
        # Several devices: the programs run data-parallel over a 1-D mesh (sharding.py);
        # one device: no mesh, the unsharded programs.
        devices = learner_devices(config)
        self.sharding: Sharding | None = None
        self._ts_sharding: PyTree = None
        self._ss_sharding: PyTree = None
        if len(devices) > 1:
            self.sharding = Sharding(devices, self.env.num_envs)
            self.agent.minibatch_sharding = self.sharding.minibatches
            self._ts_sharding = self.sharding.train_state(
                jax.eval_shape(self.agent.init, self._key_aval)
            )
            self._ss_sharding = self.sharding.sim_state(
                jax.eval_shape(lambda key: self.agent.init_sim(key), self._key_aval)
            )
        self._init_program = Program("init", self._build_init)
        self._init_sim_program = Program("init_sim", self._build_init_sim)
        self._learn_program = Program("learn", self._build_learn)
        self._iterations_programs: dict[int, Program] = {}

    @property
    def num_devices(self) -> int:
        """Devices the training iteration runs on (data-parallel when more than one)."""
        return 1 if self.sharding is None else self.sharding.num_devices

    @property
    def host_loop(self) -> HostLoop | None:
        """The Python loop that collects the rollouts over host envs (``config.host_loop``);
        None where the rollout runs inside the compiled iteration."""
        return self._host_loop

    @property
    def steps_per_iteration(self) -> int:
        """Env steps (summed over envs) collected by one iteration."""
        return self.agent.T * self.env.num_envs

    @property
    def num_iterations(self) -> int:
        """Iterations needed for ``config.steps``."""
        return self.agent.num_iterations

    @property
    def programs(self) -> dict[str, Program]:
        """Every compiled program the trainer holds, by name, for tests and diagnostics.

        ``init``, ``init_sim`` and ``learn`` (the host loop's update) always; ``iterations(n)`` for
        each ``n`` that ``iteration``/``iterations``/``precompile`` asked for; the eval env's
        ``eval_start(envs, chunk)`` and ``eval_more(envs, chunk)`` once an evaluation or
        ``precompile`` made them (another eval env's size replaces them). Each program's ``stage``
        says whether it is unbuilt, compiling in the background, precompiled or jitted. A new dict
        each call: reading it builds nothing.
        """
        programs = [self._init_program, self._init_sim_program, self._learn_program]
        programs += self._iterations_programs.values()
        return {p.name: p for p in programs} | self._evaluator.programs

    @property
    def eval_env(self) -> Env | None:
        """The eval env, once an evaluation (or ``precompile``) built it."""
        return self._evaluator.env

    def _place(self, train_state: Any, sim_state: SimState) -> tuple[Any, SimState]:
        """The states laid out over the mesh (a restored checkpoint comes on one device); a
        no-op without a mesh or where they are laid out already."""
        if self.sharding is None:
            return train_state, sim_state
        return (
            self.sharding.put(train_state, self._ts_sharding),
            self.sharding.put(sim_state, self._ss_sharding),
        )

    def _one_device(self, tree: PyTree) -> PyTree:
        """A replicated pytree as one local device's copy: evaluation and deployment run
        unsharded on one device."""
        if self.sharding is None:
            return tree
        return jax.tree.map(
            lambda x: x.addressable_data(0) if isinstance(x, jax.Array) else x, tree
        )

    # --- compiled programs ------------------------------------------------------------------
    # Over a mesh, programs that make states lay them out; on one device, no shardings.

    def _build_init(self) -> Callable:
        placed = {} if self.sharding is None else {"out_shardings": self._ts_sharding}
        return jax.jit(self.agent.init, compiler_options=cold_compiler_options(), **placed)

    def _build_init_sim(self) -> Callable:
        placed = {} if self.sharding is None else {"out_shardings": self._ss_sharding}
        agent = self.agent
        return jax.jit(
            lambda key: agent.init_sim(key), compiler_options=cold_compiler_options(), **placed
        )

    def _build_learn(self) -> Callable:
        return jax.jit(self.agent.learn, donate_argnums=(0,), compiler_options=self._hot_options)

    def _iterations_program(self, n: int) -> Program:
        """``n`` training iterations in one compiled call (``lax.scan`` for ``n > 1``)."""
        if n not in self._iterations_programs:

            def build() -> Callable:
                agent = self.agent
                fn = agent.iteration if n == 1 else scan_iterations(agent, n)
                donate = iteration_donation(self.fused)
                if self.sharding is not None:
                    states = (self._ts_sharding, self._ss_sharding)
                    return jax.jit(
                        fn,
                        in_shardings=states,
                        out_shardings=(*states, self.sharding.replicated),
                        donate_argnums=donate,
                        compiler_options=self._hot_options,
                    )
                return jax.jit(fn, donate_argnums=donate, compiler_options=self._hot_options)

            name = f"iterations({n})"
            self._iterations_programs[n] = Program(name, build, check=env_check(self.env))
        return self._iterations_programs[n]

    def precompile(
        self,
        iterations: Sequence[int] = (1,),
        eval_episodes: int | None = None,
        eval_sample: bool = False,
    ) -> None:
        """Starts compiling the run's programs in background threads and returns at once.

        Start-up of a fresh process is mostly XLA compilation (seconds on CPU). Tracing runs
        here, in order (init, env reset, the training programs, then evaluation); the XLA
        compilations run side by side, and overlap with whatever the caller does next, but
        those of the eval programs start once the others have ended
        (``Compiler.after_earlier``), so that the first iteration waits on its own only. Each
        program waits for its own compilation when first called. Calling programs that were
        not precompiled compiles them on first use, as usual.

        Args:
            iterations: The ``n`` of the ``iterations(n)`` calls to come (1: ``iteration``).
            eval_episodes: The ``num_episodes`` of the ``evaluate`` calls to come; None skips.
            eval_sample: Their ``sample``.
        """
        counts = sorted({int(n) for n in iterations}, reverse=True)
        if counts and counts[-1] < 1:
            raise ValueError(f"precompile: iterations={counts[-1]} must be >= 1")
        key, compiler = self._key_aval, self._compiler
        # Lowering runs here, on one core; each compilation starts as soon as its program is
        # lowered, so the small ones fill the other core while the training iteration (the
        # longest compilation by far) is lowered. The eval programs, first needed at the first
        # evaluation, are lowered while the training programs compile and compile after them:
        # the first iteration waits on its own compilation only.
        ts = self._init_program.precompile(compiler, key)
        ss = self._init_sim_program.precompile(compiler, key)
        if self._host_loop is not None:  # the loop's own steps compile on first use
            traj, stats = jax.eval_shape(self._rollout_shapes, ts, ss)
            self._learn_program.precompile(compiler, ts, traj, stats)
        else:
            for n in counts:
                self._iterations_program(n).precompile(compiler, ts, ss)
        if eval_episodes:
            params = self.agent.acting_params(ts)
            if self.sharding is not None:  # evaluation runs on one device
                params = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), params)
            with compiler.after_earlier():
                self._evaluator.precompile(eval_episodes, params, key, eval_sample)

    def _rollout_shapes(self, ts: Any, ss: SimState) -> tuple[Transition, EpisodeStats]:
        params = self.agent.acting_params(ts)
        _, traj, stats = rollout(self.env, self.agent.policy_fn, params, ss, self.agent.T)
        return traj, stats

    # --- training -----------------------------------------------------------------------------

    def init(self, key: jax.Array) -> Any:
        """A fresh train state (parameters from ``key``)."""
        return self._init_program(raw_key(key))

    def init_sim(self, train_state: Any, key: jax.Array) -> SimState:
        """Fresh episodes in the training env (start of a run and after resume)."""
        del train_state
        try:
            return self._init_sim_program(raw_key(key))
        except Exception as error:
            self._raise_env_error(error)
            raise

    def _raise_env_error(self, error: Exception) -> None:
        """Raises the host env exception that ``error`` (JAX's runtime error) carries, if any
        (the envs keep it: ``batchppo.core.env.KeepsErrors``)."""
        raise_env_error(error, self.env, self._evaluator.env)

    def iteration(self, train_state: Any, sim_state: SimState) -> tuple[Any, SimState, dict]:
        """One collection + update, one compiled call.

        Returns the metrics as Python floats, and under ``ENDED`` the episodes that ended
        (an [`EndedEpisodes`][batchppo.algorithms.training.episodes.EndedEpisodes]) where the agent
        reports them (``episode_metrics``); the states and metrics come in one transfer.

        With ``host_loop``, the collection is a Python loop
        ([`HostLoop`][batchppo.backends.HostLoop]) and the update one compiled call.

        Raises:
            Exception: A host env's own exception (see the class docstring); ``train_state``
                is then still valid.
        """
        try:
            if self._host_loop is None:
                train_state, sim_state = self._place(train_state, sim_state)
                ts, ss, metrics = self._iterations_program(1)(train_state, sim_state)
            else:
                params = self.agent.acting_params(train_state)
                ss, traj, stats = self._host_loop.rollout(params, sim_state, self.agent.T)
                ts, metrics = self._learn_program(train_state, traj, stats)
            fetched, step = jax.device_get((metrics, ts.step))
            return ts, ss, self._with_env_metrics([host_metrics(fetched, None, int(step))], ss)[0]
        except Exception as error:
            self._raise_env_error(error)
            raise

    def iterations(
        self, train_state: Any, sim_state: SimState, n: int
    ) -> tuple[Any, SimState, list[dict[str, float]]]:
        """``n`` iterations in one compiled ``lax.scan`` (one host sync for all of them), or as
        ``n`` calls of [`iteration`][batchppo.algorithms.training.trainer.Trainer.iteration] where
        the rollout is a host loop or the agent compiles its update unrolled (``unroll_update``: a
        scan around it would be a loop).

        Returns:
            ``(train_state, sim_state, metrics)`` with one metrics dict per iteration.
        """
        n = int(n)
        if n < 1:
            raise ValueError(f"iterations: n={n} must be >= 1")
        if n == 1 or self._host_loop is not None or getattr(self.agent, "unroll_update", False):
            metrics = []
            for _ in range(n):
                train_state, sim_state, m = self.iteration(train_state, sim_state)
                metrics.append(m)
            return train_state, sim_state, metrics
        try:
            train_state, sim_state = self._place(train_state, sim_state)
            ts, ss, metrics = self._iterations_program(n)(train_state, sim_state)
            fetched, step = jax.device_get((metrics, ts.step))
        except Exception as error:
            self._raise_env_error(error)
            raise
        per_step = self.steps_per_iteration
        per_iteration = [
            host_metrics(fetched, i, int(step) - (n - 1 - i) * per_step) for i in range(n)
        ]
        return ts, ss, self._with_env_metrics(per_iteration, ss)

    @property
    def env_restarts(self) -> int | None:
        """Env restarts so far in the training and eval envs (``backend_options.max_restarts``);
        None for backends that cannot restart envs (pure-JAX ones)."""
        counts = [getattr(env, "restarts", None) for env in (self.env, self._evaluator.env)]
        counts = [count for count in counts if count is not None]
        return sum(counts) if counts else None

    def _with_env_metrics(
        self, metrics: list[dict[str, Any]], sim_state: SimState
    ) -> list[dict[str, Any]]:
        """The metrics of the iterations of one call, with what the training env reports on the
        host: ``env_restarts`` (a running total) where the envs count restarts, and for Atari
        envs ``games`` and ``game_score``, the count and mean raw score (all lives, rewards
        unclipped; nan when none) of the games that ended: all of the call's games are the
        last iteration's (the others report 0 and nan; their scores go to its ``ENDED``), as
        the env tells them once. Envs stepped in the program keep their games in their state:
        ``take_games`` reads them off ``sim_state``'s env state, the call's last."""
        restarts = self.env_restarts
        if restarts is not None:
            for m in metrics:
                m["env_restarts"] = float(restarts)
        if getattr(self.env, "reports_games", False):
            scores = self.env.take_games(sim_state.env_state)
            for m in metrics:
                m.update(games=0.0, game_score=float("nan"))
            if len(scores):
                metrics[-1].update(games=float(len(scores)), game_score=float(np.mean(scores)))
                if ENDED in metrics[-1]:
                    metrics[-1][ENDED] = dataclasses.replace(metrics[-1][ENDED], games=scores)
        return metrics

    # --- evaluation and deployment ----------------------------------------------------------

    def evaluate(
        self,
        train_state: Any,
        num_episodes: int,
        key: jax.Array,
        task_metrics: bool = False,
        sample: bool = False,
    ) -> dict:
        """Runs the deterministic policy in a separate eval env of the same backend.

        Episodes are taken fairly: ``min(num_episodes, num_agents)`` envs run until each has
        finished enough episodes, and the first episodes of each env are kept (no bias towards
        short episodes). The first ``max_length`` steps (reset included) are one compiled
        call, which suffices when every episode ends within the time limit.

        Each env runs at most ``config.eval_max_steps`` steps: an episode still running then
        is cut and kept with its return and length so far, ``"cut"`` counts such episodes
        among those returned, and a ``RuntimeWarning`` says how many were cut.

        Args:
            train_state: The state whose params (and observation statistics) act.
            num_episodes: Episodes to collect (>= 1).
            key: PRNG key of the env resets.
            task_metrics: Also record each episode's info summary (``"infos"``; host
                backends: their steps then carry infos), see ``Evaluator.evaluate``.
            sample: Act with the sampling policy, as training does, instead of the
                deterministic one (the key then also draws the actions).

        Returns:
            ``{"score", "length"}`` means, ``"returns"``, ``"lengths"`` and ``"terminated"``
            arrays (fewer than ``num_episodes`` when an env's episodes were cut), ``"cut"``,
            the number of cut episodes, and with ``task_metrics`` ``"infos"``.

        Raises:
            Exception: An eval env's own exception (see the class docstring).
        """
        params = self._one_device(self.agent.acting_params(train_state))
        try:
            return self._evaluator.evaluate(params, num_episodes, key, task_metrics, sample)
        except Exception as error:
            self._raise_env_error(error)
            raise

    def policy(self, train_state: Any, deterministic: bool = True) -> Callable:
        """A host callable ``obs (B, *obs_shape) -> actions (B, *action_shape)``.

        It normalises observations with the state's statistics where the agent does;
        recurrent policies carry their state across calls (call ``.reset()`` at episode
        starts). Sampling (``deterministic=False``) draws from a key seeded by
        ``config.seed``.
        """
        agent = self.agent
        return HostPolicy(
            agent.mode_fn if deterministic else agent.policy_fn,
            self._one_device(agent.acting_params(train_state)),
            agent.initial_carry,
            self.spec.obs_space,
            self.config.seed,
        )

    def close(self) -> None:
        """Closes the training and evaluation envs (worker processes of host backends)."""
        self._compiler.shutdown()
        close = getattr(self.env, "close", None)
        if close is not None:
            close()
        self._evaluator.close()
