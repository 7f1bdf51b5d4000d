"""A user's callbacks on a training run, as SB3's callbacks and Brax's ``progress_fn``.

A [`Callback`][batchppo.experiment.run.callbacks.Callback] sees a run's start, each train report,
each evaluation and the run's end, with the reports as ``metrics.jsonl`` holds them. A hook that
returns False asks training to stop: the run stops as on Ctrl-C
(``batchppo.experiment.run.stopping``), after its iteration, with a checkpoint, and its
``TrainResult`` says so (``interrupted``, ``stopped_by``). A plain function ``progress_fn(step,
metrics)`` is a callback too (``ProgressFnCallback``).

An exception raised in a hook ends the run as an env error does
(``batchppo.experiment.run.driver``): the open report and a checkpoint of the last completed
iteration are written, then the exception propagates with notes naming the callback and the
checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batchppo.algorithms.run_config import RunConfig

if TYPE_CHECKING:
    from batchppo.experiment.run.ledger import TrainResult

ProgressFn = Callable[[int, dict[str, Any]], Any]
"""Brax's ``progress_fn(step, metrics)``: called with each report's step and its record (a False
return asks training to stop, as a ``Callback``'s hook)."""


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """Which run a hook is called for.

    Attributes:
        index: The run's place in its ``train`` call: seed ``i`` of ``train(..., seeds=N)`` (its
            seed is ``config.seed + i``); 0 for a single run.
        run_dir: The run directory; None without a logdir.
        config: The run's config (the stored one when resuming; a seed's holds its own seed).
    """

    index: int
    run_dir: Path | None
    config: RunConfig

    @property
    def seed(self) -> int:
        """The run's seed."""
        return self.config.seed


class Callback:
    """A user's hooks on a training run; each does nothing unless a subclass overrides it.

    With ``train(..., seeds=N)`` each hook is called for every seed's run in seed order
    (``run.index``), the seeds' iterations being one; a stop asked for by any seed's hook stops
    every seed.

    Examples:
        >>> class StopAtScore(Callback):
        ...     def on_eval(self, run, step, metrics):
        ...         return metrics["score"] < 400  # False: stop and save
    """

    @property
    def name(self) -> str:
        """How messages and notes name the callback (its class's name)."""
        return type(self).__qualname__

    def on_train_start(self, run: RunInfo, step: int) -> None:
        """Called before the run's first iteration, its state initialised or restored.

        Args:
            run: The run.
            step: Training env steps the run starts from: 0, or a resumed run's checkpoint step.
        """

    def on_report(self, run: RunInfo, step: int, metrics: dict[str, Any]) -> bool | None:
        """Called after each train report was written.

        Args:
            run: The run.
            step: Training env steps done.
            metrics: The report, as ``metrics.jsonl`` holds it (``phase`` ``"train"``); a copy.

        Returns:
            False to stop training after this iteration (with a checkpoint); True or None goes on.
        """
        return None

    def on_eval(self, run: RunInfo, step: int, metrics: dict[str, Any]) -> bool | None:
        """Called after each evaluation's report was written.

        Args:
            run: The run.
            step: Training env steps done.
            metrics: The eval report, as ``metrics.jsonl`` holds it (``phase`` ``"eval"``,
                ``score``, ``length``, ``episodes``, ...); a copy.

        Returns:
            False to stop training after this iteration (with a checkpoint); True or None goes on.
        """
        return None

    def on_train_end(self, run: RunInfo, result: TrainResult) -> None:
        """Called after the run's final checkpoint, at the step budget or a stop request (not
        after an error).

        Args:
            run: The run.
            result: What ``train`` returns for the run.
        """


class ProgressFnCallback(Callback):
    """A plain function ``progress_fn(step, metrics)`` as a callback, as Brax's ``progress_fn``.

    The function gets every report, train and eval (``metrics["phase"]``), of the first run of a
    call: the single run, or seed 0 of ``train(..., seeds=N)``.

    Args:
        progress_fn: Called with each report's step and record; a False return asks training to
            stop.
    """

    def __init__(self, progress_fn: ProgressFn) -> None:
        self.progress_fn = progress_fn

    @property
    def name(self) -> str:
        """The function's name."""
        return getattr(self.progress_fn, "__qualname__", repr(self.progress_fn))

    def on_report(self, run: RunInfo, step: int, metrics: dict[str, Any]) -> bool | None:
        """Calls the function with a train report of the first run."""
        return self.progress_fn(step, metrics) if run.index == 0 else None

    def on_eval(self, run: RunInfo, step: int, metrics: dict[str, Any]) -> bool | None:
        """Calls the function with an eval report of the first run."""
        return self.progress_fn(step, metrics) if run.index == 0 else None


CallbackArg = Callback | ProgressFn
"""A callback for [`train`][batchppo.experiment.run.training.train]: a ``Callback``, or a function
``progress_fn(step, metrics)``."""


def as_callbacks(callbacks: CallbackArg | Sequence[CallbackArg]) -> tuple[Callback, ...]:
    """The ``Callback`` of each of ``callbacks`` (a function adapted by ``ProgressFnCallback``).

    Args:
        callbacks: A callback or a function, or a sequence of them.

    Raises:
        TypeError: Something that is neither a ``Callback`` nor callable.
    """
    if isinstance(callbacks, Callback) or callable(callbacks):
        callbacks = [callbacks]
    adapted = []
    for callback in callbacks:
        if isinstance(callback, Callback):
            adapted.append(callback)
        elif callable(callback):
            adapted.append(ProgressFnCallback(callback))
        else:
            raise TypeError(
                f"train: callbacks= takes Callback instances or functions progress_fn(step, "
                f"metrics), not {type(callback).__name__}"
            )
    return tuple(adapted)


_CALLBACK = "batchppo_callback"  # the attribute of a hook's exception: the callback's name


def callback_of(error: BaseException) -> str | None:
    """The name of the callback whose hook raised ``error``; None for any other exception."""
    name = getattr(error, _CALLBACK, None)
    return name if isinstance(name, str) else None


@contextmanager
def stop_on_callback_error(stopped: Callable[[Exception], None]) -> Iterator[None]:
    """Calls ``stopped(error)`` on an exception a hook raised (``callback_of``), which propagates.

    Other exceptions propagate untouched.
    """
    try:
        yield
    except Exception as error:
        if callback_of(error) is None:
            raise
        stopped(error)
        raise


class RunCallbacks:
    """The callbacks of one run, as its ledger calls them: every callback's hook in turn.

    Args:
        callbacks: The callbacks, in the order they are called.
        run: The run they are called for.
    """

    def __init__(self, callbacks: Sequence[Callback], run: RunInfo) -> None:
        self.callbacks, self.run = tuple(callbacks), run

    def train_start(self, step: int) -> None:
        """Calls every ``on_train_start``."""
        for callback in self.callbacks:
            self._call(callback, "on_train_start", step, callback.on_train_start, step)

    def report(self, record: Mapping[str, Any]) -> str | None:
        """Calls every ``on_report`` (``on_eval`` for an eval report) with a copy of ``record``.

        Returns:
            The name of the first callback that asked to stop; None if none did.
        """
        step, asked = int(record["step"]), None
        for callback in self.callbacks:
            hook = callback.on_eval if record["phase"] == "eval" else callback.on_report
            answer = self._call(callback, hook.__name__, step, hook, step, dict(record))
            # None is a hook that returns nothing; a NumPy False stops as False does.
            if answer is not None and not answer:
                asked = asked or callback.name
        return asked

    def train_end(self, result: TrainResult) -> None:
        """Calls every ``on_train_end``."""
        for callback in self.callbacks:
            self._call(callback, "on_train_end", result.step, callback.on_train_end, result)

    def _call(
        self, callback: Callback, hook: str, step: int, method: Callable[..., Any], *args: Any
    ) -> Any:
        """``method(run, *args)``; an exception it raises is marked with the callback's name."""
        try:
            return method(self.run, *args)
        except Exception as error:
            where = f" of run {self.run.run_dir}" if self.run.run_dir is not None else ""
            error.add_note(
                f"batchppo: callback {callback.name} raised this in {hook} at step {step:,}{where}"
            )
            with contextlib.suppress(AttributeError, TypeError):
                setattr(error, _CALLBACK, callback.name)
            raise
