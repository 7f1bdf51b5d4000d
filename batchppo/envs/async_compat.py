"""AsyncVectorEnv's arguments, as a [`BatchEnv`][batchppo.envs.BatchEnv] takes and checks them.

The keywords ``BatchEnv`` shares with Gymnasium's ``AsyncVectorEnv`` (``shared_memory``, ``copy``,
``context``, ``daemon``, ``worker``, ``observation_mode``) and what they mean for the spaces, the
autoreset mode, and the arguments of the vector API that Gymnasium checks with ``assert``: seeds,
``reset_mask``, action batches and the names ``call`` refuses. Each check raises in Gymnasium's
words where code written for ``AsyncVectorEnv`` may match them, and otherwise names what to use
instead. ``RayBatchEnv`` checks its seeds and actions here too, and shares ``BatchEnv``'s reads of
every env through ``call`` (``CallingVectorEnv``).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_differing_spaces

from batchppo.envs.stack.batch_transform import BatchTransform

__all__ = [
    "CallingVectorEnv",
    "InvalidArgumentError",
    "batch_observation_space",
    "check_action_batch",
    "check_action_dtype",
    "check_action_shape",
    "check_async_options",
    "check_callable",
    "expected_spaces",
    "parse_autoreset_mode",
    "parse_seeds",
    "per_env_values",
    "split_reset_mask",
]

# Names ``call`` refuses, as AsyncVectorEnv's worker does: they have their own methods.
_NOT_CALLABLE = ("reset", "step", "close", "_setattr", "_check_spaces")


class InvalidArgumentError(ValueError, AssertionError):
    """A bad argument that Gymnasium's vector envs reject with ``assert``.

    It is a ``ValueError`` and, so that code written for ``AsyncVectorEnv`` catches it the
    same way, an ``AssertionError``: a seed list of the wrong length, a bad ``reset_mask``.
    """


_START_METHODS = ("forkserver", "spawn")


class CallingVectorEnv(gymnasium.vector.VectorEnv):
    """A vector env whose reads of every env go through its ``call``, as ``AsyncVectorEnv``'s
    do (``get_attr``, ``np_random_seed``, ``np_random``, ``render``), and that closes itself at
    the end of a ``with`` block."""

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Calls method ``name`` of every env (or reads attribute ``name``); one result each."""
        raise NotImplementedError

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """Every env's ``np_random_seed``, as Gymnasium's vector envs report it.

        After ``reset(seed=42)`` on 4 envs: ``(42, 43, 44, 45)``. Before a seeded reset each
        env seeds itself from entropy on first access, as a Gymnasium env does.
        """
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """Copies of every env's random generator (they live where the envs run)."""
        return self.get_attr("np_random")

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Reads attribute ``name`` of every env (through wrappers), as Gymnasium does."""
        return self.call(name)

    def render(self) -> tuple[Any, ...]:
        """Renders every env (needs ``render_mode`` set at construction); one frame each."""
        return self.call("render")

    def __enter__(self) -> CallingVectorEnv:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def check_async_options(
    shared_memory: bool,
    copy: bool,
    context: str | None,
    daemon: bool,
    worker: Callable[..., None] | None,
    observation_mode: str | tuple[gymnasium.Space, gymnasium.Space],
    transform: BatchTransform | None,
) -> tuple[str, str]:
    """Checks the keywords BatchEnv shares with ``AsyncVectorEnv`` (see
    [`BatchEnv`][batchppo.envs.BatchEnv]).

    Returns:
        The start method of the workers, and how env observation spaces must match (``"same"``,
        ``"different"`` or ``"custom"``; see ``check_spaces``).

    Raises:
        ValueError: A keyword BatchEnv cannot honour, or a bad value; one line naming why
            and what to use instead.
    """
    for name, value in (("shared_memory", shared_memory), ("copy", copy), ("daemon", daemon)):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be a bool; got {value!r}.")
    if not shared_memory:
        raise ValueError(
            "BatchEnv(shared_memory=False) cannot be honoured: BatchEnv always returns "
            "observations through shared memory (Box, Discrete, MultiDiscrete and MultiBinary "
            "spaces, nested in Dict/Tuple); leave shared_memory=True (the results are the "
            "same), or use gymnasium.vector.AsyncVectorEnv for spaces shared memory cannot hold."
        )
    if worker is not None:
        raise ValueError(
            f"BatchEnv(worker={getattr(worker, '__name__', worker)!r}) cannot run a custom "
            "worker function: its workers run BatchEnv's own shared-memory protocol "
            "(batchppo.envs.workers.worker); change what an env does with a gymnasium.Wrapper in "
            "its env function, or use gymnasium.vector.AsyncVectorEnv for a custom worker."
        )
    method = "forkserver" if context is None else context
    if method not in _START_METHODS:
        if method not in mp.get_all_start_methods():  # multiprocessing's words, as SB3's
            raise ValueError(
                f"cannot find context for {method!r}: context must be 'forkserver' (the "
                "default) or 'spawn'."
            )
        raise ValueError(
            f"context must be 'forkserver' (the default) or 'spawn'; got {method!r} ('fork' can "
            "deadlock a worker forked from a process that runs threads, such as JAX's)."
        )
    if isinstance(observation_mode, tuple):
        if len(observation_mode) != 2 or not all(
            isinstance(space, gymnasium.Space) for space in observation_mode
        ):
            raise ValueError(
                "observation_mode as a tuple must be (observation_space, "
                f"single_observation_space), two gymnasium Spaces; got {observation_mode!r}."
            )
        rule = "custom"
    elif isinstance(observation_mode, str) and observation_mode in ("same", "different"):
        rule = observation_mode
    else:
        raise ValueError(  # AsyncVectorEnv's words, which code written for it may match
            "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and "
            f"batch observation space, actual got {observation_mode}"
        )
    if transform is not None and rule != "same":
        raise ValueError(
            f"observation_mode={observation_mode!r} does not apply with a transform (the batch "
            "env's spaces are the transform's); leave observation_mode='same'."
        )
    return method, rule


def expected_spaces(
    observation_mode: str | tuple[gymnasium.Space, gymnasium.Space],
    raw: tuple[gymnasium.Space, gymnasium.Space],
) -> tuple[gymnasium.Space, gymnasium.Space]:
    """The spaces every env must match: env 0's (``raw``), or with a tuple ``observation_mode``
    its single observation space and env 0's action space."""
    if isinstance(observation_mode, tuple):
        return observation_mode[1], raw[1]
    return raw


