"""EnvGroup: ``K`` envs built and stepped in a loop over (shared) arrays, with autoreset.

The same ``EnvGroup`` steps the envs of a [`BatchEnv`][batchppo.envs.BatchEnv] worker process, the
parent's own share of the envs and the envs of a Ray actor, so the autoreset logic (all of
Gymnasium's modes), restarts and the batch transform exist once. ``build_envs`` builds a group's
envs and checks that their spaces agree.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium
import numpy as np
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode

from batchppo.envs.errors import SpaceMismatchError, describe_exception
from batchppo.envs.infos import batch_infos
from batchppo.envs.spaces import flattener, is_gym_leaf, unflatten

if TYPE_CHECKING:
    from batchppo.envs.stack.batch_transform import BatchTransform

__all__ = [
    "OBS_RULES",
    "EnvGroup",
    "TreeRows",
    "build_envs",
    "check_spaces",
    "space_difference",
]


class TreeRows:
    """Rows of a nested space's leaf arrays, read and written one env's nested value at a time.

    It stands in for the single array of a flat space inside ``EnvGroup``, with the indexing that
    the group's step loop uses, so that loop is the same code for both: ``rows[j] = value`` writes
    env ``j``'s value into every leaf, ``rows[...] = values`` writes one value per env, and
    ``copy()`` gives fresh per-env values (dicts/tuples of arrays), as an array's ``copy()`` gives
    fresh rows.

    Args:
        space: The (single-env) Dict or Tuple space.
        arrays: One array per leaf (see ``batchppo.envs.spaces``), ``K`` rows each.
    """

    def __init__(self, space: gymnasium.Space, arrays: Sequence[np.ndarray]):
        self.space = space
        self.arrays = list(arrays)
        self._flatten = flattener(space)

    def __setitem__(self, index: Any, value: Any) -> None:
        if index is Ellipsis:
            flat = [self._flatten(v) for v in value]
            for k, array in enumerate(self.arrays):
                array[...] = [leaves[k] for leaves in flat]
            return
        for array, leaf in zip(self.arrays, self._flatten(value), strict=True):
            array[index] = leaf

    def row(self, index: int) -> Any:
        """A copy of row ``index`` as one nested value (a dict/tuple of arrays)."""
        return unflatten(self.space, [array[index].copy() for array in self.arrays])

    def copy(self) -> list[Any]:
        """One fresh nested value per row (an env may keep what it was given)."""
        copies = [array.copy() for array in self.arrays]
        return [unflatten(self.space, [c[j] for c in copies]) for j in range(len(copies[0]))]


def _rows(space: gymnasium.Space, arrays: Sequence[np.ndarray], rows: slice) -> Any:
    """The rows ``rows`` of a space's leaf arrays: an array (flat space) or a TreeRows."""
    if is_gym_leaf(space):
        return arrays[0][rows]
    return TreeRows(space, [array[rows] for array in arrays])


def _row_copy(rows: Any, index: int) -> Any:
    """A copy of row ``index`` of an array or a ``TreeRows``."""
    return rows.row(index) if isinstance(rows, TreeRows) else rows[index].copy()


_SPACE_NAMES = ("observation_space", "action_space")


