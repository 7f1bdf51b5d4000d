"""The restart policy of a [`BatchEnv`][batchppo.envs.BatchEnv] (``max_restarts``).

``Restarts`` decides what a step does with the envs that raised in it and the workers that died or
hung: within the budget it has the ``WorkerPool`` respawn the dead workers and restart the envs
(each with a seed of its own, ``restart_seed``), and warns once per env or worker
([`EnvRestartWarning`][batchppo.envs.EnvRestartWarning]); past it, it raises the error as if
restarts were off, naming the budget. The contract is *Restarts* in
[`BatchEnv`][batchppo.envs.BatchEnv].
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode

from batchppo.envs.errors import EnvTimeoutError, WorkerDiedError
from batchppo.envs.infos import batch_infos
from batchppo.envs.workers.pool import WorkerPool
from batchppo.envs.workers.shared_arrays import SharedArrays

__all__ = ["EnvRestartWarning", "Restarts", "restart_seed"]

# (slot, error reports) of the envs that raised in a step, and (slot, why) of the dead workers
# (see ``WorkerPool.wait_step``).
Failures = list[tuple[int, list[dict[str, Any]]]]
Dead = list[tuple[int, str]]


class EnvRestartWarning(RuntimeWarning):
    """A [`BatchEnv`][batchppo.envs.BatchEnv] with ``max_restarts`` restarted an env (its step
    raised or its worker died); the message names the error."""


def restart_seed(seed: int | None, restart: int) -> int | None:
    """The seed of an env's first reset after a restart (see *Restarts* in
    [`BatchEnv`][batchppo.envs.BatchEnv]).

    Args:
        seed: The seed of the env's last seeded reset (``seed + i`` after ``reset(seed=seed)``),
            or None when it was never reset with a seed.
        restart: The restart's number in its batch env (1 for the first).

    Returns:
        A seed in ``[0, 2**32)`` drawn from both by NumPy's ``SeedSequence``, or None (an
        unseeded reset) when ``seed`` is None.
    """
    if seed is None:
        return None
    return int(np.random.SeedSequence([int(seed) % 2**64, restart]).generate_state(1)[0])


class Restarts:
    """The restart budget of a batch env, what it has spent, and the restarts themselves.

    Args:
        max_restarts: How many env restarts the batch env may make over its life; 0 fails fast.
        num_envs: The batch env's number of envs.
        autoreset_mode: The batch env's; restarts need ``SAME_STEP``.

    Attributes:
        max_restarts: The budget.
        count: Envs restarted so far, at most ``max_restarts``.

    Raises:
        ValueError: ``max_restarts`` (an int >= 0, as ``WorkerOptions`` checks it) is positive in
            another autoreset mode than ``SAME_STEP``.
    """

    def __init__(self, max_restarts: int, num_envs: int, autoreset_mode: AutoresetMode):
        if max_restarts and autoreset_mode is not AutoresetMode.SAME_STEP:
            raise ValueError(
                f"max_restarts={max_restarts} needs autoreset_mode=SAME_STEP (a restarted env "
                f"reports its cut episode as a same-step truncation); got {autoreset_mode}: "
                "pass autoreset_mode='SameStep'."
            )
        self.max_restarts = max_restarts
        self.count = 0
        self._seeds: list[int | None] = [None] * num_envs  # each env's last reset seed

    def note_seeds(self, seeds: list[int | None], mask: np.ndarray | None) -> None:
        """Keeps the seeds of a reset (one per env; None keeps the last), of the envs ``mask``
        resets (all when None): what a restart derives its seed from."""
        for i, env_seed in enumerate(seeds):
            if env_seed is not None and (mask is None or mask[i]):
                self._seeds[i] = env_seed

    def check_budget(self, failures: Failures, dead: Dead, pool: WorkerPool) -> None:
        """Raises unless the budget has room for every env to restart after this step.

        Raises:
            Exception: The first env's error (its own type), or
                [`WorkerDiedError`][batchppo.envs.WorkerDiedError] (an
                [`EnvTimeoutError`][batchppo.envs.EnvTimeoutError] for a hung one) for a dead
                worker, naming the budget.
        """
        count = sum(len(indices) for indices in _targets(failures, dead, pool).values())
        if self.count + count > self.max_restarts:
            raise self._over_budget(failures, dead, count, pool)

    def restart(
        self,
        failures: Failures,
        dead: Dead,
        pool: WorkerPool,
        arrays: SharedArrays,
    ) -> list[tuple[int, int, dict[str, Any]]]:
        """Restarts the envs that raised in this step and the envs of the workers that died
        (``check_budget`` said there is room).

        Dead workers are respawned first, their envs' last obs kept as their final obs; then
        every affected slot rebuilds (where the env raised) and resets its envs. Every wait is
        bounded by ``step_timeout``, counted from its own command: each respawn, then the restart
        command. The parent's own share is not timed.

        Args:
            failures: ``(slot, reports)``: the error reports of the envs that raised, by slot of
                the pool.
            dead: ``(slot, how it died)`` of each worker that died.
            pool: The batch env's pool.
            arrays: The batch env's shared arrays.

        Returns:
            One batched info part ``(env index, 1, info)`` per restarted env: its reset info,
            ``final_info`` ``{}`` and ``env_restarted`` True.

        Raises:
            EnvTimeoutError: A worker did not answer its respawn or restart in time.
            Exception: What rebuilding or resetting an env raised. The pool is then reported
                broken (the batch env accepts only ``close``) and nothing is counted.
        """
        targets = _targets(failures, dead, pool)
        order = sorted(i for indices in targets.values() for i in indices)
        number = {i: self.count + k + 1 for k, i in enumerate(order)}
        try:
            for slot, _ in dead:
                start, stop = pool.envs_of(slot)
                # The rows still hold the last obs the worker's envs returned: their final obs.
                for obs2d, final2d in zip(arrays.obs_rows, arrays.final_rows, strict=True):
                    final2d[start:stop] = obs2d[start:stop]
                pool.respawn(slot)
            seeds = {i: restart_seed(self._seeds[i], n) for i, n in number.items()}
            infos = pool.restart(targets, seeds)
        except BaseException as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            pool.mark_broken(f"restarting envs {order} failed ({first})")
            raise
        self.count += len(order)
        self._warn(failures, dead, number, pool)
        return [
            (i, 1, batch_infos([{**infos[i], "final_info": {}, "env_restarted": True}]))
            for i in order
        ]

    def _over_budget(
        self, failures: Failures, dead: Dead, count: int, pool: WorkerPool
    ) -> BaseException:
        """The error a step raises when its restarts would exceed ``max_restarts``."""
        note = (
            f"Not restarted: the restart budget is used up (max_restarts={self.max_restarts}, "
            f"{self.count} restarts done, this step needs {count} more; in a PPOConfig the "
            "setting is backend_options.max_restarts)."
        )
        if dead:  # the batch env stays broken
            hung = pool.hung_reasons
            error = EnvTimeoutError if any(s in hung for s, _ in dead) else None
            how, _, stacks = dead[0][1].partition("\n")
            return (error or WorkerDiedError)(
                f"{how}. {note} The batch env cannot continue; close it and build a new one."
                f"{chr(10) if stacks else ''}{stacks}"
            )
        slot, reports = failures[0]
        return pool.remote_error(slot, reports[0], note)

    def _warn(
        self, failures: Failures, dead: Dead, number: dict[int, int], pool: WorkerPool
    ) -> None:
        """One [`EnvRestartWarning`][batchppo.envs.EnvRestartWarning] per env that raised and per
        worker that died, attributed to the batch env's ``step_wait`` or ``step_arrays``."""
        budget = f"of max_restarts={self.max_restarts}"
        for _, reports in failures:
            for report in reports:
                index = report["env_index"]
                tail = "\n".join(report["traceback"].rstrip().splitlines()[-3:])
                warnings.warn(
                    f"BatchEnv: env {index} raised {report['type_name']}: {report['message']}; "
                    f"rebuilt and reset it, its episode reported as truncated (restart "
                    f"{number[index]} {budget}). Traceback, last lines:\n{tail}",
                    EnvRestartWarning,
                    stacklevel=4,
                )
        for slot, how in dead:
            start, stop = pool.envs_of(slot)
            how, _, stacks = how.partition("\n")  # a hung worker's reason ends in its stacks
            warnings.warn(
                f"BatchEnv: {how}; respawned it as pid {pool.pids[slot]} and reset its "
                f"envs {start}..{stop - 1}, their episodes reported as truncated (restarts "
                f"{number[start]}..{number[stop - 1]} {budget}).{chr(10) if stacks else ''}"
                f"{stacks}",
                EnvRestartWarning,
                stacklevel=4,
            )


def _targets(failures: Failures, dead: Dead, pool: WorkerPool) -> dict[int, list[int]]:
    """Slot -> the global indices of its envs to restart: those that raised, and every env of a
    dead worker."""
    targets: dict[int, list[int]] = {}
    for slot, reports in failures:
        targets[slot] = [report["env_index"] for report in reports]
    for slot, _ in dead:
        targets[slot] = list(range(*pool.envs_of(slot)))
    return targets
