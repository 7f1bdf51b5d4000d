"""Atari: the standard preprocessing of ALE envs, run in the batch env's workers.

``make("ALE/Breakout-v5", 8, preprocess="atari")`` builds every env as

1. ``gymnasium.make(env_id, frameskip=1, repeat_action_probability=...,
   max_num_frames_per_episode=max_frames, full_action_space=...)``: the ALE steps one frame per
   call, so that the skipping below is the only one;
2. Gymnasium's ``AtariPreprocessing``: up to ``noop_max`` no-op actions after each reset (their
   number drawn from the env's own generator, seeded by the reset seed), ``frame_skip`` frames
   per agent step with the maximum of the last two, a grey ``screen_size`` square frame
   (uint8; OpenCV's area resize);
3. Gymnasium's ``RecordEpisodeStatistics``: at the step that ends a *game* (not a life), the
   info holds ``episode = {"r": raw return, "l": agent steps, "t": seconds}``, with the rewards
   before clipping; ``GameScoreLog`` keeps each such return until ``take_games`` (the
   trainer's ``game_score``, called through the batch env in the workers);
4. ``EpisodicLife`` (``episodic_life``): a lost life ends the learner's episode (``terminated``)
   while the game goes on;
5. ``FireReset`` (``fire_reset``): FIRE after each reset, in games whose action 1 is FIRE;
6. Gymnasium's ``ClipReward`` to ``[-1, 1]`` (``clip_rewards``): ALE rewards are integers, so
   this is their sign;
7. Gymnasium's ``FrameStackObservation``: the last ``stack`` frames on a new first axis, padded
   with the reset frame, so observations are uint8 ``(stack, screen_size, screen_size)``,
   channels first (CHW).

Then ``make()``'s standard stack adds what it adds to every env (``ConvertTo32Bit``: float32
rewards, int32 actions; uint8 frames keep their dtype in shared memory).

A game that reaches ``max_frames`` emulator frames (108,000 by default: 30 minutes at 60 Hz,
27,000 agent steps) ends as ``truncated``, as the ALE reports it; a step's time limit
(``max_length``) is refused, because under the frame skip it would count frames.

The defaults are those of CleanRL's PPO Atari scripts and EnvPool's Atari envs (sticky actions
off, fire reset on, episodic life as CleanRL sets it), since those are the published figures
the presets are compared with. Machado et al. (2018) recommend against the life signal and for
sticky actions (``repeat_action_probability=0.25``, ALE v5's own default): both are a setting.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium
from gymnasium.wrappers import (
    AtariPreprocessing,
    ClipReward,
    FrameStackObservation,
    RecordEpisodeStatistics,
)

from batchppo.core.values import positive_int
from batchppo.envs.episode_metrics import GameScores

__all__ = [
    "PREPROCESSING",
    "AtariStack",
    "EpisodicLife",
    "FireReset",
    "GameScoreLog",
    "import_ale",
    "whole_games",
]

_ALE_ENTRY_POINT = "ale_py.env:AtariEnv"
# The ALE's keywords that the preprocessing sets itself, with the setting that replaces each.
_OWN_KWARGS = {
    "frameskip": "frame_skip",
    "repeat_action_probability": "repeat_action_probability",
    "max_num_frames_per_episode": "max_frames",
    "full_action_space": "full_action_space",
}


def import_ale() -> None:
    """Imports ``ale_py`` (which registers the ``ALE/`` ids with Gymnasium).

    Raises:
        ValueError: ale-py is not installed (one line: how to install it).
    """
    try:
        importlib.import_module("ale_py")
    except ImportError as exc:
        raise ValueError(
            f"Atari envs need ale-py ({exc}); install it with pip install 'batchppo[atari]'."
        ) from None


class EpisodicLife(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """A lost life ends the episode (``terminated``) for the learner; the game goes on.

    The ``reset`` that follows a lost life continues the same game with one no-op step
    instead of restarting it, so each life is an episode of the learner's and the game's true
    end still reaches the wrappers inside this one (its ``RecordEpisodeStatistics`` reports
    whole games). Any other reset (after the game's end, with a seed, or in the middle of a
    life) restarts the game. Gymnasium's
    ``AtariPreprocessing(terminal_on_life_loss=True)`` restarts the game at the first lost
    life, which is why this wrapper exists.

    Args:
        env: An ALE env (possibly wrapped).
    """

    def __init__(self, env: gymnasium.Env):
        gymnasium.utils.RecordConstructorArgs.__init__(self)
        gymnasium.Wrapper.__init__(self, env)
        self._lives = 0
        self._life_lost = False  # the last step lost a life and the game goes on

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps; ``terminated`` also where the step lost a life."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = self.env.unwrapped.ale.lives()
        self._life_lost = 0 < lives < self._lives and not (terminated or truncated)
        if self._life_lost:
            terminated = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """After a lost life (and no seed), one no-op step goes on; else restarts the game."""
        if self._life_lost and seed is None:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        else:
            obs, info = self.env.reset(seed=seed, options=options)
        self._life_lost = False
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """Presses FIRE (action 1) after each reset: games such as Breakout wait for it.

    The FIRE step's reward is not returned (inner wrappers, such as
    ``RecordEpisodeStatistics``, still count it).

    With ``on_life_loss``, FIRE is also pressed in the step that lost a life while the game goes on
    (that step returns the FIRE step's observation and the sum of both rewards): what training's
    FIRE reset does after each life under ``EpisodicLife``, for an env that plays whole games (the
    evaluation of a score).

    Args:
        env: An ALE env (possibly wrapped) whose action 1 is FIRE.
        on_life_loss: Also press FIRE after each lost life.

    Raises:
        ValueError: The game's action 1 is not FIRE.
    """

    def __init__(self, env: gymnasium.Env, on_life_loss: bool = False):
        meanings = env.unwrapped.get_action_meanings()
        if len(meanings) < 2 or meanings[1] != "FIRE":
            raise ValueError(
                f"FireReset: action 1 of {env.unwrapped.spec.id if env.unwrapped.spec else env} "
                f"is {meanings[1] if len(meanings) > 1 else None!r}, not FIRE; leave fire_reset "
                "off for this game."
            )
        gymnasium.utils.RecordConstructorArgs.__init__(self, on_life_loss=on_life_loss)
        gymnasium.Wrapper.__init__(self, env)
        self._on_life_loss = on_life_loss
        self._lives = 0

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps; with ``on_life_loss``, a step that lost a life is followed by FIRE."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not self._on_life_loss:
            return obs, reward, terminated, truncated, info
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self._lives and not (terminated or truncated):
            obs, fire_reward, terminated, truncated, fire_info = self.env.step(1)
            reward = float(reward) + float(fire_reward)
            info = {**info, **fire_info}
            lives = self.env.unwrapped.ale.lives()
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Resets, then steps FIRE once (resetting again if that ended the game)."""
        obs, info = self._reset(seed, options)
        self._lives = self.env.unwrapped.ale.lives()
        return obs, info

    def _reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
        obs, info = self.env.reset(seed=seed, options=options)
        obs, _, terminated, truncated, step_info = self.env.step(1)
        if terminated or truncated:
            return self.env.reset(options=options)
        return obs, {**info, **step_info}


class GameScoreLog(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    """Keeps the raw return of each game that ends (the ``episode`` info of the
    ``RecordEpisodeStatistics`` inside it) until ``take_games``.

    It sits right outside that wrapper, so every step of the game passes it: the agent's, and
    those that ``EpisodicLife`` and ``FireReset`` take themselves.

    Args:
        env: An env inside which ``RecordEpisodeStatistics`` reports whole games.
    """

    def __init__(self, env: gymnasium.Env):
        gymnasium.utils.RecordConstructorArgs.__init__(self)
        gymnasium.Wrapper.__init__(self, env)
        self._games = GameScores()

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Steps; keeps the game's return where the step ended it."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "episode" in info:
            self._games.add([info["episode"]["r"]])
        return obs, reward, terminated, truncated, info

    def take_games(self) -> list[float]:
        """The raw returns of the games that ended since the last call (a list, to travel
        from a worker)."""
        return self._games.take().tolist()


def needs_fire(meanings: Sequence[str]) -> bool:
    """Whether a game with these action meanings waits for FIRE (action 1) after a reset."""
    return len(meanings) >= 3 and meanings[1] == "FIRE"


def _needs_fire(env: gymnasium.Env) -> bool:
    return needs_fire(env.unwrapped.get_action_meanings())


@dataclasses.dataclass(frozen=True)
class AtariStack:
    """The standard Atari preprocessing as ``make(preprocess=...)`` takes it (module docstring).

    Attributes:
        noop_max: At most this many no-ops after each reset (at least 1 when positive: the
            number is drawn from ``1 .. noop_max``, Gymnasium's rule); 0: none.
        frame_skip: Emulator frames per agent step (the max of the last two is observed).
        screen_size: Side of the square grey frame.
        stack: Frames per observation (the first axis).
        clip_rewards: Rewards to ``[-1, 1]`` (their sign); the raw game return is in the
            ``episode`` info.
        episodic_life: A lost life is a ``terminated`` for the learner (see ``EpisodicLife``).
        fire_reset: FIRE after each reset, in games whose action 1 is FIRE (others: no-op).
        repeat_action_probability: Sticky actions: the ALE repeats the previous action with
            this probability at each frame.
        max_frames: Emulator frames after which a game is truncated.
        full_action_space: All 18 actions instead of the game's minimal set.
        fire_on_life_loss: With ``fire_reset``, FIRE after each lost life too (for envs that play
            whole games: ``whole_games``).
    """

    noop_max: int = 30
    frame_skip: int = 4
    screen_size: int = 84
    stack: int = 4
    clip_rewards: bool = True
    episodic_life: bool = True
    fire_reset: bool = True
    repeat_action_probability: float = 0.0
    max_frames: int = 108_000
    full_action_space: bool = False
    fire_on_life_loss: bool = False

    def __post_init__(self) -> None:
        for name in ("frame_skip", "screen_size", "stack", "max_frames"):
            object.__setattr__(self, name, positive_int(f"AtariStack.{name}", getattr(self, name)))
        if not isinstance(self.noop_max, int) or self.noop_max < 0:
            raise ValueError(f"AtariStack.noop_max must be an int >= 0; got {self.noop_max!r}.")
        if not 0.0 <= self.repeat_action_probability < 1.0:
            raise ValueError(
                "AtariStack.repeat_action_probability must be in [0, 1); got "
                f"{self.repeat_action_probability!r}."
            )

    def check(self, env_id: str, max_length: int | None, env_kwargs: Mapping[str, Any]) -> None:
        """Raises ValueError for an id, a time limit or keywords the stack cannot take.

        Args:
            env_id: The Gymnasium id (an ALE env's, e.g. ``"ALE/Breakout-v5"``).
            max_length: ``make``'s step limit: must be None (use ``max_frames``).
            env_kwargs: ``make``'s keywords for ``gymnasium.make``.
        """
        import_ale()
        spec = gymnasium.spec(env_id.split(":", 1)[-1])
        if spec.entry_point != _ALE_ENTRY_POINT:
            raise ValueError(
                f"preprocess='atari' needs an ALE env id such as 'ALE/Breakout-v5'; {env_id} is "
                f"built by {spec.entry_point}."
            )
        if max_length is not None or spec.max_episode_steps is not None:
            raise ValueError(
                f"{env_id}: a step limit (max_length={max_length}, the registry's "
                f"{spec.max_episode_steps}) would count emulator frames under the frame skip; "
                "leave max_length None and set AtariStack.max_frames instead."
            )
        for key in env_kwargs:
            if key in _OWN_KWARGS:
                raise ValueError(
                    f"{env_id}: {key} is set by the Atari preprocessing; set "
                    f"AtariStack.{_OWN_KWARGS[key]} instead of passing {key}=."
                )

    def make(
        self, env_id: str, render_mode: str | None, env_kwargs: Mapping[str, Any]
    ) -> gymnasium.Env:
        """Builds one ALE env with the preprocessing (run where the env lives: a worker).

        Args:
            env_id: The ALE id.
            render_mode: Passed to ``gymnasium.make``.
            env_kwargs: Other ``gymnasium.make`` keywords (checked by
                [`check`][batchppo.envs.AtariStack.check]).

        Returns:
            The wrapped env: uint8 observations of shape ``(stack, screen_size,
            screen_size)``, ``Discrete`` actions.
        """
        import_ale()
        env = gymnasium.make(
            env_id.split(":", 1)[-1],
            render_mode=render_mode,
            frameskip=1,
            repeat_action_probability=self.repeat_action_probability,
            max_num_frames_per_episode=self.max_frames,
            full_action_space=self.full_action_space,
            # The ALE env copies out a screen at every frame, which the preprocessing ignores
            # (it reads the screen it keeps itself): the grey one is a third of the RGB copy.
            **{"obs_type": "grayscale", **env_kwargs},
        )
        return self.wrap(env)

    def wrap(self, env: gymnasium.Env) -> gymnasium.Env:
        """The preprocessing (layers 2-7 of the module docstring) around a frameskip-1 ALE env."""
        env = AtariPreprocessing(
            env,
            noop_max=self.noop_max,
            frame_skip=self.frame_skip,
            screen_size=self.screen_size,
            terminal_on_life_loss=False,
            grayscale_obs=True,
        )
        env = GameScoreLog(RecordEpisodeStatistics(env))
        if self.episodic_life:
            env = EpisodicLife(env)
        if self.fire_reset and _needs_fire(env):
            env = FireReset(env, on_life_loss=self.fire_on_life_loss)
        if self.clip_rewards:
            env = ClipReward(env, -1.0, 1.0)
        return FrameStackObservation(env, self.stack, padding_type="reset")


def whole_games(**settings: Any) -> AtariStack:
    """The Atari preprocessing for scoring whole games: no episodic life, no reward clipping,
    FIRE after each lost life (as training's FIRE reset presses it after each life): an
    episode is a game and its return the game's score, on the observations training sees.
    The ``eval_env_kwargs`` of the Atari presets name it (``preprocess: atari_game``)."""
    defaults = {"episodic_life": False, "clip_rewards": False, "fire_on_life_loss": True}
    return AtariStack(**{**defaults, **settings})


# The named preprocessings of make(preprocess=NAME) (and of a config's env_kwargs).
PREPROCESSING: dict[str, Any] = {"atari": AtariStack, "atari_game": whole_games}
