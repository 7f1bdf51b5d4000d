"""Env failures: an env error that stops a run, and the ``EnvFailure`` it carries.

An env that fails (its exception, or a dead worker, with ``max_restarts`` 0 or spent) stops the
run as Ctrl-C does; the env's own exception then propagates carrying an ``EnvFailure``
(``env_failure``) that says where the run's checkpoint is.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax

from batchppo.experiment.artifacts.rundir import CHECKPOINT_DIR


@dataclasses.dataclass(frozen=True)
class EnvFailure:
    """How an env error stopped a run: attached to the env's exception (``env_failure``).

    Attributes:
        step: Training env steps of the last completed iteration; the run's state at this step
            was checkpointed, unless ``checkpoint_step`` says otherwise.
        checkpoint_step: Step of the run's newest checkpoint (``step`` unless saving failed);
            None without one.
        run_dir: The run directory; None without a logdir.
        error_file: ``<run dir>/env_error.txt``, the error's full text (the env's traceback
            included); None without a logdir.
        seeds: In a ``--seeds`` run, each seed's own failure, in seed order (the fields above
            are then seed 0's); empty for a single run.
    """

    step: int
    checkpoint_step: int | None
    run_dir: Path | None
    error_file: Path | None
    seeds: tuple[EnvFailure, ...] = ()

    def checkpoints(self) -> str:
        """Where the run's checkpoint is, for messages.

        Returns:
            ``checkpoint at step S in DIR`` (``no checkpoint`` without one); for a ``--seeds``
            run ``checkpoints at step S in DIR, DIR, ...`` when the seeds' checkpoints are at
            one step, else each seed's ``s<i>: ...``.
        """
        if not self.seeds:
            if self.checkpoint_step is None:
                return "no checkpoint"
            where = f" in {self.run_dir / CHECKPOINT_DIR}" if self.run_dir is not None else ""
            return f"checkpoint at step {self.checkpoint_step:,}{where}"
        steps = {seed.checkpoint_step for seed in self.seeds}
        if steps == {None}:
            return "no checkpoints"
        if len(steps) > 1:
            return "; ".join(f"s{i}: {seed.checkpoints()}" for i, seed in enumerate(self.seeds))
        dirs = [seed.run_dir / CHECKPOINT_DIR for seed in self.seeds if seed.run_dir is not None]
        where = f" in {', '.join(map(str, dirs))}" if dirs else ""
        return f"checkpoints at step {self.checkpoint_step:,}{where}"


_ENV_FAILURE = "batchppo_env_failure"  # the attribute of the env's exception


def env_failure(error: BaseException) -> EnvFailure | None:
    """The ``EnvFailure`` of an env exception that stopped a run; else None."""
    failure = getattr(error, _ENV_FAILURE, None)
    return failure if isinstance(failure, EnvFailure) else None


@contextmanager
def stop_on_env_error(stopped: Callable[[Exception], None]) -> Iterator[None]:
    """Calls ``stopped(error)`` on an env error (``batchppo.core.env.is_env_error``),
    which propagates.

    Other exceptions propagate untouched.
    """
    try:
        yield
    except Exception as error:
        from batchppo.core.env import is_env_error  # imported late (JAX): only after a failure

        if not is_env_error(error):
            raise
        stopped(error)
        raise


def mark_env_failure(error: Exception, failure: EnvFailure) -> None:
    """Attaches ``failure`` to the env's ``error`` and notes where its checkpoint is."""
    error.add_note(
        f"batchppo: training stopped at step {failure.step:,} by this env error; "
        f"{failure.checkpoints()}"
    )
    with contextlib.suppress(AttributeError, TypeError):
        setattr(error, _ENV_FAILURE, failure)


def state_deleted(state: Any) -> bool:
    """Whether a buffer of ``state`` is gone (donated to a compiled call that failed)."""
    leaves = jax.tree.leaves(state)
    return any(isinstance(x, jax.Array) and x.is_deleted() for x in leaves)