class EnvGroup:
    """``K`` envs stepped in a loop, writing into (shared) numpy arrays, with autoreset.

    Args:
        envs: The envs (their spaces are env 0's, checked by ``build_envs``).
        offset: Global index of the first env (for error messages and seeds).
        views: Arrays of the whole batch (from ``Layout.views``); the group works on the rows
            ``offset : offset + len(envs)``.
        discrete: Whether actions are scalar integers (passed to the envs as Python ints).
        row: First row of ``views`` to use, when it differs from ``offset`` (views holding
            only this group's rows, as in a Ray actor).
        autoreset_mode: Gymnasium's autoreset mode (``SAME_STEP``, ``NEXT_STEP`` or
            ``DISABLED``), as ``AsyncVectorEnv``'s workers apply it.
        env_fns: The functions that built ``envs`` (``SAME_STEP`` only). When given, the group is
            *restartable*: an env whose ``step`` raises no longer ends the step. Its report goes to
            ``failures``, its row gets the last obs it returned (as obs and final obs), reward 0 and
            ``truncated``, the other envs step on, and ``restart`` rebuilds it later.
        transform: A standard wrapper stack to apply to all the group's envs at once (see
            ``batchppo.envs.stack.batch_transform``): the envs are the raw ones, ``views`` has the
            transformed spaces. A non-finite observation or reward raises in the group as in the
            stack, from the env that returned it (``current``), or, when the group is restartable,
            fails that env as an exception in its step would.
    """

    def __init__(
        self,
        envs: Sequence[gymnasium.Env],
        offset: int,
        views: dict[str, Any],
        discrete: bool,
        row: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        env_fns: Sequence[Callable[[], gymnasium.Env]] | None = None,
        transform: BatchTransform | None = None,
    ):
        self.envs = list(envs)
        self.offset = offset
        self.count = len(self.envs)
        start = offset if row is None else row
        rows = slice(start, start + self.count)
        obs_space = self.envs[0].observation_space
        self.obs = _rows(obs_space, views["obs"], rows)
        self.final_obs = _rows(obs_space, views["final_obs"], rows)
        self.act = _rows(self.envs[0].action_space, views["act"], rows)
        self.reward = views["reward"][rows]
        self.terminated = views["terminated"][rows]
        self.truncated = views["truncated"][rows]
        self.discrete = discrete
        self.current: int | None = None  # local index of the env being stepped (for errors)
        self._steps = [env.step for env in self.envs]
        self._obs_list: list[Any] = [None] * self.count
        self._rewards: list[Any] = [0.0] * self.count
        self._terms: list[Any] = [False] * self.count
        self._truncs: list[Any] = [False] * self.count
        self._infos: list[Any] = [{}] * self.count
        self._resets = [env.reset for env in self.envs]
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        # NEXT_STEP: envs whose episode ended on the last step and are reset on the next.
        self._autoreset = [False] * self.count
        if self.autoreset_mode is not AutoresetMode.SAME_STEP:
            if env_fns is not None:
                raise ValueError(
                    f"env restarts need autoreset_mode=SAME_STEP; got {self.autoreset_mode}."
                )
            # Bound once here, so the same-step loop (the learner's) stays free of mode tests.
            self.step = self._step_next_or_disabled  # type: ignore[method-assign]
        self._env_fns = None if env_fns is None else list(env_fns)
        self.failures: list[dict[str, Any]] = []  # reports of the envs that raised this step
        self._broken: set[int] = set()  # local indices of envs that raised, not yet rebuilt
        self._transform = transform
        # The step loops write the final obs of an episode that ended here: into the shared
        # rows, or, with a transform, raw into a dict {local index: obs} mapped after the loop.
        self._final_sink: Any = self.final_obs
        if transform is not None:
            self._actions = functools.partial(transform.actions, self.act)
            self._final_sink = {}
            self._t = 0  # steps taken by the group (for the step of an episode in errors)
            self._episode_start = [0] * self.count  # ``_t`` at each env's last reset
        elif discrete:
            self._actions = self.act.tolist
        else:
            # A fresh array: an env may keep a reference to the action it was given.
            self._actions = self.act.copy

    @property
    def current_global(self) -> int | None:
        """Global index of the env that is (or was last) being worked on."""
        return None if self.current is None else self.offset + self.current

    def step(self, want_info: bool) -> dict[str, Any]:
        """Steps every env once with the actions in shared memory; resets finished envs.

        This is the ``SAME_STEP`` loop; the other modes replace it at construction with
        ``_step_next_or_disabled``. Writes obs (the next episode's first obs where one ended),
        reward, terminated, truncated, and, for finished envs only, the final obs of the episode.

        Args:
            want_info: Whether to collect and batch the infos.

        Returns:
            The batched infos of this group (``{}`` when none or not wanted).
        """
        actions = self._actions()
        if self._env_fns is None:
            return self._publish(self._step_from(0, actions, want_info), want_info)
        self.failures = []
        any_info, start = False, 0
        while start < self.count:
            try:
                any_info |= self._step_from(start, actions, want_info)
                break
            except Exception as exc:
                start = self._fail(exc, want_info) + 1
        return self._publish(any_info, want_info)

    def _step_from(self, start: int, actions: Any, want_info: bool) -> bool:
        """The ``SAME_STEP`` loop over envs ``start, start + 1, ...``; whether any gave info.

        On an exception, ``current`` is the env that raised.
        """
        resets, final_obs, steps = self._resets, self._final_sink, self._steps
        # Per-env results go to Python lists first (cheaper than numpy item stores) and reach
        # the shared arrays in one vectorised store each.
        obs, rewards, terms, truncs = self._obs_list, self._rewards, self._terms, self._truncs
        infos = self._infos
        any_info = False
        j = start - 1
        try:
            for j in range(start, self.count):
                o, rewards[j], te, tr, info = steps[j](actions[j])
                terms[j] = te
                truncs[j] = tr
                if te or tr:
                    final_obs[j] = o
                    o, reset_info = resets[j]()
                    if want_info:
                        # Gymnasium's SAME_STEP contract: an env that ended reports its final
                        # info (masked by ``_final_info``), even an empty one.
                        info = {**reset_info, "final_info": info}
                obs[j] = o
                if want_info:
                    infos[j] = info
                    if info:
                        any_info = True
        except BaseException:
            self.current = j
            raise
        return any_info

    def _fail(self, exc: Exception, want_info: bool) -> int:
        """Records that env ``current`` raised ``exc`` in a step; returns its index.

        The env's row reports its last obs (still in the shared obs row) as obs and final obs,
        reward 0, ``truncated``, and no info; the env waits for ``restart``.
        """
        j = self.current
        assert j is not None
        self.failures.append(describe_exception(exc, self.offset + j))
        self._broken.add(j)
        last = _row_copy(self.obs, j)
        self._obs_list[j] = last
        self.final_obs[j] = last
        self._rewards[j], self._terms[j], self._truncs[j] = 0.0, False, True
        if want_info:
            self._infos[j] = {}
        self.current = None
        return j

    def restart(self, rows: Sequence[int], seeds: Sequence[int | None]) -> list[dict[str, Any]]:
        """Starts a new episode in the envs ``rows`` (local indices): their restart.

        An env that raised in the last step is closed (errors ignored) and built again first.
        Each env is reset with its seed; its row gets the new episode's first obs, reward 0,
        ``terminated`` False and ``truncated`` True. The final obs row is left alone: it holds
        the last obs of the episode that was cut short.

        Args:
            rows: Local indices of the envs to restart.
            seeds: One seed (or None) per env of ``rows``.

        Returns:
            The reset infos, one per env of ``rows``.

        Raises:
            RuntimeError: The group was built without ``env_fns`` and an env needs rebuilding.
            Exception: What building or resetting an env raised (``current`` names it).
        """
        infos = []
        for j, seed in zip(rows, seeds, strict=True):
            self.current = j
            if j in self._broken:
                if self._env_fns is None:
                    raise RuntimeError("this EnvGroup was built without env_fns: no restarts")
                old = self.envs[j]
                with contextlib.suppress(Exception):
                    old.close()
                spaces = (old.observation_space, old.action_space)  # the env it replaces
                env = build_envs(self._env_fns[j : j + 1], self.offset + j, spaces)[0]
                self.envs[j], self._steps[j], self._resets[j] = env, env.step, env.reset
                self._broken.discard(j)
            o, info = self.envs[j].reset(seed=seed)
            if self._transform is not None:
                o = self._transform.observation(o)
                self._episode_start[j] = self._t
            self.obs[j] = o
            self.reward[j] = 0.0
            self.terminated[j] = False
            self.truncated[j] = True
            infos.append(info)
        self.current = None
        return infos

    def _step_next_or_disabled(self, want_info: bool) -> dict[str, Any]:
        """The ``NEXT_STEP`` and ``DISABLED`` loop, as ``AsyncVectorEnv``'s worker steps.

        ``NEXT_STEP``: an env whose episode ended on the previous step ignores its action
        and is reset instead; it reports the reset obs and info, reward 0 and both flags
        False. ``DISABLED``: every env is stepped, ended or not; resetting is the caller's
        job (``reset(options={"reset_mask": mask})``). No final obs is written.
        """
        actions = self._actions()
        next_step = self.autoreset_mode is AutoresetMode.NEXT_STEP
        autoreset, resets = self._autoreset, self._resets
        # With a transform: the envs reset instead of stepped (their obs is a reset obs).
        fresh = [j for j, a in enumerate(autoreset) if a] if self._transform is not None else None
        obs, rewards, terms, truncs = self._obs_list, self._rewards, self._terms, self._truncs
        infos = self._infos
        any_info = False
        j = -1
        try:
            for step in self._steps:
                j += 1
                if autoreset[j]:
                    o, info = resets[j]()
                    rewards[j], te, tr = 0.0, False, False
                else:
                    o, rewards[j], te, tr, info = step(actions[j])
                terms[j] = te
                truncs[j] = tr
                if next_step:
                    autoreset[j] = bool(te or tr)
                obs[j] = o
                if want_info:
                    infos[j] = info
                    if info:
                        any_info = True
        except BaseException:
            self.current = j
            raise
        return self._publish(any_info, want_info, fresh)

    def _publish(
        self, any_info: bool, want_info: bool, fresh: list[int] | None = None
    ) -> dict[str, Any]:
        """Stores a step's per-env lists in the shared arrays; returns the batched infos.

        Args:
            any_info: Whether an env returned an info.
            want_info: Whether infos are collected (for the envs a transform fails).
            fresh: With a transform, in ``NEXT_STEP`` mode: the envs reset instead of
                stepped.
        """
        if self._transform is None:
            self.obs[...] = self._obs_list
            self.reward[:] = self._rewards
        else:
            self._publish_transformed(want_info, fresh or [])
        self.terminated[:] = self._terms
        self.truncated[:] = self._truncs
        return batch_infos(self._infos) if any_info else {}

    def _publish_transformed(self, want_info: bool, fresh: list[int]) -> None:
        """Maps and checks a step's observations and rewards at once; stores them.

        Raises:
            ValueError: An env returned a non-finite observation or reward (not restartable;
                ``current`` is that env). A restartable group fails such envs instead.
        """
        transform = self._transform
        self._t += 1
        finals = self._final_sink  # {j: raw final obs} of the episodes that ended
        skip = {report["env_index"] - self.offset for report in self.failures}
        for j in skip:  # envs that raised: their rows already hold what they report
            finals.pop(j, None)
        obs = transform.observations(np.asarray(self._obs_list))
        total = float(obs.sum()) + sum(self._rewards)
        rows = list(finals)
        final = None
        if rows:
            final = transform.observations(np.asarray([finals[j] for j in rows]))
            total += float(final.sum())
        finals.clear()
        if not math.isfinite(total):  # NaN and inf survive a sum: look env by env
            ended = dict(zip(rows, final, strict=True)) if rows else {}
            starts = rows or fresh
            failed = self._fail_non_finite(obs, ended, starts, skip, want_info)
            if failed:
                skip |= failed
                if rows:
                    keep = [k for k, j in enumerate(rows) if j not in failed]
                    rows, final = [rows[k] for k in keep], final[keep]
        for j in skip:
            obs[j] = self._obs_list[j]
        self.obs[...] = obs
        if rows:
            self.final_obs[rows] = final
        self.reward[:] = self._rewards
        start = self._episode_start
        for j in rows or fresh:
            start[j] = self._t

    def _fail_non_finite(
        self,
        obs: np.ndarray,
        ended: dict[int, np.ndarray],
        starts: list[int],
        skip: set[int],
        want_info: bool,
    ) -> set[int]:
        """The slow path of the finiteness check: finds the envs that returned NaN or inf.

        Args:
            obs: The normalised obs of every env (reset obs where an episode started).
            ended: The normalised final obs of the envs whose episode ended (``SAME_STEP``).
            starts: The envs whose obs is a reset obs.
            skip: Envs that raised in this step.
            want_info: Whether infos are collected.

        Returns:
            The envs failed (restartable group); empty when every value was finite.

        Raises:
            ValueError: The first such env's error (not restartable; ``current`` is it).
        """
        starts_set = set(starts)
        # The obs each env's step returned: its final obs where its episode ended; none where
        # it was reset instead of stepped (NEXT_STEP).
        step_obs = [
            ended[j] if j in ended else None if j in starts_set else obs[j]
            for j in range(self.count)
        ]
        reset_obs = {j: obs[j] for j in starts}
        steps = [self._t - s for s in self._episode_start]
        errors = self._transform.first_error(self._rewards, step_obs, reset_obs, steps, skip)
        if errors and self._env_fns is None:
            self.current = errors[0][0]
            raise ValueError(errors[0][1])
        for j, message in errors:
            self.current = j
            try:
                raise ValueError(message)
            except ValueError as exc:  # raised, so that its report has a traceback
                self._fail(exc, want_info)
        if errors:
            self.failures.sort(key=lambda report: report["env_index"])
        return {j for j, _ in errors}

    def reset(
        self,
        seeds: Sequence[int | None],
        options: dict[str, Any] | None,
        mask: Sequence[bool] | None = None,
    ) -> dict[str, Any]:
        """Resets the envs (env ``j`` with ``seeds[j]``); writes their obs, clears their flags.

        Args:
            seeds: One seed (or None) per env of the group.
            options: Passed to every env's ``reset``.
            mask: Reset only env ``j`` with ``mask[j]`` (Gymnasium's ``reset_mask``); the
                others keep their state and their last obs, and report no info.

        Returns:
            The batched reset infos of this group.
        """
        infos: list[dict[str, Any]] = [{}] * self.count
        for j, env in enumerate(self.envs):
            if mask is not None and not mask[j]:
                continue
            self.current = j
            o, infos[j] = env.reset(seed=seeds[j], options=options)
            if self._transform is not None:
                o = self._transform.observation(o)
                self._episode_start[j] = self._t
            self.obs[j] = o
            self.final_obs[j] = o
            self.reward[j] = 0.0
            self.terminated[j] = False
            self.truncated[j] = False
            self._autoreset[j] = False
        self.current = None
        return batch_infos(infos)

    def call(self, name: str, args: tuple, kwargs: dict) -> list[Any]:
        """Calls method ``name`` (or reads attribute ``name``) on every env (through wrappers)."""
        results = []
        if self._transform is not None and name in _SPACE_NAMES:
            # The envs are raw; the spaces they have in the batch are the transform's.
            return [self._transform.spaces[_SPACE_NAMES.index(name)]] * self.count
        for j, env in enumerate(self.envs):
            self.current = j
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        self.current = None
        return results

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        """Sets attribute ``name`` of env ``j`` to ``values[j]`` (through wrappers)."""
        for j, env in enumerate(self.envs):
            self.current = j
            env.set_wrapper_attr(name, values[j])
        self.current = None

    def close(self) -> None:
        """Closes every env, ignoring errors (closing must not fail)."""
        for env in self.envs:
            with contextlib.suppress(Exception):
                env.close()