def batch_observation_space(
    observation_mode: str | tuple[gymnasium.Space, gymnasium.Space],
    batched: gymnasium.Space,
    reports: list[dict[str, Any]],
) -> gymnasium.Space:
    """The batch env's ``observation_space`` under ``observation_mode``.

    Args:
        observation_mode: As given to the batch env (checked by ``check_async_options``).
        batched: The single observation space batched (``batch_space``): the space of ``"same"``.
        reports: What each unit said of its envs (``describe_envs``), in env order: under
            ``"different"`` every env's observation space, which are batched together.
    """
    if isinstance(observation_mode, tuple):
        return observation_mode[0]
    if observation_mode == "different":
        return batch_differing_spaces([s for report in reports for s in report["obs_spaces"]])
    return batched


def parse_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """``AutoresetMode(mode)``; a one-line ``ValueError`` naming the valid values otherwise."""
    try:
        return AutoresetMode(mode)
    except ValueError:
        valid = ", ".join(repr(m.value) for m in AutoresetMode)
        raise ValueError(
            f"autoreset_mode={mode!r}: use a gymnasium.vector.AutoresetMode or one of {valid}."
        ) from None


def parse_seeds(seed: int | Sequence[int | None] | None, num_envs: int) -> list[int | None]:
    """Per-env seeds: None for all, ``seed + i`` for an int, or a list of ``num_envs`` seeds.

    Raises:
        InvalidArgumentError: A list whose length is not ``num_envs``.
    """
    if seed is None or isinstance(seed, (int, np.integer)):
        return [None if seed is None else int(seed) + i for i in range(num_envs)]
    seeds = list(seed)
    if len(seeds) != num_envs:
        raise InvalidArgumentError(
            f"seed must be None, an int or a list of {num_envs} seeds; got a list of {len(seeds)}."
        )
    return seeds


