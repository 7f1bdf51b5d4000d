"""RayBatchEnv: the BatchEnv contract with the workers as Ray actors (beyond one machine).

Each actor holds ``K`` envs stepped by the same ``EnvGroup`` as a BatchEnv worker (same-step
autoreset, dense ``final_obs``); a step sends each actor its slice of the actions and gathers its
arrays through Ray's object store. Slower per step than [`BatchEnv`][batchppo.envs.BatchEnv] on one
machine; use it when the envs do not fit on one.

Connection ([`connect`][batchppo.envs.adapters.ray_env.connect]): an ``address`` (``"auto"`` or
    ``"host:port"``) joins that
cluster; without one, ``RAY_ADDRESS`` is honoured when set, and otherwise a local Ray is started. A
Ray already initialised in this process is reused. An address that does not answer raises
``RayConnectionError`` within ``CONNECT_TIMEOUT`` seconds, where ``ray.init`` would retry for
minutes.

Resources: each actor asks Ray for ``num_cpus`` (half a CPU by default) and the actors must
start within ``startup_timeout``; otherwise ``RayResourcesError`` names what is missing. These
settings and the actors' are one [`RayWorkerOptions`][batchppo.envs.RayWorkerOptions].

Start-up: each env is built once, in its actor, and none in the calling process. The actors
report their envs' spaces once built; env 0's are the batch env's, and every other env's are
checked against them before any step.

Cost: a step is one round trip per actor (one remote call carrying its slice of the actions,
whose result carries all its envs' arrays), never one per env.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import os
import socket
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import cloudpickle
import gymnasium
import numpy as np
from gymnasium import spaces as gym_spaces
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from batchppo.core.worker_options import (
    DEFAULT_NUM_CPUS,
    DEFAULT_STARTUP_TIMEOUT,
    RayWorkerOptions,
)
from batchppo.envs.async_compat import (
    CallingVectorEnv,
    check_action_dtype,
    check_action_shape,
    parse_seeds,
)
from batchppo.envs.errors import EnvTimeoutError, WorkerDiedError, with_message
from batchppo.envs.final_obs import dense_final_obs
from batchppo.envs.infos import merge_info_parts
from batchppo.envs.spaces import is_gym_leaf
from batchppo.envs.stack.batch_transform import SpacesOnly
from batchppo.envs.stack.env_group import EnvGroup, build_envs, check_spaces
from batchppo.envs.workers.protocol import Layout

__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_NUM_CPUS",
    "DEFAULT_STARTUP_TIMEOUT",
    "RayBatchEnv",
    "RayConnectionError",
    "RayResourcesError",
    "RaySetupError",
    "connect",
]

_STACKS_GROUP = "stacks"  # the actors' concurrency group of ``stacks``, beside the steps
_STACKS_WAIT_S = 2.0  # how long a hung actor gets to send its stacks before it is killed
# Seconds to wait for a cluster's address to accept a connection. ``ray.init`` itself retries
# an address that does not answer for minutes.
CONNECT_TIMEOUT = 10.0

# Ray clusters started by this module (their GCS addresses): no autoscaler serves them and only
# this process uses them, so what the live RayBatchEnvs below hold is all that is taken.
_OWN_CLUSTERS: set[str] = set()
# The resources each live RayBatchEnv's actors hold; weak, because Ray ends the actors of an
# env that is dropped without ``close()``.
_HELD: weakref.WeakKeyDictionary[RayBatchEnv, dict[str, float]] = weakref.WeakKeyDictionary()
_HELD_LOCK = threading.Lock()


def _checked_options(options: RayWorkerOptions | None) -> RayWorkerOptions:
    """``options`` as given, or the defaults for None.

    Raises:
        TypeError: Not a ``RayWorkerOptions`` (nor None).
    """
    if options is None:
        return RayWorkerOptions()
    if not isinstance(options, RayWorkerOptions):
        raise TypeError(
            f"options must be a batchppo.envs.RayWorkerOptions or None; got "
            f"{options!r} ({type(options).__name__}): pass, say, "
            "RayWorkerOptions(num_workers=4, address='auto')."
        )
    return options


class RaySetupError(RuntimeError):
    """Ray could not be set up for a RayBatchEnv; the one-line message names the fix."""


class RayResourcesError(RaySetupError):
    """The Ray cluster cannot place a RayBatchEnv's actors; the one-line message says what
    they ask for, what the cluster has and how to fit them."""


class RayConnectionError(RaySetupError):
    """The Ray cluster at the given address (or ``RAY_ADDRESS``) cannot be joined; the
    one-line message names the address, where it came from and the fix."""


def _bootstrap_address(address: str) -> str:
    """``address`` as ``host:port``, resolved as ``ray.init`` resolves it.

    ``"auto"`` becomes the address of the Ray started on this machine by ``ray start``, and a
    loopback host the node's IP address (where Ray listens). Uses Ray's own resolver when
    it is there (it is private); otherwise the address is taken as given.
    """
    if address.startswith("ray://"):  # Ray Client: its server's host:port (untested)
        return address[len("ray://") :]
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:
        return address
    return canonicalize_bootstrap_address(address) or address


def _probe(address: str, timeout: float) -> str | None:
    """Why nothing answers at ``address`` within ``timeout`` seconds; None when it answers."""
    try:
        target = _bootstrap_address(address)
    except ConnectionError:  # "auto" found no Ray
        return "no Ray started by `ray start` runs on this machine"
    except ValueError as exc:  # a malformed address
        return str(exc).splitlines()[0].rstrip(".")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        return f"{target!r} is not host:port"
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return f"nothing answers at {target} ({exc.strerror or exc})"


def connect(address: str | None = None, *, timeout: float = CONNECT_TIMEOUT) -> str:
    """Joins a Ray cluster, or starts a local Ray, for this process (once).

    A Ray already initialised in this process is used as it is; a ``host:port`` ``address``
    other than its own gets a warning that it was not joined.
    Otherwise ``address`` (``"auto"`` or ``"host:port"``) is joined; without one,
    ``RAY_ADDRESS`` is, when it is set; and otherwise a new local Ray is started (never an
    existing one picked up behind the caller's back).

    Args:
        address: The cluster to join; None: ``RAY_ADDRESS``, or a new local Ray.
        timeout: Seconds to wait for the address to accept a connection.

    Returns:
        The GCS address of the Ray this process is now connected to.

    Raises:
        RayConnectionError: Nothing answers at the address, or ``ray.init`` failed there.
    """
    import ray

    if ray.is_initialized():
        current = ray.get_runtime_context().gcs_address
        if address not in (None, "auto", current):
            warnings.warn(
                f"Ray is already initialised in this process (cluster {current}); "
                f"backend_options.address {address!r} is not joined. Call ray.shutdown() first "
                "to join it",
                stacklevel=2,
            )
        return current
    source = "backend_options.address"
    if address is None and os.environ.get("RAY_ADDRESS"):
        address, source = os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    if address is None:
        ray.init(address="local")
        gcs_address = ray.get_runtime_context().gcs_address
        _OWN_CLUSTERS.add(gcs_address)
        return gcs_address
    fix = (
        f"start Ray there (`ray start --head`), correct {source}, or unset "
        "backend_options.address and RAY_ADDRESS to start a local Ray"
    )
    reason = _probe(address, timeout)
    if reason is None:
        try:
            ray.init(address=address)
        except Exception as exc:  # any failure to join is a set-up problem
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].rstrip(".")
            with contextlib.suppress(Exception):
                ray.shutdown()
    if reason is not None:
        raise RayConnectionError(
            f"RayBatchEnv: cannot join the Ray cluster at {address!r} (from {source}): "
            f"{reason}; {fix}"
        )
    return ray.get_runtime_context().gcs_address


def _actor_demand(options: dict[str, Any]) -> dict[str, float]:
    """The resources one actor asks for, keyed as ``ray.cluster_resources()`` keys them."""
    demand = {"CPU": float(options.get("num_cpus", 1) or 0)}
    if options.get("num_gpus"):
        demand["GPU"] = float(options["num_gpus"])
    if options.get("memory"):
        demand["memory"] = float(options["memory"])
    for name, amount in (options.get("resources") or {}).items():
        demand[name] = float(amount)
    return {k: v for k, v in demand.items() if v > 0}


def _fmt(resources: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(resources.items())) + "}"


class _EnvActor:
    """Holds ``K`` envs in a Ray actor; every method returns plain numpy/picklable data.

    Its envs' spaces are checked by the caller (``describe``, before any step): the actor lays out
    its arrays after its own first env's spaces, and only when they are flat spaces a
    ``RayBatchEnv`` can step.
    """

    def __init__(self, payload: bytes, offset: int):
        env_fns = cloudpickle.loads(payload)
        try:
            self.envs = build_envs(env_fns, offset, None)
        except Exception as exc:  # reaches the caller with its own type (see RayBatchEnv._get)
            index = getattr(exc, "batchppo_env_index", offset)
            message = f"{exc}\n[batchppo] raised by env {index} in a Ray actor."
            raise with_message(exc, message) from exc.__cause__
        obs_space, act_space = self.envs[0].observation_space, self.envs[0].action_space
        self.group: EnvGroup | None = None
        if is_gym_leaf(obs_space) and is_gym_leaf(act_space):
            layout = Layout.for_spaces(len(self.envs), 0, obs_space, act_space)
            self.views = layout.views(bytearray(layout.nbytes))
            discrete = isinstance(act_space, gym_spaces.Discrete)
            self.group = EnvGroup(self.envs, offset, self.views, discrete, row=0)

    def describe(self) -> dict[str, Any]:
        """Every env's ``(observation_space, action_space)``, and the first env's metadata and
        render mode (env 0's are the batch env's)."""
        first = self.envs[0]
        return {
            "spaces": [(env.observation_space, env.action_space) for env in self.envs],
            "metadata": dict(getattr(first, "metadata", {}) or {}),
            "render_mode": getattr(first, "render_mode", None),
        }

    def _run(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:
            index = self.group.current_global
            self.group.current = None
            message = f"{exc}\n[batchppo] raised by env {index} in a Ray actor."
            raise with_message(exc, message) from exc.__cause__

    def step(self, actions: np.ndarray, want_info: bool) -> tuple:
        v = self.views
        obs, final_obs = v["obs"][0], v["final_obs"][0]  # flat spaces: one leaf each
        v["act"][0][...] = actions
        info = self._run(lambda: self.group.step(want_info))
        final = dense_final_obs(obs, final_obs, v["terminated"] | v["truncated"])
        return (
            obs.copy(),
            v["reward"].copy(),
            v["terminated"].copy(),
            v["truncated"].copy(),
            final,
            info,
        )

    def reset(self, seeds: Sequence[int | None], options: dict | None) -> tuple:
        info = self._run(lambda: self.group.reset(seeds, options))
        return self.views["obs"][0].copy(), info

    def call(self, name: str, args: tuple, kwargs: dict) -> list:
        return self._run(lambda: self.group.call(name, args, kwargs))

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        self._run(lambda: self.group.set_attr(name, values))

    def close(self) -> None:
        for env in self.envs:
            with contextlib.suppress(Exception):
                env.close()

    def stacks(self) -> str:
        """The Python stacks of this actor's threads that are inside an env call.

        Runs in its own concurrency group (``_STACKS_GROUP``), so it answers while a step hangs in
        the default group, unless the env holds the interpreter in C code.
        """
        me = threading.get_ident()
        out = []
        for ident, frame in sys._current_frames().items():
            stack = traceback.extract_stack(frame)
            ours = [i for i, f in enumerate(stack) if f.filename == __file__]
            if ident != me and ours:  # from this actor's method down: Ray's frames left out
                out.append(
                    f"Thread {ident:#x}:\n{''.join(traceback.format_list(stack[ours[0] :]))}"
                )
        return "\n".join(out) or "(no thread of the actor is in an env call)"

    def location(self) -> tuple[str, int]:
        """``(node id, pid)`` of this actor."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()


class RayBatchEnv(CallingVectorEnv):
    """The [`BatchEnv`][batchppo.envs.BatchEnv] contract with workers as Ray actors.

    Same API and semantics as ``BatchEnv`` (same-step autoreset, dense ``infos["final_obs"]``,
    ``step_arrays``, seeds ``seed + i``, ``call``/``get_attr``/``set_attr``/``render``). Connects to
    Ray through [`connect`][batchppo.envs.adapters.ray_env.connect] (``address``, else
    ``RAY_ADDRESS``, else a new local Ray) when Ray is not initialised in this process yet. Each env
    is built once, in its actor; the spaces are those the actors report of their envs (env 0's,
    checked against every other env's), so no env is built in the calling process. A step sends one
    remote call to each actor, which steps all its envs: one round trip per actor. An actor that
    dies (killed, its process crashed, its node lost) makes the next step raise
    [`WorkerDiedError`][batchppo.envs.WorkerDiedError], naming the actor and its envs, as soon as
    Ray reports it.

    Args:
        env_fns: One callable per env.
        options: The actors and the cluster: a
            [`RayWorkerOptions`][batchppo.envs.RayWorkerOptions]
            (``num_workers``, ``envs_per_worker``, ``step_timeout``, ``address``, ``num_cpus``,
            ``startup_timeout``); None: its defaults (an actor per CPU of the cluster, half a
            CPU each, no time limit on a step). Past ``step_timeout`` the hung actors are asked
            for their stacks (a method in a concurrency group of its own, so it runs beside the
            hung step unless the env holds the interpreter in C code), killed, and the call
            raises [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] naming their envs and
            showing the stacks; the batch env cannot continue after that.
        copy: Accepted for API parity; arrays returned are always fresh.
        actor_options: Passed to ``ray.remote``; its ``num_cpus`` wins over the options'.

    Attributes:
        options: The options given at construction (``step_timeout`` is theirs too).
        remote_calls: Remote calls sent to the actors so far: one per actor for each step,
            reset or call (and for the start-up check), whatever the number of envs.

    Raises:
        ImportError: Ray is not installed (``pip install batchppo[ray]``).
        TypeError: ``options`` is not a ``RayWorkerOptions``.
        ValueError: Env 0 has a Dict or Tuple space (use ``BatchEnv``).
        SpaceMismatchError: An env's spaces differ from env 0's (names the env).
        RayConnectionError: ``address`` (or ``RAY_ADDRESS``) cannot be joined.
        RayResourcesError: The actors cannot be placed: at once when this env started the
            local Ray and the envs of this process already hold what it needs, otherwise
            after ``startup_timeout``.
    """

    def __init__(
        self,
        env_fns: Iterable[Callable[[], gymnasium.Env]],
        options: RayWorkerOptions | None = None,
        *,
        copy: bool = True,
        actor_options: dict[str, Any] | None = None,
    ):
        import ray

        options = _checked_options(options)
        self._ray = ray
        self.options = options
        self.step_timeout = options.step_timeout
        self._started = 0.0  # when the call in flight was sent (step_timeout's clock)
        self._actors: list[Any] = []
        self.remote_calls = 0
        self.closed = False
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("RayBatchEnv needs at least one env function; got an empty list.")
        remote = {
            "num_cpus": options.num_cpus,
            "concurrency_groups": {_STACKS_GROUP: 1},
            **(actor_options or {}),
        }
        connect(options.address)
        self.num_envs = n = len(env_fns)
        workers = options.num_workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        per = options.envs_per_worker or math.ceil(n / workers)
        self._ranges = [(i, min(i + per, n)) for i in range(0, n, per)]
        self.copy = copy
        self._pending: list[Any] | None = None
        self._want_info = False
        demand = {k: v * len(self._ranges) for k, v in _actor_demand(remote).items()}
        self._check_resources(demand)
        actor_cls = ray.remote(**remote)(_EnvActor)
        with _HELD_LOCK:
            _HELD[self] = demand
        for start, stop in self._ranges:
            self._actors.append(actor_cls.remote(cloudpickle.dumps(env_fns[start:stop]), start))
        try:
            self._set_spaces(self._await_start(demand, options.startup_timeout))
        except BaseException:
            self.close()
            raise

    def _set_spaces(self, reports: list[dict[str, Any]]) -> None:
        """Takes env 0's spaces, metadata and render mode from the actors' reports
        (``_EnvActor.describe``), after checking every env's spaces against env 0's.

        Raises:
            ValueError: Env 0 has a space other than Box/Discrete/MultiDiscrete/MultiBinary.
            SpaceMismatchError: An env's spaces differ from env 0's (names the env).
        """
        obs_space, act_space = reports[0]["spaces"][0]
        for label, space in (("observation", obs_space), ("action", act_space)):
            if not is_gym_leaf(space):
                raise ValueError(
                    f"RayBatchEnv supports Box, Discrete, MultiDiscrete and MultiBinary spaces; "
                    f"the {label} space is {space}. Use BatchEnv for Dict and Tuple spaces."
                )
        for (start, _), report in zip(self._ranges, reports, strict=True):
            for j, spaces in enumerate(report["spaces"]):
                check_spaces(SpacesOnly(*spaces), start + j, (obs_space, act_space))
        n = self.num_envs
        self.metadata = dict(reports[0]["metadata"])
        self.render_mode = reports[0]["render_mode"]
        self.metadata["autoreset_mode"] = AutoresetMode.SAME_STEP
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = batch_space(obs_space, n)
        self.action_space = batch_space(act_space, n)
        self._act_shape = (n, *act_space.shape)
        self._act_dtype = np.dtype(act_space.dtype)

    def _check_resources(self, demand: dict[str, float]) -> None:
        """Fails at once when the actors can never be placed on a Ray this module started.

        Such a cluster has no autoscaler and serves only this process, so its totals less
        what this process's live RayBatchEnvs hold is exactly what is left. Elsewhere Ray may
        free or add resources, and ``_await_start`` waits for them instead.
        """
        ray = self._ray
        if ray.get_runtime_context().gcs_address not in _OWN_CLUSTERS:
            return
        total = ray.cluster_resources()
        with _HELD_LOCK:
            held = list(_HELD.values())
        free = {k: total.get(k, 0.0) - sum(h.get(k, 0.0) for h in held) for k in demand}
        if any(free[k] < amount - 1e-6 for k, amount in demand.items()):
            raise RayResourcesError(
                f"{self._want(demand)}, but the local Ray started by batchppo has "
                f"{_fmt({k: total.get(k, 0.0) for k in demand})}, of which the other Ray envs "
                f"of this process leave {_fmt(free)}; {self._hint()}"
            )

    def _await_start(self, demand: dict[str, float], timeout: float | None) -> list[dict[str, Any]]:
        """Waits for every actor's construction, up to ``timeout`` seconds.

        Returns:
            What each actor says of its envs (``_EnvActor.describe``), in actor order.
        """
        ray = self._ray
        refs = self._send("describe", lambda start, stop: ())
        try:
            return self._get(refs, timeout)
        except mp.TimeoutError:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            # Actors still waiting for resources would never answer ``close``: kill them now
            # so that ``close`` only waits for the ones that started.
            started = {ref.hex() for ref in ready}
            for actor, ref in zip(list(self._actors), refs, strict=True):
                if ref.hex() not in started:
                    with contextlib.suppress(Exception):
                        ray.kill(actor)
                    self._actors.remove(actor)
            raise RayResourcesError(
                f"{self._want(demand)}, but {len(refs) - len(ready)} of {len(refs)} did not "
                f"start within {timeout:g} s; the cluster has "
                f"{_fmt({k: ray.available_resources().get(k, 0.0) for k in demand})} available "
                f"of {_fmt({k: ray.cluster_resources().get(k, 0.0) for k in demand})}; "
                f"{self._hint()} (or raise startup_timeout)"
            ) from None

    def _want(self, demand: dict[str, float]) -> str:
        return (
            f"RayBatchEnv: {len(self._ranges)} Ray env actors for {self.num_envs} envs "
            f"need {_fmt(demand)}"
        )

    @staticmethod
    def _hint() -> str:
        return (
            "lower num_workers or num_cpus per actor, close other Ray envs, or give Ray more "
            "resources"
        )

    def _send(self, method: str, args: Callable[[int, int], tuple]) -> list[Any]:
        """Calls ``method`` once on each actor, with ``args(start, stop)`` of its env range.

        Every remote call goes through here and is counted in ``remote_calls``: one per actor
        for each step, reset or call, whatever the number of envs.
        """
        refs = [
            getattr(actor, method).remote(*args(start, stop))
            for actor, (start, stop) in zip(self._actors, self._ranges, strict=False)
        ]
        self.remote_calls += len(refs)
        self._started = time.monotonic()
        return refs

    def _get(
        self, refs: list[Any], timeout: float | None = None, what: str | None = None
    ) -> list[Any]:
        """The results of ``refs``, one remote call per actor.

        Args:
            refs: What ``_send`` returned.
            timeout: A ``*_wait`` timeout: past it ``multiprocessing.TimeoutError``.
            what: The call, for an [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] (``"a
                step"``); None: the call is not bound by ``step_timeout``.
        """
        ray = self._ray
        hard = False  # whether the wait ends at the step_timeout deadline
        if what is not None and self.step_timeout is not None:
            left = max(0.0, self._started + self.step_timeout - time.monotonic())
            hard = timeout is None or left <= timeout
            timeout = left if hard else timeout
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            if hard:
                raise self._hung_error(refs, what) from None
            raise mp.TimeoutError("step_wait timed out; call it again to keep waiting.") from None
        except ray.exceptions.RayActorError as exc:
            cause = exc.args[0] if exc.args else None
            if isinstance(cause, ray.exceptions.RayTaskError):  # an env's constructor raised
                raise cause.as_instanceof_cause() from None
            raise self._dead(exc) from None
        except ray.exceptions.RayTaskError as exc:
            raise exc.as_instanceof_cause() from None

    def _dead(self, exc: Exception) -> WorkerDiedError:
        """The one-line error for an actor that died: which actor, its envs, Ray's reason."""
        dead = getattr(exc, "actor_id", None)
        ids = [actor._actor_id.hex() for actor in self._actors]
        if dead in ids:
            slot = ids.index(dead)
            start, stop = self._ranges[slot]
            who = f"Ray env actor {slot} (envs {start}..{stop - 1})"
        else:
            who = "A Ray env actor"
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        # Ray's first line says that the actor died, its last one why (killed, exit, node lost).
        parts = [line.split(". ")[0].rstrip(".") for line in lines[:1] + lines[-1:]]
        reason = "; ".join(dict.fromkeys(parts)) or "no reason given"
        return WorkerDiedError(
            f"{who} died: {reason}. The batch env cannot continue; close it and build a new one."
        )

    def _hung_error(self, refs: list[Any], what: str) -> EnvTimeoutError:
        """Asks the actors that did not answer ``refs`` in time for their stacks, kills them,
        and returns the error naming their envs."""
        ray = self._ray
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        hung = [slot for slot, ref in enumerate(refs) if ref not in ready]
        asks = {}
        for slot in hung:
            with contextlib.suppress(Exception):  # actor_options may have replaced the group
                stacks = self._actors[slot].stacks.options(concurrency_group=_STACKS_GROUP)
                asks[slot] = stacks.remote()
        end = time.monotonic() + _STACKS_WAIT_S
        parts = []
        for slot in hung:
            try:
                stacks = ray.get(asks[slot], timeout=max(0.0, end - time.monotonic()))
            except Exception:
                stacks = "(none came: the actor did not answer for its stacks either)"
            start, stop = self._ranges[slot]
            parts.append((f"envs {start}..{stop - 1} (Ray env actor {slot})", stacks))
            with contextlib.suppress(Exception):
                ray.kill(self._actors[slot])
        envs = "; ".join(who for who, _ in parts)
        where = "\n".join(f"Stacks of {who}, where it was stuck:\n{text}" for who, text in parts)
        return EnvTimeoutError(
            f"{envs} did not answer {what} within step_timeout={self.step_timeout:g} s, so "
            f"{'its actor was' if len(parts) == 1 else 'their actors were'} killed and the "
            "batch env cannot continue (raise step_timeout, backend_options.step_timeout in a "
            f"config, if the env is only slow).\n{where}"
        )

    @property
    def actor_handles(self) -> tuple[Any, ...]:
        """The Ray handles of the env actors, one per actor in env order (actor ``i`` steps
        the ``i``-th share of the envs); empty once closed. Read-only: for tests and
        monitoring (``ray.kill`` one to see the batch env fail fast)."""
        return tuple(self._actors)

    def actor_locations(self) -> tuple[tuple[str, int], ...]:
        """``(node id, pid)`` of each actor, in env order: where the envs run."""
        self._check()
        return tuple(self._get(self._send("location", lambda start, stop: ())))

    def _check(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError("This RayBatchEnv is closed; build a new one.")

    def step_async(self, actions: Any, want_info: bool = True) -> None:
        """Sends each actor its slice of ``actions``."""
        self._check()
        if self._pending is not None:
            raise AlreadyPendingCallError("A step is pending; call step_wait first.", "step")
        actions = np.asarray(actions)
        check_action_shape(actions.shape, self._act_shape)
        check_action_dtype(actions.dtype, self._act_dtype, self._act_shape)
        actions = actions.astype(self._act_dtype, copy=False)
        self._want_info = want_info
        self._pending = self._send("step", lambda start, stop: (actions[start:stop], want_info))

    def _wait_arrays(self, timeout: float | None) -> tuple[list[np.ndarray], dict[str, Any]]:
        if self._pending is None:
            raise NoAsyncCallError("step_wait called without a pending step_async.", "step")
        try:
            results = self._get(self._pending, timeout, "a step")
        except mp.TimeoutError:
            raise  # still pending: step_wait may be called again
        except BaseException:
            self._pending = None
            raise
        self._pending = None
        arrays = [np.concatenate([r[k] for r in results]) for k in range(5)]
        parts = [
            (start, stop - start, r[5])
            for (start, stop), r in zip(self._ranges, results, strict=True)
        ]
        return arrays, merge_info_parts(parts, self.num_envs)

    def step_wait(self, timeout: float | None = None) -> tuple:
        """Gathers the step: ``(obs, reward, terminated, truncated, infos)``."""
        (obs, reward, terminated, truncated, final_obs), infos = self._wait_arrays(timeout)
        infos["final_obs"] = final_obs
        infos["_final_obs"] = terminated | truncated
        return obs, reward, terminated, truncated, infos

    def step(self, actions: Any) -> tuple:
        """Steps every env (same-step autoreset)."""
        self.step_async(actions)
        return self.step_wait()

    def step_arrays(self, actions: Any) -> tuple:
        """``(obs, reward, terminated, truncated, final_obs)`` without infos."""
        self.step_async(actions, want_info=False)
        return tuple(self._wait_arrays(None)[0])

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Resets every env; env ``i`` gets ``seed + i``."""
        self._check()
        seeds = parse_seeds(seed, self.num_envs)
        refs = self._send("reset", lambda start, stop: (seeds[start:stop], options))
        results = self._get(refs, what="a reset")
        parts = [
            (start, stop - start, r[1])
            for (start, stop), r in zip(self._ranges, results, strict=True)
        ]
        return np.concatenate([r[0] for r in results]), merge_info_parts(parts, self.num_envs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls ``name`` on every env (or reads the attribute)."""
        self._check()
        refs = self._send("call", lambda start, stop: (name, args, kwargs))
        results = self._get(refs, what="a call")
        return tuple(x for r in results for x in r)

    def set_attr(self, name: str, values: Any) -> None:
        """Sets attribute ``name``; one value or one per env."""
        self._check()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr needs one value or {self.num_envs}; got {len(values)}.")
        refs = self._send("set_attr", lambda start, stop: (name, list(values[start:stop])))
        self._get(refs, what="a call")

    def close_extras(self, **kwargs: Any) -> None:
        """Closes the envs and kills the actors (never hangs: 5 s for a clean close)."""
        ray = self._ray
        with contextlib.suppress(Exception):
            ray.get(self._send("close", lambda start, stop: ()), timeout=5)
        for actor in self._actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        self._actors = []
        with _HELD_LOCK:
            _HELD.pop(self, None)