def build_envs(
    env_fns: Sequence[Callable[[], gymnasium.Env]],
    offset: int,
    spaces: tuple[gymnasium.Space, gymnasium.Space] | None,
    obs_rule: str = "same",
) -> list[gymnasium.Env]:
    """Builds envs, checking that their spaces match ``spaces`` (observation, action).

    An exception raised while building env ``offset + j`` carries that index in its attribute
    ``batchppo_env_index``; the envs built so far are closed.

    Args:
        env_fns: One function per env.
        offset: Global index of the first env (named in errors).
        spaces: The expected ``(observation_space, action_space)``; None checks nothing.
        obs_rule: How observation spaces must match (see ``check_spaces``).

    Raises:
        SpaceMismatchError: An env's spaces do not match (names the env index).
    """
    envs: list[gymnasium.Env] = []
    index = offset
    try:
        for j, fn in enumerate(env_fns):
            index = offset + j
            env = fn()
            envs.append(env)
            if spaces is not None:
                check_spaces(env, index, spaces, obs_rule)
    except BaseException as exc:
        for env in envs:
            with contextlib.suppress(Exception):
                env.close()
        with contextlib.suppress(Exception):
            exc.batchppo_env_index = index  # type: ignore[attr-defined]
        raise
    return envs


# How an env's observation space must match the expected one, by BatchEnv's observation_mode:
# "same": equal to env 0's; "different": env 0's shape and dtype; "custom": the shape and
# dtype of the single space given in observation_mode.
OBS_RULES = ("same", "different", "custom")


