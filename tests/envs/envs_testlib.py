"""Small deterministic and faulty envs for the tests of batchppo.envs."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import gymnasium
import numpy as np
import psutil
from gymnasium import spaces


class CountEnv(gymnasium.Env):
    """obs = [tag, episode, t]; reward = t + action[0]; terminates after ``terminate_at`` steps.

    ``episode`` counts resets (1 after the first); ``tag`` identifies the env; infos, when
    asked, are ``{"t": t}``.
    """

    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012 (Gymnasium convention)

    def __init__(
        self,
        tag: int = 0,
        terminate_at: int | None = None,
        info: bool = False,
        render_mode: str | None = None,
    ):
        self.tag = tag
        self.terminate_at = terminate_at
        self.info = info
        self.render_mode = render_mode
        self.observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.episode = 0
        self.t = 0
        self.seen_actions: list[Any] = []
        self.last_seed = None

    def _obs(self) -> np.ndarray:
        return np.array([self.tag, self.episode, self.t], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.last_seed = seed
        self.episode += 1
        self.t = 0
        return self._obs(), ({"t": self.t, "reset": True} if self.info else {})

    def step(self, action):
        self.seen_actions.append(action)
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        reward = float(self.t) + float(np.asarray(action).reshape(-1)[0])
        return self._obs(), reward, terminated, False, ({"t": self.t} if self.info else {})

    def render(self):
        return np.full((2, 2, 3), self.tag, dtype=np.uint8)

    def double(self, x):
        return 2 * x + self.tag


class FaultyEnv(CountEnv):
    """A CountEnv that misbehaves: ``fault`` in init/reset/step/exit/kill/segfault/hang/hang_close
    /hang_reset (its resets after the first sleep), or its method ``stall`` sleeps when called.

    The fault happens in env ``bad_tag`` only, at step ``at`` (for step faults). Each sleep
    (a hang) first creates the file ``marker``, if given: a test in another process waits for
    it to know that the env hangs.
    """

    def __init__(self, tag: int, bad_tag: int, fault: str, at: int = 2, marker: str | None = None):
        super().__init__(tag)
        self.bad = tag == bad_tag
        self.fault = fault
        self.at = at
        self.marker = marker
        if self.bad and fault == "init":
            raise ZeroDivisionError(f"constructor of env {tag} failed on purpose")

    def _mark_hung(self) -> None:
        """Creates ``marker``, if given, before a hang; the sleep itself stays in the method
        that hangs, where the stacks of a hung worker, which the tests check, end."""
        if self.marker is not None:
            with open(self.marker, "w"):
                pass

    def reset(self, *, seed=None, options=None):
        if self.bad and self.fault == "reset":
            raise KeyError("reset failed on purpose")
        if self.bad and self.fault == "hang_reset" and self.episode >= 1:
            self._mark_hung()
            time.sleep(3600)
        return super().reset(seed=seed, options=options)

    def stall(self):
        if self.bad:
            self._mark_hung()
            time.sleep(3600)
        return self.tag

    def step(self, action):
        out = super().step(action)
        if self.bad and self.t == self.at:
            if self.fault == "step":
                raise ZeroDivisionError(f"step of env {self.tag} failed on purpose")
            if self.fault == "exit":
                os._exit(3)
            if self.fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.fault == "segfault":
                ctypes.string_at(0)
            if self.fault == "hang":
                self._mark_hung()
                time.sleep(3600)
        return out

    def close(self):
        if self.bad and self.fault == "hang_close":
            self._mark_hung()
            time.sleep(3600)


class HangAfterRestartEnv(CountEnv):
    """A CountEnv whose env ``bad_tag`` fails in step ``at`` (``first``: ``"exit"`` ends its
    worker, ``"step"`` raises), then, once rebuilt, hangs (``then``: ``"reset"`` in its
    reset, ``"init"`` in its constructor). The file ``marker``, written before the failure,
    tells a rebuilt env (in a respawned worker too) that the failure has happened.
    """

    def __init__(self, tag: int, bad_tag: int, first: str, then: str, marker: str, at: int = 2):
        super().__init__(tag)
        self.bad = tag == bad_tag
        self.first = first
        self.then = then
        self.marker = marker
        self.at = at
        if self._rebuilt() and then == "init":
            time.sleep(3600)

    def _rebuilt(self) -> bool:
        return self.bad and os.path.exists(self.marker)

    def reset(self, *, seed=None, options=None):
        if self._rebuilt() and self.then == "reset":
            time.sleep(3600)
        return super().reset(seed=seed, options=options)

    def step(self, action):
        out = super().step(action)
        if self.bad and self.t == self.at and not os.path.exists(self.marker):
            with open(self.marker, "w"):
                pass
            if self.first == "exit":
                os._exit(3)
            raise ZeroDivisionError(f"step of env {self.tag} failed on purpose")
        return out


class TextInDictObsEnv(CountEnv):
    """A CountEnv whose Dict observation space holds a Text space (unsupported by BatchEnv)."""

    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Dict({"x": spaces.Box(-1, 1, (2,)), "name": spaces.Text(5)})


class OtherSpaceEnv(CountEnv):
    """A CountEnv with a different observation shape."""

    def __init__(self, tag: int = 0):
        super().__init__(tag)
        self.observation_space = spaces.Box(-np.inf, np.inf, (4,), np.float32)


class BoundedEnv(gymnasium.Env):
    """Box obs with bounds finite on dims 0 and 2 only; Box actions finite on dim 1 only.

    ``reset`` returns ``obs0``; ``step`` returns ``obs0 + 1`` and records the action it got.
    ``bad`` makes the next step return a non-finite observation (``"obs"``) or reward.
    """

    def __init__(self, obs0=(0.5, 7.0, -2.0), dtype=np.float64):
        self.observation_space = spaces.Box(
            np.array([0.0, -np.inf, -4.0]), np.array([2.0, np.inf, 4.0]), dtype=dtype
        )
        self.action_space = spaces.Box(
            np.array([-np.inf, 2.0], np.float32),
            np.array([np.inf, 10.0], np.float32),
            dtype=np.float32,
        )
        self.obs0 = np.array(obs0, dtype=dtype)
        self.actions: list[np.ndarray] = []
        self.bad: str | None = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.obs0.copy(), {}

    def step(self, action):
        self.actions.append(np.array(action))
        obs = self.obs0 + 1
        reward = 1.5
        if self.bad == "obs":
            obs[1] = np.nan
        if self.bad == "reward":
            reward = float("inf")
        return obs, reward, False, False, {}


class BigInfoEnv(CountEnv):
    """Returns a 400 kB info every step (far more than a pipe's buffer)."""

    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {"big": np.full(50_000, self.t, np.float64)}


class LockInfoEnv(CountEnv):
    """Returns an info holding a lock (cannot be pickled) at step 2."""

    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        info = {"lock": threading.Lock()} if self.t == 2 else {}
        return obs, reward, terminated, truncated, info


class BoolActionEnv(gymnasium.Env):
    """Box(bool) actions of shape (2,); the observation is the last action as float32."""

    def __init__(self):
        self.observation_space = spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Box(0, 1, (2,), bool)
        self.last_action: np.ndarray | None = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.last_action = np.array(action)
        return np.asarray(action, np.float32), 0.0, False, False, {}


class SlowEnv(CountEnv):
    """A CountEnv whose step sleeps ``delay`` seconds (a slow simulator)."""

    def __init__(self, tag: int = 0, delay: float = 0.2):
        super().__init__(tag)
        self.delay = delay

    def step(self, action):
        time.sleep(self.delay)
        return super().step(action)


# How long a test env waits for what the test does before it raises: far past any machine's
# delay, so only a regression reaches it, and within the test files' timeouts (30 s and up).
HUNG_S = 20.0


def wait_until(condition: Callable[[], bool], what: str, limit: float = HUNG_S) -> None:
    """Polls ``condition`` every millisecond until it holds.

    Raises:
        TimeoutError: ``condition`` did not hold within ``limit`` seconds (``what`` hung).
    """
    end = time.monotonic() + limit
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError(f"hung: {what} did not happen within {limit:g} s")
        time.sleep(0.001)


def running(pid: int) -> bool:
    """Whether process ``pid`` runs: it exists and has not exited (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_all_gone(pids: Iterable[int], within: float = HUNG_S) -> None:
    """Waits until none of ``pids`` runs; ``within`` seconds bound a hang, never a delay.

    Raises:
        AssertionError: Some of ``pids`` still run after ``within`` seconds (it names them).
    """
    alive = list(pids)

    def gone() -> bool:
        alive[:] = [pid for pid in alive if running(pid)]
        return not alive

    try:
        wait_until(gone, "the processes' exit", within)
    except TimeoutError:
        raise AssertionError(f"processes still running: {alive}") from None


def signals_pending(pid: int, signums: Iterable[int]) -> bool:
    """Whether one of the signals ``signums`` sent to process ``pid`` awaits delivery
    (Linux's ``/proc/<pid>/status``). False once the kernel has delivered each (to a handler
    or its default action) or discarded it (ignored), and once the process has exited."""
    try:
        with open(f"/proc/{pid}/status") as status:
            lines = status.read().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        lines = None
    if not running(pid):
        return False
    # ShdPnd: sent to the process (kill); SigPnd: to its main thread.
    pending = [line.split()[1] for line in lines or () if line.startswith(("ShdPnd:", "SigPnd:"))]
    if len(pending) != 2:
        raise RuntimeError(f"no ShdPnd, SigPnd in /proc/{pid}/status: signals_pending needs Linux")
    mask = sum(1 << (signum - 1) for signum in signums)
    return any(int(bits, 16) & mask for bits in pending)


def wait_delivered(pids: Iterable[int], signums: Iterable[int]) -> None:
    """Waits until the kernel has delivered (or, ignored, discarded) the signals ``signums``
    sent to ``pids``: a process that does not ignore them has then begun to act on them.

    Raises:
        TimeoutError: One stays pending for ``HUNG_S`` seconds (blocked, or its process hung).
    """
    pids, signums = list(pids), list(signums)
    names = ", ".join(signal.Signals(signum).name for signum in signums)
    wait_until(
        lambda: not any(signals_pending(pid, signums) for pid in pids),
        f"the delivery of {names} to processes {pids}",
    )


class GatedEnv(CountEnv):
    """A CountEnv whose ``n``-th step (from 1, over all its episodes) waits until the file
    ``f"{gate}.{n}"`` exists: the test decides when each step ends."""

    def __init__(self, tag: int, gate: str):
        super().__init__(tag)
        self.gate = gate
        self.steps = 0

    def step(self, action):
        self.steps += 1
        path = f"{self.gate}.{self.steps}"
        wait_until(lambda: os.path.exists(path), f"the test creating {path}")
        return super().step(action)


class WaitsForBlockedCallerEnv(CountEnv):
    """A CountEnv whose step returns only once process ``caller`` has been seen asleep
    ``streak`` times in a row, a millisecond apart: blocked in a wait, which a process that
    spins for the step's answer never is (it stays runnable, whatever the machine's load)."""

    def __init__(self, tag: int, caller: int, streak: int = 20):
        super().__init__(tag)
        self.caller = caller
        self.streak = streak

    def step(self, action):
        caller, run = psutil.Process(self.caller), 0

        def blocked() -> bool:
            nonlocal run
            run = run + 1 if caller.status() == psutil.STATUS_SLEEPING else 0
            return run >= self.streak

        wait_until(blocked, f"process {self.caller} blocking while env {self.tag} steps")
        return super().step(action)


class NestedEnv(gymnasium.Env):
    """Dict observations ``{"pos": Box(3), "t": Discrete(8)}``; Tuple actions (Box(2), Discrete).

    ``pos`` is ``[tag, episode, t]``; terminates at ``t == terminate_at``; the reward is the
    sum of the action's leaves. ``reset_delay`` makes resets slow (seconds).
    """

    def __init__(self, tag: int = 0, terminate_at: int = 2, reset_delay: float = 0.0):
        self.tag = tag
        self.terminate_at = terminate_at
        self.reset_delay = reset_delay
        self.observation_space = spaces.Dict(
            {"pos": spaces.Box(-np.inf, np.inf, (3,), np.float32), "t": spaces.Discrete(8)}
        )
        self.action_space = spaces.Tuple(
            (spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Discrete(3))
        )
        self.episode = 0
        self.t = 0
        self.last_action: Any = None

    def _obs(self) -> dict[str, Any]:
        return {"pos": np.array([self.tag, self.episode, self.t], np.float32), "t": self.t}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        time.sleep(self.reset_delay)
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.last_action = action
        self.t += 1
        reward = float(np.sum(action[0])) + float(action[1])
        return self._obs(), reward, self.t >= self.terminate_at, False, {}


class FaultyNestedEnv(NestedEnv):
    """A NestedEnv whose step raises ZeroDivisionError at ``t == at`` in env ``bad_tag``."""

    def __init__(self, tag: int, bad_tag: int, at: int = 2):
        super().__init__(tag, terminate_at=100)
        self.bad = tag == bad_tag
        self.at = at

    def step(self, action):
        out = super().step(action)
        if self.bad and self.t == self.at:
            raise ZeroDivisionError(f"step of nested env {self.tag} failed on purpose")
        return out


class BuiltOnceEnv(CountEnv):
    """In env ``bad_tag``: every step raises ValueError, and building it a second time in the
    same process raises KeyError (an env that cannot be rebuilt)."""

    builds = 0  # constructions of the bad env in this process

    def __init__(self, tag: int, bad_tag: int):
        super().__init__(tag)
        self.bad = tag == bad_tag
        if self.bad:
            type(self).builds += 1
            if type(self).builds > 1:
                raise KeyError(f"env {tag} cannot be rebuilt")

    def step(self, action):
        if self.bad:
            raise ValueError(f"step of env {self.tag} failed on purpose")
        return super().step(action)


class DivergingEnv(gymnasium.Env):
    """float64 spaces with finite and infinite bounds; random dynamics; optional bad values.

    Observations live in a Box with finite bounds on dims 0 and 2 only; actions in a Box with
    finite bounds on dim 0 only, so range normalisation and the float32 conversion both have
    work in float64. Episodes terminate at random. Env ``bad_tag`` returns, at step ``at`` of
    its second episode: a NaN observation (``fault="obs"``), an infinite reward
    (``"reward"``), a NaN observation as it terminates (``"final_obs"``), a NaN observation
    from the reset that starts its third episode (``"reset_obs"``), or a finite float64
    observation and reward beyond float32's range (``"overflow"``).
    """

    def __init__(self, tag: int = 0, bad_tag: int = -1, fault: str | None = None, at: int = 3):
        self.observation_space = spaces.Box(
            np.array([-1.0, -np.inf, 0.0]), np.array([1.0, np.inf, 1e3]), dtype=np.float64
        )
        self.action_space = spaces.Box(
            np.array([-2.0, -np.inf]), np.array([2.0, np.inf]), dtype=np.float64
        )
        self.tag = tag
        self.fault = fault if tag == bad_tag else None
        self.at = at
        self.episode = 0
        self.t = 0
        self.x = np.zeros(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        self.x = self.np_random.uniform(-1.5, 1.5, 3) * [1.0, 100.0, 500.0] + [0, 0, 500]
        obs = self.x.copy()
        if self.fault == "reset_obs" and self.episode == 3:
            obs[2] = np.nan
        return obs, {}

    def step(self, action):
        self.t += 1
        a = np.asarray(action, dtype=np.float64)
        self.x = self.x * 0.9 + [a[0] / 3, a[1], a[0] * 7] + self.np_random.normal(0, 0.1, 3)
        obs = self.x.copy()
        reward = float(-np.abs(self.x).sum() / 7)
        terminated = bool(self.np_random.random() < 0.02)
        if self.episode == 2 and self.t == self.at:
            if self.fault == "obs":
                obs[0] = np.nan
            elif self.fault == "reward":
                reward = float("inf")
            elif self.fault == "final_obs":
                obs[1], terminated = np.nan, True
            elif self.fault == "overflow":
                obs[1], reward = 1e300, -1e300
        return obs, reward, terminated, False, {}


class ConstructionCountingEnv(CountEnv):
    """A CountEnv that appends the id of the process building it to the file ``path``.

    Counts env constructions over every process. ``int_obs`` gives it an integer observation
    space, which ``make()``'s batch transform does not cover (its envs get the per-env stack).
    """

    def __init__(
        self, path: str, tag: int = 0, int_obs: bool = False, render_mode: str | None = None
    ):
        with open(path, "a") as f:
            f.write(f"{os.getpid()}\n")
        super().__init__(tag, render_mode=render_mode)
        self.int_obs = int_obs
        if int_obs:
            self.observation_space = spaces.Box(0, 100, (3,), np.int64)

    def _obs(self) -> np.ndarray:
        obs = super()._obs()
        return obs.astype(np.int64) if self.int_obs else obs


# make("envs_testlib:ConstructionCounting-v0", ...) imports this module, in the workers too.
gymnasium.register("ConstructionCounting-v0", entry_point=ConstructionCountingEnv)


class NestedObsEnv(gymnasium.Env):
    """Nested Dict/Tuple observations of every leaf kind, for ``make()``'s per-env stack.

    ``obs = {"pos": [tag, last action] (float64), "inner": {"count": [t] (int64),
    "flags": [t % 2, 1, 0] (MultiBinary)}, "extra": (t (Discrete), [episode % 3, t % 4]
    (MultiDiscrete), [0.25, 0.75 + tag] (float32))}``; ``reward = tag + t``; the episode
    terminates at ``t == terminate_at``. Actions are ``Box(-2, 2, (1,), float64)``. ``tag``
    is the seed of the last seeded reset (``make(..., seed=0)`` gives env ``i`` the tag
    ``i``). The env of tag ``nan_tag`` returns NaN in ``obs["extra"][2]`` at step
    ``nan_step`` of an episode.
    """

    def __init__(
        self,
        terminate_at: int = 2,
        nan_tag: int = -1,
        nan_step: int = 1,
        render_mode: str | None = None,
    ):
        self.tag = 0
        self.terminate_at = terminate_at
        self.nan_tag, self.nan_step = nan_tag, nan_step
        self.render_mode = render_mode
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(-np.inf, np.inf, (2,), np.float64),
                "inner": spaces.Dict(
                    {
                        "count": spaces.Box(0, 2**40, (1,), np.int64),
                        "flags": spaces.MultiBinary(3),
                    }
                ),
                "extra": spaces.Tuple(
                    (
                        spaces.Discrete(8),
                        spaces.MultiDiscrete([3, 4]),
                        spaces.Box(-np.inf, np.inf, (2,), np.float32),
                    )
                ),
            }
        )
        self.action_space = spaces.Box(-2.0, 2.0, (1,), np.float64)
        self.episode = 0
        self.t = 0
        self.action = 0.0

    def _obs(self) -> dict[str, Any]:
        last = np.array([0.25, 0.75 + self.tag], np.float32)
        if self.tag == self.nan_tag and self.t == self.nan_step:
            last[0] = np.nan
        return {
            "pos": np.array([self.tag, self.action], np.float64),
            "inner": {
                "count": np.array([self.t], np.int64),
                "flags": np.array([self.t % 2, 1, 0], np.int8),
            },
            "extra": (self.t, np.array([self.episode % 3, self.t % 4], np.int64), last),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.tag = seed
        self.episode += 1
        self.t = 0
        self.action = 0.0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        self.action = float(action[0])
        return self._obs(), float(self.tag + self.t), self.t >= self.terminate_at, False, {}


# make("envs_testlib:NestedObs-v0", ...) imports this module, in the workers too.
gymnasium.register("NestedObs-v0", entry_point=NestedObsEnv)


class BoundedNestedObsEnv(gymnasium.Env):
    """Nested observations with bounded, partly bounded and unbounded float leaves.

    ``obs = {"b": [(tag + 0.3 t) % 4, cos(tag + t), 7 + t] (float64, bounds [0, -1, 0] to
    [4, 1, inf]), "d": t % 5 (Discrete), "t": ([0.1 t - 1, 0.7 (tag % 3)] (float32 in [-2, 2]),
    [episode % 3, t % 4] (int64 MultiDiscrete), [t] (int64 Box in [0, 10])), "u": [tag / 3]
    (float64, unbounded)}``; ``reward = tag + t``; the episode terminates at
    ``t == terminate_at``. Actions are ``Box(-2, 2, (1,), float64)``; ``tag`` is the seed of
    the last seeded reset. The env of tag ``nan_tag`` returns NaN in ``obs["b"][0]`` (a
    bounded leaf) at step ``nan_step`` of an episode.
    """

    def __init__(
        self,
        terminate_at: int = 3,
        nan_tag: int = -1,
        nan_step: int = 1,
        render_mode: str | None = None,
    ):
        self.tag = 0
        self.render_mode = render_mode
        self.terminate_at = terminate_at
        self.nan_tag, self.nan_step = nan_tag, nan_step
        self.observation_space = spaces.Dict(
            {
                "b": spaces.Box(
                    np.array([0.0, -1.0, 0.0]), np.array([4.0, 1.0, np.inf]), dtype=np.float64
                ),
                "d": spaces.Discrete(5),
                "t": spaces.Tuple(
                    (
                        spaces.Box(-2.0, 2.0, (2,), np.float32),
                        spaces.MultiDiscrete([3, 4]),
                        spaces.Box(0, 10, (1,), np.int64),
                    )
                ),
                "u": spaces.Box(-np.inf, np.inf, (1,), np.float64),
            }
        )
        self.action_space = spaces.Box(-2.0, 2.0, (1,), np.float64)
        self.episode = 0
        self.t = 0

    def _obs(self) -> dict[str, Any]:
        tag, t = self.tag, self.t
        b = np.array([(tag + 0.3 * t) % 4, np.cos(tag + t), 7.0 + t], np.float64)
        if tag == self.nan_tag and t == self.nan_step:
            b[0] = np.nan
        return {
            "b": b,
            "d": t % 5,
            "t": (
                np.array([0.1 * t - 1, 0.7 * (tag % 3)], np.float32),
                np.array([self.episode % 3, t % 4], np.int64),
                np.array([t], np.int64),
            ),
            "u": np.array([tag / 3], np.float64),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.tag = seed
        self.episode += 1
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(self.tag + self.t), self.t >= self.terminate_at, False, {}


# make("envs_testlib:BoundedNestedObs-v0", ...) imports this module, in the workers too.
gymnasium.register("BoundedNestedObs-v0", entry_point=BoundedNestedObsEnv)


class DtypeEnv(gymnasium.Env):
    """A flat Box observation of any dtype: ``obs = base + t`` in the space's dtype, for the
    dtype rule of ``make()``'s stack (``bool``: ``t % 2``). Discrete(2) actions; reward t."""

    def __init__(self, dtype: str = "uint8", base: int = 7, render_mode: str | None = None):
        self.dtype = np.dtype(dtype)
        self.base = base
        if self.dtype == np.bool_:
            self.observation_space = spaces.Box(0, 1, (2, 3), np.bool_)
        elif self.dtype.kind == "f":
            self.observation_space = spaces.Box(-np.inf, np.inf, (2, 3), self.dtype)
        else:
            info = np.iinfo(self.dtype)
            self.observation_space = spaces.Box(info.min, info.max, (2, 3), self.dtype)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self) -> np.ndarray:
        if self.dtype == np.bool_:
            return np.full((2, 3), self.t % 2, np.bool_)
        return np.full((2, 3), self.base + self.t, self.dtype)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(self.t), False, False, {}


gymnasium.register("Dtype-v0", entry_point=DtypeEnv)


class WalkEnv(gymnasium.Env):
    """A walker with known infos: ``x_position`` starts at ``tag`` (in the reset info) and
    grows by 0.5 per step, ``x_velocity`` is the step's number ``t`` (1, 2, ...), ``note`` is
    text. Reward 1 per step; the episode ends after ``3 + tag`` steps, terminated for odd
    tags and truncated for even ones.
    """

    def __init__(self, tag: int = 0):
        self.tag = tag
        self.t = 0
        self.observation_space = spaces.Box(-np.inf, np.inf, (1,), np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"x_position": float(self.tag), "note": "start"}

    def step(self, action):
        self.t += 1
        end = self.t >= 3 + self.tag
        info = {"x_position": self.tag + 0.5 * self.t, "x_velocity": float(self.t), "note": "go"}
        obs = np.array([self.t], np.float32)
        return obs, 1.0, end and self.tag % 2 == 1, end and self.tag % 2 == 0, info
