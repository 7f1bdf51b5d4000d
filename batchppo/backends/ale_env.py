"""The ``ale`` backend's envs: ale-py's ``AtariVectorEnv`` under our env API, in two modes.

* [`AleVectorEnv`][batchppo.backends.ale_env.AleVectorEnv] (``mode=host``): a Gymnasium vector
  env in same-step autoreset mode over ``send``/``recv``, handed to the learner as a
  [`HostEnv`][batchppo.backends.HostEnv] like every host batch env (``io_callback`` or the host
  loop).
* [`AleFusedEnv`][batchppo.backends.ale_env.AleFusedEnv] (``mode=fused``): ``reset`` and
  ``step`` as pure functions over a state, calling the XLA FFI targets that
  ``AtariVectorEnv.xla()`` registers, so a whole rollout is one dispatch.

**Autoreset.** ``xla()`` takes only ALE's ``NEXT_STEP`` mode, where an env whose game ended is
reset by the *next* ``step`` call, which ignores that call's action. Both modes run ALE in
``NEXT_STEP`` and turn it into our same-step convention (``batchppo.core.env``) the same way:
step every env, then reset at once the envs whose game ended (a partial reset through ALE's
``reset`` with their indices; fused: the same call in the graph, one FFI reset of all of
them, chosen by a ``lax.switch`` on their count, which calls nothing at the steps where no
game ended, almost all of them). The step's observations are the dense ``final_obs`` (the
last frame stack where a game ended, the continuing one elsewhere) and the reset's, which
report the continuing envs' current stacks unchanged, are ``obs``; so both hold the rule of
``batchppo.envs.final_obs`` by construction, with no copy. The resets pass seed -1: each env
draws its no-ops from its own generator, seeded by the first reset, so host and fused runs
from one key agree step by step.

**Lives.** With the life signal (``AtariStack.episodic_life``, on in the presets) ALE flags
``terminated`` at a lost life and the game goes on (``life_loss_info``; its
``episodic_life`` would restart the game). A step ends the *game* where it is truncated (at
``max_frames`` emulator frames), or terminated without a life lost (lives fell but stay
above 0); only those envs are reset (``game_flags``). ``terminated`` and ``truncated`` are
ALE's, kept apart, but for a life lost at the frame cap's very step, which ALE reports as
``terminated`` and the process backend as ``truncated``, as this backend does.

**Against the process backend's ``preprocess: atari``** (``batchppo.envs.stack.atari``), for the
same seed and actions and no sticky actions: with ``noop_max=0`` and ``fire_reset`` off on both
sides, the newest frame of every observation, the rewards and the terminated/truncated
sequences are equal (``tests/backends/test_ale_env.py``). The differences:

* *At a lost life* the process backend's reset continues the game with one no-op step and
  FIRE (with ``fire_reset``, in games whose action 1 is FIRE) and starts a new frame stack;
  here the frame stack runs on, and the step after the lost life presses FIRE whatever the
  agent's action (``fire_after_life``): one agent step with no effect of its choice, where the
  process backend shows none. A game that waits for FIRE after each life (Breakout) then
  goes on as in the process backend, in training and in the whole-game evaluation alike
  (``fire_on_life_loss``), and a deterministic policy that never chose FIRE there cannot stall
  a game until its frame cap.
* *A reset's frame stack* is padded with zero frames, not with copies of the reset frame.
* *No-ops and FIRE after a reset*: ALE presses FIRE for one frame and then draws
  ``U{0..noop_max-1} - 1`` no-op frames; the process backend draws ``U{1..noop_max}`` no-op
  frames and then steps FIRE for a frame skip. The start states' distributions differ
  slightly; both are seeded by the reset.
* Rewards are clipped here (to their sign, ``clip_rewards``) from ALE's raw rewards, which
  also make the whole-game scores (``take_games``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnasium.vector import AutoresetMode, VectorEnv
from jax.experimental import io_callback

from batchppo.backends.ale import ale_game
from batchppo.backends.host_env import HostEnv, spec_from_spaces, wrap_host_env
from batchppo.core.env import EnvSpec, StepResult
from batchppo.envs.episode_metrics import GameScores
from batchppo.envs.stack.atari import AtariStack, needs_fire

__all__ = [
    "FIRE",
    "GAMES_KEPT_PER_ENV",
    "AleFusedEnv",
    "AleState",
    "AleVectorEnv",
    "atari_stack",
    "check_step_calls",
    "env_seeds",
    "fire_after_life",
    "game_flags",
    "host_env",
    "life_lost",
    "probe",
    "step_calls",
    "vector_kwargs",
]

_SEED_MOD = 2**31 - 1
"""Per-env seeds lie in ``[0, 2**31 - 1)``: ALE takes int32 seeds and -1 means "keep"."""

_NEXT_STEP = AutoresetMode.NEXT_STEP


def atari_stack(env_id: str, max_length: int | None, env_kwargs: Mapping[str, Any]) -> AtariStack:
    """The [`AtariStack`][batchppo.envs.AtariStack] settings of an ``ale`` env's ``env_kwargs``.

    Args:
        env_id: The env id (for messages).
        max_length: Must be None (a step limit would cut games by agent steps; ALE counts
            ``max_frames``).
        env_kwargs: ``{}`` (the ``atari`` defaults) or ``{"preprocess": "atari" |
            "atari_game" | {"name": ..., **settings}}``.

    Raises:
        ValueError: One line: a step limit, another keyword, or another preprocessing.
    """
    from batchppo.envs.make import preprocessing

    if max_length is not None:
        raise ValueError(
            f"{env_id}: max_length={max_length}: the ale backend ends games at "
            "AtariStack.max_frames emulator frames; leave max_length None"
        )
    others = sorted(set(env_kwargs) - {"preprocess"})
    if others:
        raise ValueError(
            f"{env_id}: env_kwargs {others}: the ale backend takes only 'preprocess' (the "
            "Atari preprocessing's settings, e.g. {'name': 'atari', 'noop_max': 30})"
        )
    stack = preprocessing(env_kwargs.get("preprocess", "atari"))
    if not isinstance(stack, AtariStack):
        raise ValueError(
            f"{env_id}: preprocess={env_kwargs.get('preprocess')!r}: the ale backend runs the "
            "Atari preprocessing only (preprocess: atari or atari_game)"
        )
    return stack


def vector_kwargs(stack: AtariStack) -> dict[str, Any]:
    """``AtariVectorEnv``'s keywords for ``stack`` (the module docstring says what differs).

    ALE's own reward clipping stays off: the raw rewards make the game scores, and the
    learner's rewards are clipped from them (``learner_reward``).
    """
    return {
        "noop_max": stack.noop_max,
        "frameskip": stack.frame_skip,
        "img_height": stack.screen_size,
        "img_width": stack.screen_size,
        "stack_num": stack.stack,
        "grayscale": True,
        "maxpool": True,
        "reward_clipping": False,
        "episodic_life": False,
        "life_loss_info": stack.episodic_life,
        "use_fire_reset": stack.fire_reset,
        "repeat_action_probability": stack.repeat_action_probability,
        "max_num_frames_per_episode": stack.max_frames,
        "full_action_space": stack.full_action_space,
    }


def life_lost(lives: Any, lives_before: Any) -> Any:
    """Where a step lost a life while the game goes on (NumPy or JAX arrays)."""
    return (lives > 0) & (lives < lives_before)


def fire_after_life(stack: AtariStack, vec: Any) -> bool:
    """Whether the step after a lost life presses FIRE (the module docstring): with
    ``fire_reset``, where lives are played through (``episodic_life`` in training,
    ``fire_on_life_loss`` in the whole-game evaluation), in a game whose action 1 is FIRE (as
    the process backend's ``FireReset`` asks)."""
    meanings = [action.name for action in vec.ale.get_action_set()]
    lives_played = stack.episodic_life or stack.fire_on_life_loss
    return stack.fire_reset and lives_played and needs_fire(meanings)


FIRE = 1
"""The FIRE action's index in the games that need it (``fire_after_life``)."""


def game_flags(
    terminated: Any, truncated: Any, lives: Any, lives_before: Any, steps: Any, max_steps: int
) -> tuple[Any, Any, Any]:
    """A step's ``(terminated, truncated, ended)`` from ALE's flags (NumPy or JAX arrays).

    The game ends where it is over (terminated without a lost life: ``0 < lives <
    lives_before`` is the life signal, after which the game goes on) or cut: at ``max_steps``
    agent steps of the game (``steps``, this one counted), ALE's ``max_frames``. ALE reports a
    life lost at the cut's very step as ``terminated`` alone, yet resets the game; that step
    is ``truncated`` here, as the process backend reports it.
    """
    over = terminated & ~life_lost(lives, lives_before)
    truncated = truncated | ((steps >= max_steps) & ~over)
    terminated = over | (terminated & ~truncated)
    return terminated, truncated, over | truncated


def learner_reward(raw: Any, clip: bool, xp: Any) -> Any:
    """The learner's float32 rewards from ALE's raw ones: their sign where ``clip``."""
    reward = raw.astype(xp.float32)
    return xp.sign(reward) if clip else reward


def env_seeds(seed: Any, num_envs: int, xp: Any) -> Any:
    """The per-env int32 seeds of a reset seeded ``seed``: ``seed + i`` modulo ``2**31 - 1``
    (NumPy or JAX; the same numbers in both, so host and fused envs start alike)."""
    total = xp.asarray(seed).astype(xp.uint32) + xp.arange(num_envs, dtype=xp.uint32)
    return (total % xp.uint32(_SEED_MOD)).astype(xp.int32)


def _vector_env(env_id: str, num_envs: int, stack: AtariStack, **kwargs: Any) -> Any:
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv(
        ale_game(env_id),
        num_envs,
        autoreset_mode=_NEXT_STEP,
        **vector_kwargs(stack),
        **kwargs,
    )


class AleVectorEnv(VectorEnv):
    """``AtariVectorEnv`` as a same-step Gymnasium vector env, stepped through ``send``/``recv``
    (the module docstring: autoreset, lives, the process backend's differences).

    Args:
        env_id: An ALE id or ROM name.
        num_envs: Batch size.
        stack: The preprocessing's settings.
        batch_size: ``recv``'s batch; None or ``num_envs`` (see ``AleOptions``).
        num_threads: ALE's threads; 0: one per env, up to the cores.

    Raises:
        ValueError: A batch size other than ``num_envs``.
    """

    metadata: ClassVar[dict[str, Any]] = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        stack: AtariStack,
        *,
        batch_size: int | None = None,
        num_threads: int = 0,
    ) -> None:
        if batch_size is not None and batch_size != num_envs:
            raise ValueError(
                f"backend_options.batch_size={batch_size}: the learners act on all "
                f"{num_envs} envs at each step, and recv with a smaller batch hands back a "
                "different subset of envs each time; drop batch_size (or set it to num_agents)"
            )
        self._vec = _vector_env(env_id, num_envs, stack, num_threads=num_threads)
        self.num_envs = num_envs
        self.single_observation_space = self._vec.single_observation_space
        self.single_action_space = self._vec.single_action_space
        self.observation_space = self._vec.observation_space
        self.action_space = self._vec.action_space
        self._clip = stack.clip_rewards
        self._max_steps = -(-stack.max_frames // stack.frame_skip)
        self._fire_after_life = fire_after_life(stack, self._vec)
        self._fire = np.zeros(num_envs, bool)  # the envs whose next step presses FIRE
        self._lives = np.zeros(num_envs, np.int32)
        self._steps = np.zeros(num_envs, np.int64)
        self._scores = np.zeros(num_envs, np.float64)
        self.games = GameScores()
        """The raw scores of the games that ended (``take_games``)."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Resets every env: env ``i`` seeded ``env_seeds(seed)[i]``, or ``seed[i]`` for a
        sequence (None: each keeps its generator). Partial resets are the autoreset's own
        business: ``options`` is refused."""
        if options:
            raise ValueError(f"AleVectorEnv.reset takes no options; got {sorted(options)}")
        if seed is None:
            seeds = None
        elif np.ndim(seed) == 0:
            seeds = env_seeds(seed, self.num_envs, np).astype(np.int64)
        else:  # one seed per env (the stacked seeds' shared env)
            seeds = np.asarray(seed, np.int64) % _SEED_MOD
        obs, info = self._vec.reset(seed=seeds)
        self._lives = np.asarray(info["lives"], np.int32)
        self._fire[:] = False
        self._steps[:] = 0
        self._scores[:] = 0.0
        return obs, info

    def step_arrays(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Steps every env; returns ``(obs, reward, terminated, truncated, final_obs)``."""
        obs, reward, terminated, truncated, _ = self._step(actions)
        return obs[1], reward, terminated, truncated, obs[0]

    def _step(self, actions: np.ndarray) -> tuple[Any, ...]:
        actions = np.where(self._fire, FIRE, np.asarray(actions, np.int32)).astype(np.int32)
        final_obs, raw, terminated, truncated, info = self._vec.step(actions)
        self._steps += 1
        terminated, truncated, ended = game_flags(
            terminated, truncated, info["lives"], self._lives, self._steps, self._max_steps
        )
        lost = life_lost(np.asarray(info["lives"]), self._lives)
        self._fire = lost & ~ended & self._fire_after_life
        self._scores += raw
        self.games.add(self._scores[ended])
        self._scores[ended] = 0.0
        self._steps[ended] = 0
        obs, lives = final_obs, info["lives"]
        if ended.any():
            obs, reset_info = self._vec.reset(options={"reset_mask": np.asarray(ended)})
            lives = reset_info["lives"]
        self._lives = np.asarray(lives, np.int32)
        reward = learner_reward(np.asarray(raw), self._clip, np)
        return (final_obs, obs), reward, np.asarray(terminated), np.asarray(truncated), info

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Steps every env (Gymnasium's same-step API: ``final_obs`` and its mask in the
        infos where an episode ended, a lost life included)."""
        (final_obs, obs), reward, terminated, truncated, info = self._step(actions)
        done = terminated | truncated
        infos = dict(info)
        if done.any():
            finals = np.empty(self.num_envs, object)
            for i in np.flatnonzero(done):
                finals[i] = final_obs[i]
            infos.update(final_obs=finals, _final_obs=done)
        return obs, reward, terminated, truncated, infos

    def take_games(self) -> np.ndarray:
        """The raw scores (all lives) of the games that ended since the last call."""
        return self.games.take()

    def close_extras(self, **kwargs: Any) -> None:
        """Stops ALE's threads."""
        self._vec.close()


def host_env(
    env_id: str,
    num_envs: int,
    stack: AtariStack,
    *,
    batch_size: int | None = None,
    num_threads: int = 0,
) -> HostEnv:
    """The ``mode=host`` env: an [`AleVectorEnv`][batchppo.backends.ale_env.AleVectorEnv] in a
    [`HostEnv`][batchppo.backends.HostEnv] (uint8 frames and integer rewards: always finite)."""
    vector = AleVectorEnv(env_id, num_envs, stack, batch_size=batch_size, num_threads=num_threads)
    return wrap_host_env(vector, check_finite=False, take_games=vector.take_games)


GAMES_KEPT_PER_ENV = 1024
"""The game scores an [`AleFusedEnv`][batchppo.backends.ale_env.AleFusedEnv]'s state keeps per
env between two ``take_games``: an env ends at most one game a step, so none is lost where the
games are taken at least every this many steps (``Trainer.iteration`` takes them after each
rollout)."""


@struct.dataclass
class AleState:
    """The state of an [`AleFusedEnv`][batchppo.backends.ale_env.AleFusedEnv]: the emulators
    live in ALE's C++ envs, and the handle orders the FFI calls by their data.

    Attributes:
        handle: ALE's vectorizer handle (8 bytes), threaded through every call.
        lives: ``(num_envs,)`` int32, each env's lives after the last step.
        fire: ``(num_envs,)`` bool, the envs whose next step presses FIRE (``fire_after_life``).
        steps: ``(num_envs,)`` int32, each env's agent steps in its game so far.
        scores: ``(num_envs,)`` float32, the raw score of each env's game so far.
        game_scores: ``(num_envs * GAMES_KEPT_PER_ENV,)`` float32, a ring of the raw scores of
            the games that ended, game ``g`` (counted from the reset) at ``g`` modulo its size.
        games: int32, the games that ended since the reset.
        run: int32, which reset of the env this state continues (the host's count of resets:
            ``take_games`` counts the games of each run from its start).
    """

    handle: jax.Array
    lives: jax.Array
    fire: jax.Array
    steps: jax.Array
    scores: jax.Array
    game_scores: jax.Array
    games: jax.Array
    run: jax.Array


STEP_TARGET = "atari_vector_xla_step"
"""The custom-call target of ALE's step (``AtariVectorEnv.xla()``'s FFI)."""

GPU_COMPILER_OPTIONS = {"xla_gpu_enable_dynamic_slice_fusion": False}
"""XLA's GPU option that turns off its dynamic-slice fusion, whose rewriter can clone ALE's
step into a ``dynamic_slice_fusion`` beside the original: two step calls per agent step
(openxla/xla#45799; ``step_calls`` counts them; docs/benchmarks.md, "Speed on the GPU")."""

_STEP_CALL = re.compile(rf'custom_call_target="{STEP_TARGET}"')


def step_calls(hlo: str) -> int:
    """The ALE step calls (``custom_call_target="atari_vector_xla_step"``) in HLO text."""
    return len(_STEP_CALL.findall(hlo))


def check_step_calls(program: str, lowered_hlo: str, compiled_hlo: str) -> None:
    """Refuses a compiled program that calls ALE's step more often than its trace does.

    The criterion is exact: each step call in the traced program (``lowered_hlo``, one per
    ``env.step`` traced, e.g. one in a rollout's scanned body) is one agent step, so the
    compiled program (``compiled_hlo``) must hold as many, each where the trace put it. A
    compiler pass that copies the call (XLA's GPU dynamic-slice fusion did: each loop
    iteration then steps the emulators twice) leaves more; nothing removes one, as the call
    has side effects. A pass that unrolled the loop would be refused too, falsely; XLA
    unrolls none of the rollout's loops at the trainer's options.

    Args:
        program: The program's name, for the message.
        lowered_hlo: The program's HLO as traced (``Lowered.as_text(dialect="hlo")``).
        compiled_hlo: Its HLO as compiled (``Compiled.as_text()``).

    Raises:
        RuntimeError: One line: the counts and the two ways around it.
    """
    traced, compiled = step_calls(lowered_hlo), step_calls(compiled_hlo)
    if compiled > traced:
        raise RuntimeError(
            f"the compiled program {program!r} calls ALE's step ({STEP_TARGET}) {compiled} "
            f"times where its trace calls it {traced}: XLA duplicated the call, so the "
            "emulators would advance several steps per agent step; set "
            "backend_options={mode: host}, or compile with "
            "XLA_FLAGS=--xla_gpu_enable_dynamic_slice_fusion=false"
        )


def _xla_functions(vec: Any) -> tuple[Any, Any]:
    """``vec.xla()``'s handle and step function, or a one-line error naming the fix."""
    import ale_py

    if jax.default_backend() != "cpu" and not hasattr(ale_py._ale_py, "VectorXLAStepGPU"):
        raise ValueError(
            f"the ale backend's fused mode on {jax.default_backend()} needs ale-py's XLA "
            f"targets for it, which ale-py {ale_py.__version__} was built without; set "
            "backend_options.mode=host (or install an ale-py >= 0.12 built with them)"
        )
    xla = getattr(vec, "xla", None)
    if xla is None:
        raise ValueError(
            f"the ale backend's fused mode needs AtariVectorEnv.xla(), which ale-py "
            f"{ale_py.__version__} lacks; pip install 'ale-py>=0.12', or set "
            "backend_options.mode=host"
        )
    try:
        handle, _, step = xla()
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(
            f"AtariVectorEnv.xla() failed ({type(error).__name__}: {first}); set "
            "backend_options.mode=host"
        ) from error
    return handle, step


class AleFusedEnv:
    """ALE's vector env as pure-JAX ``reset``/``step`` (``mode=fused``; the module docstring:
    autoreset, lives, the process backend's differences).

    The functions call ALE's XLA FFI targets, so they run under ``jit`` and ``lax.scan`` with
    no host round trip, but they have side effects on the emulators: a program replays
    nothing, and the env cannot be vmapped. The key of ``step`` is unused (ALE's envs own
    their generators); ``reset(key)`` seeds them. The games' scores stay in the state, and
    ``take_games(state)`` brings them to the host, where the trainer brings its metrics
    (once a rollout): no step calls the host.

    Args:
        env_id: An ALE id or ROM name.
        num_envs: Batch size.
        stack: The preprocessing's settings.
        num_threads: ALE's threads; 0: one per env, up to the cores.

    Raises:
        ValueError: ``xla()`` is missing or fails on this platform (one line; mode=host
            works there).
    """

    def __init__(
        self, env_id: str, num_envs: int, stack: AtariStack, *, num_threads: int = 0
    ) -> None:
        self._vec = _vector_env(env_id, num_envs, stack, num_threads=num_threads)
        try:
            self._handle, self._xla_step = _xla_functions(self._vec)
        except ValueError:
            self._vec.close()
            raise
        self._num_envs = num_envs
        self._clip = stack.clip_rewards
        self._max_steps = -(-stack.max_frames // stack.frame_skip)
        self._fire_after_life = fire_after_life(stack, self._vec)
        self._obs_shape = tuple(self._vec.single_observation_space.shape)
        self._spec = spec_from_spaces(
            self._vec.single_observation_space, self._vec.single_action_space
        )
        self._runs = 0  # resets run so far (each starts a run of games)
        self._run, self._taken = -1, 0  # the run and its games taken by the last take_games

    @property
    def spec(self) -> EnvSpec:
        """Shapes, dtypes and bounds of one env."""
        return self._spec

    @property
    def num_envs(self) -> int:
        """Batch size."""
        return self._num_envs

    def close(self) -> None:
        """Stops ALE's threads (a compiled program must not call the env after this)."""
        self._vec.close()

    @property
    def compiler_options(self) -> dict[str, Any]:
        """XLA options of the programs that step this env: on a GPU, ``GPU_COMPILER_OPTIONS``
        (no dynamic-slice fusion, which cloned ALE's step there); none elsewhere. Whether it
        removes the clone is not verified on a GPU yet; ``check_compiled`` refuses the
        program if it does not."""
        return dict(GPU_COMPILER_OPTIONS) if jax.default_backend() == "gpu" else {}

    def check_compiled(self, program: str, lowered_hlo: str, compiled_hlo: str) -> None:
        """The trainer's check of each compiled program that steps this env
        (``check_step_calls``): no more ALE step calls than its trace makes.

        Raises:
            RuntimeError: One line, where XLA duplicated the step.
        """
        check_step_calls(program, lowered_hlo, compiled_hlo)

    def __repr__(self) -> str:
        return f"AleFusedEnv({self._vec.ale!r}, num_envs={self._num_envs})"

    @property
    def reports_games(self) -> bool:
        """Its envs report their games' scores (``take_games``)."""
        return True

    def take_games(self, state: AleState) -> np.ndarray:
        """The raw scores (all lives), in the order the games ended, of the games that ended
        in ``state``'s run since the last call (since its reset where the last call saw
        another run).

        Args:
            state: The env state a compiled call returned (before it is donated to the next).

        Raises:
            ValueError: More games ended since the last call than the state keeps
                (``GAMES_KEPT_PER_ENV``).
        """
        run, games, ring = jax.device_get((state.run, state.games, state.game_scores))
        run, games = int(run), int(games)
        start = self._taken if run == self._run else 0
        if games - start > len(ring):
            raise ValueError(
                f"{games - start} games ended since the last take_games, more than the "
                f"{len(ring)} an AleFusedEnv state keeps: take them at least every "
                f"{GAMES_KEPT_PER_ENV} steps"
            )
        self._run, self._taken = run, games
        return ring[np.arange(start, games) % len(ring)].astype(np.float64)

    def _next_run(self) -> np.ndarray:
        """A new run's number (the reset's host callback, once per reset)."""
        self._runs += 1
        return np.asarray(self._runs, np.int32)

    def _reset_call(
        self, handle: jax.Array, indices: jax.Array, seeds: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """ALE's reset of the envs ``indices`` (the others report their current stacks):
        ``(handle, obs, lives)`` of every env. The FFI call itself, since ``xla()``'s reset
        takes a concrete mask only."""
        n = self._num_envs
        scalars = [jax.ShapeDtypeStruct((n,), jnp.int32)] * 4
        call = jax.ffi.ffi_call(
            "atari_vector_xla_reset",
            (
                jax.ShapeDtypeStruct((8,), jnp.uint8),
                jax.ShapeDtypeStruct((n, *self._obs_shape), jnp.uint8),
                *scalars,
            ),
            has_side_effect=True,
        )
        handle, obs, _, lives, _, _ = call(handle, indices, seeds)
        return handle, obs, lives

    def reset(self, key: jax.Array) -> tuple[AleState, jax.Array]:
        """Resets every env, env ``i`` seeded ``env_seeds(HostEnv.seed_from_key(key))[i]``
        (the seeds a host-mode env gets from the same key), and starts a run of games."""
        n = self._num_envs
        seeds = env_seeds(HostEnv.seed_from_key(key), n, jnp)
        handle, obs, lives = self._reset_call(self._handle, jnp.arange(n, dtype=jnp.int32), seeds)
        zeros = jnp.zeros((n,), jnp.int32)
        run = io_callback(self._next_run, jax.ShapeDtypeStruct((), jnp.int32), ordered=False)
        ring = jnp.zeros((n * GAMES_KEPT_PER_ENV,), jnp.float32)
        fire = jnp.zeros((n,), bool)
        state = AleState(handle, lives, fire, zeros, zeros.astype(jnp.float32), ring, zeros[0], run)
        return state, obs

    def _reset_ended(
        self, handle: jax.Array, ended: jax.Array, obs: jax.Array, lives: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(handle, obs, lives)`` after one FFI reset of the envs ``ended`` (all at once,
        as host mode resets them; none where no game ended): ``obs`` and ``lives`` of a step
        are those of the continuing envs. ALE's reset takes a list of indices of a fixed
        length, each env at most once, so a ``lax.switch`` on their count picks the call."""
        n = self._num_envs
        (indices,) = jnp.nonzero(ended, size=n, fill_value=0)
        indices = indices.astype(jnp.int32)

        def reset_first(k: int) -> Any:
            def branch(handle: jax.Array, obs: jax.Array, lives: jax.Array) -> Any:
                if k == 0:
                    return handle, obs, lives
                return self._reset_call(handle, indices[:k], jnp.full((k,), -1, jnp.int32))

            return branch

        branches = [reset_first(k) for k in range(n + 1)]
        return jax.lax.switch(ended.sum(), branches, handle, obs, lives)

    def step(self, state: AleState, action: jax.Array, key: jax.Array) -> StepResult:
        """Steps every env, then resets those whose game ended (same-step autoreset), and
        keeps the scores of the games that ended in the state (``take_games``)."""
        del key
        action = jnp.asarray(action).astype(jnp.int32).reshape((self._num_envs,))
        action = jnp.where(state.fire, FIRE, action)
        handle, (final_obs, raw, terminated, truncated, info) = self._xla_step(state.handle, action)
        steps = state.steps + 1
        terminated, truncated, ended = game_flags(
            terminated, truncated, info["lives"], state.lives, steps, self._max_steps
        )
        fire = life_lost(info["lives"], state.lives) & ~ended & self._fire_after_life
        scores = state.scores + raw.astype(jnp.float32)
        handle, obs, lives = self._reset_ended(handle, ended, final_obs, info["lives"])
        return StepResult(
            state=AleState(
                handle,
                lives,
                fire,
                jnp.where(ended, 0, steps),
                jnp.where(ended, 0.0, scores),
                *_keep_games(state.game_scores, state.games, ended, scores),
                state.run,
            ),
            obs=obs,
            reward=learner_reward(raw, self._clip, jnp),
            terminated=terminated,
            truncated=truncated,
            final_obs=final_obs,
        )


def _keep_games(
    ring: jax.Array, games: jax.Array, ended: jax.Array, scores: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(ring, games)`` with the ``scores`` of the envs ``ended`` written after the ``games``
    kept so far (in the envs' order), modulo the ring's size; the other envs write nothing."""
    slot = games + jnp.cumsum(ended) - 1
    slot = jnp.where(ended, slot % ring.shape[0], ring.shape[0])
    return ring.at[slot].set(scores, mode="drop"), games + ended.sum(dtype=jnp.int32)


def probe(
    env_id: str,
    *,
    normalize_ranges: bool = True,
    env_kwargs: Mapping[str, Any] | None = None,
    **_: Any,
) -> Any:
    """The ``ale`` record's start-up check (``Backend.probe``): one env built, reset and closed;
    its spaces, checked as ``HostEnv`` takes them (``spec_from_spaces``).

    Raises:
        ValueError: One line: the id, the settings, ALE's own error, or spaces the learners
            cannot take.
    """
    from batchppo.envs.make import EnvProbe

    del normalize_ranges  # uint8 frames and a Discrete action: nothing to map
    stack = atari_stack(env_id, None, dict(env_kwargs or {}))
    try:
        vec = _vector_env(env_id, 1, stack)
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(f"env {env_id!r}: ALE could not build it: {first}") from error
    try:
        vec.reset(seed=0)
        spec_from_spaces(vec.single_observation_space, vec.single_action_space)
        return EnvProbe(vec.single_observation_space, vec.single_action_space, None)
    finally:
        vec.close()