def check_spaces(
    env: gymnasium.Env,
    index: int,
    spaces: tuple[gymnasium.Space, gymnasium.Space],
    obs_rule: str = "same",
) -> None:
    """Raises SpaceMismatchError if ``env``'s spaces do not match ``spaces``.

    The action space must equal the expected one; the observation space must equal it
    (``obs_rule="same"``) or share its shape and dtype (``"different"``, ``"custom"``:
    Gymnasium's ``is_space_dtype_shape_equiv``, as ``AsyncVectorEnv`` checks these modes).

    Args:
        env: The env to check.
        index: Its global index (named in the message).
        spaces: The expected ``(observation_space, action_space)``: env 0's, or under
            ``"custom"`` the single observation space given in ``observation_mode``.
        obs_rule: One of ``OBS_RULES``.

    Raises:
        SpaceMismatchError: Naming the env, both spaces and what differs between them.
    """
    reference = "observation_mode gives" if obs_rule == "custom" else "env 0 has"
    space, expected = env.observation_space, spaces[0]
    if obs_rule == "same":
        if space != expected:
            raise SpaceMismatchError(  # with AsyncVectorEnv's words, which code may match
                f"env {index} has observation space {space}, but env 0 has {expected} "
                f"({space_difference(space, expected)}): BatchEnv(..., observation_mode='same') "
                "however the sub-environments observation spaces are not equivalent. All envs "
                "of a batch need equal spaces. If this is intentional, use "
                "`observation_mode='different'` instead (spaces of one shape and dtype)."
            )
    elif not is_space_dtype_shape_equiv(space, expected):
        raise SpaceMismatchError(
            f"env {index} has observation space {space}, but {reference} {expected} "
            f"({space_difference(space, expected)}): the sub-environment's observation spaces "
            f"do not share a common shape and dtype, which observation_mode={obs_rule!r} needs."
        )
    space, expected = env.action_space, spaces[1]
    if space != expected:
        raise SpaceMismatchError(
            f"env {index} has action space {space}, but env 0 has {expected} "
            f"({space_difference(space, expected)}); all envs of a batch need equal spaces."
        )