def split_reset_mask(
    options: dict[str, Any] | None, num_envs: int
) -> tuple[dict[str, Any] | None, np.ndarray | None]:
    """Separates Gymnasium's ``options["reset_mask"]`` from the options the envs get.

    Args:
        options: The options of a reset, or None.
        num_envs: Batch size.

    Returns:
        ``(options, mask)``: the options without ``reset_mask`` (a new dict; the envs get
        ``{}`` when it was the only option, as in Gymnasium) and the mask, or
        ``(options, None)`` when there is no mask.

    Raises:
        InvalidArgumentError: The mask is not a bool numpy array of shape ``(num_envs,)`` with
            at least one True (Gymnasium's conditions).
    """
    if options is None or "reset_mask" not in options:
        return options, None
    mask = options["reset_mask"]
    rest = {key: value for key, value in options.items() if key != "reset_mask"}
    if not isinstance(mask, np.ndarray):
        problem = f"must be a numpy array, got {type(mask)}"
    elif mask.shape != (num_envs,):
        problem = f"must have shape `({num_envs},)`, got {mask.shape}"
    elif mask.dtype != np.bool_:
        problem = f"must have `dtype=np.bool_`, got {mask.dtype}"
    elif not mask.any():
        problem = f"must contain a boolean array, got reset_mask={mask}"  # Gymnasium's words
    else:
        return rest, mask
    raise InvalidArgumentError(f"`options['reset_mask': mask]` {problem}")


def check_action_dtype(dtype: np.dtype, space_dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """Raises ValueError unless actions of ``dtype`` may be cast to the space's dtype.

    Bool spaces take bool actions; integer spaces take integer actions; real spaces take real
    (float or int) actions.

    Args:
        dtype: The dtype of the actions given.
        space_dtype: The dtype of the action space.
        shape: The expected shape of the action batch (for the message).

    Raises:
        ValueError: Naming the dtype and shape expected.
    """
    if np.dtype(space_dtype) == np.bool_:
        kind_ok, expected = dtype == np.bool_, "a bool dtype"
    elif np.issubdtype(space_dtype, np.integer):
        kind_ok = np.issubdtype(dtype, np.integer)
        expected = f"an integer dtype castable to {space_dtype}"
    else:
        kind_ok = np.issubdtype(dtype, np.number) and np.can_cast(dtype, space_dtype, "same_kind")
        expected = f"a real (float or int) dtype castable to {space_dtype}"
    if not kind_ok:
        raise ValueError(f"actions must have {expected}, shape {shape}; got dtype {dtype}.")


def check_action_batch(actions: np.ndarray, expected: tuple[int, ...]) -> None:
    """Raises as Gymnasium's vector envs do for an action batch of the wrong shape.

    Raises:
        TypeError: A scalar where a batch is expected (Gymnasium's class and words: it cannot
            iterate over it), naming the shape expected.
        ValueError: Another shape (see ``check_action_shape``).
    """
    if actions.ndim == 0 and expected:
        raise TypeError(
            f"Unable to iterate over the following elements: {actions}: actions must be a "
            f"batch of shape {expected} (num_envs, *action_shape), one action per env."
        )
    check_action_shape(actions.shape, expected)


def check_action_shape(shape: tuple[int, ...], expected: tuple[int, ...]) -> None:
    """Raises ValueError naming the expected shape when ``shape`` differs."""
    if shape != expected:
        raise ValueError(
            f"actions must have shape {expected} (num_envs, *action_shape); got {shape}."
        )


def check_callable(name: str) -> None:
    """Raises ValueError, in Gymnasium's words, for the names ``call`` refuses (``reset``,
    ``step``, ``close``: they have their own methods)."""
    if name in _NOT_CALLABLE:
        raise ValueError(
            f"Trying to call function `{name}` with `call`, use `{name}` directly instead."
        )


def per_env_values(values: Any, num_envs: int) -> list[Any]:
    """``set_attr``'s values as one per env: a list or tuple of ``num_envs`` values, or one value
    for every env.

    Raises:
        ValueError: A list or tuple whose length is not ``num_envs``.
    """
    if not isinstance(values, (list, tuple)):
        values = [values] * num_envs
    if len(values) != num_envs:
        raise ValueError(
            f"set_attr needs one value or a list of {num_envs} values; got {len(values)}."
        )
    return list(values)