def space_difference(space: gymnasium.Space, expected: gymnasium.Space) -> str:
    """Says in a few words how ``space`` differs from ``expected`` (for error messages).

    Args:
        space: The space of the env being checked.
        expected: Env 0's space.

    Returns:
        For example ``"the shapes differ: (4,) vs (3,)"``.
    """
    if type(space) is not type(expected):
        return f"the types differ: {type(space).__name__} vs {type(expected).__name__}"
    if space.shape != expected.shape:
        return f"the shapes differ: {space.shape} vs {expected.shape}"
    if space.dtype != expected.dtype:
        return f"the dtypes differ: {space.dtype} vs {expected.dtype}"
    for name, what in (
        ("low", "lower bounds"),
        ("high", "upper bounds"),
        ("n", "sizes"),
        ("nvec", "sizes"),
        ("start", "starts"),
    ):
        if not hasattr(expected, name):
            continue
        a, b = np.asarray(getattr(space, name)), np.asarray(getattr(expected, name))
        differs = a != b
        if a.dtype.kind == "f":
            differs &= ~(np.isnan(a) & np.isnan(b))
        if not differs.any():
            continue
        if a.ndim == 0:
            return f"the {what} differ: {a} vs {b}"
        at = tuple(int(i) for i in np.argwhere(differs)[0])
        return f"the {what} differ at index {at[0] if a.ndim == 1 else at}: {a[at]} vs {b[at]}"
    return "they are not equal"
