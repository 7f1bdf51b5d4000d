"""The entry point of a training run, [`train`][batchppo.experiment.run.training.train], and the
public names of the modules a run is made of.

As in the original, training alternates two phases on one x-axis (training env steps):
the *train* phase runs ``trainer.iteration`` (collect a rollout, update) and reports every
``log_every`` steps; every ``eval_every`` steps an *eval* phase runs ``eval_episodes``
episodes, acting as ``eval_actions`` says (the mean action by default): the protocol that every
eval score printed, logged or returned names. A checkpoint follows the reports of its step, every
``checkpoint_every`` steps, at the end and on Ctrl-C / SIGTERM, so resuming from checkpoint S
(dropping records after S) continues every curve without a gap or a duplicate. A cadence left
at None is a fixed fraction of ``steps`` (``RunConfig.eval_interval`` and its siblings), so a
changed budget keeps its number of reports, evaluations and checkpoints.

An env that fails (its exception, or a dead worker, with ``max_restarts`` 0 or spent) stops the
run as Ctrl-C does, reports and checkpoint of the last completed iteration included, and then raises
the env's own exception, which carries an ``EnvFailure`` (``env_failure``); its full text is in
``<run dir>/env_error.txt``. In a ``--seeds`` run every seed's run dir gets both
(``batchppo.experiment.run.seed_runs``).

The modules a run is made of, whose public parts this module names: ``rundir`` (run
directories), ``progress``, ``window`` (the metric window), ``stopping`` (Ctrl-C / SIGTERM),
[`callbacks`][batchppo.experiment.run.callbacks] (a user's code on a run), ``env_failures``,
``trainers``, [`ledger`][batchppo.experiment.run.ledger] (one run's bookkeeping), ``driver`` (the
iterate loop over one ledger or the seeds' ledgers), ``run_set`` (one run or the stacked seeds of
``--seeds``), ``launch`` (the set-up of a call) and
[`loading`][batchppo.experiment.artifacts.loading].

Examples:
    A run trains for tens of seconds and the policy needs a run directory, so the docs test
    skips these lines (the README's example, which the tests run, trains the same way):

    >>> result = train("cartpole_jax", overrides=["steps=20000"])  # doctest: +SKIP
    >>> policy = load_policy("logdir/20261121T113000-cartpole_jax")  # doctest: +SKIP

    Without a logdir, ``train`` writes nothing to disk; ``policy`` maps an obs batch to actions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.artifacts.loading import load_policy, load_run
from batchppo.experiment.artifacts.rundir import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    ENV_ERROR_FILE,
    make_timestamp,
    open_run_dir,
    prepare_run_dir,
    run_timestamp,
)
from batchppo.experiment.errors import RunDirError
from batchppo.experiment.run.callbacks import (
    Callback,
    CallbackArg,
    ProgressFn,
    RunInfo,
    as_callbacks,
)
from batchppo.experiment.run.env_failures import EnvFailure, env_failure
from batchppo.experiment.run.launch import EnvArg, TrainCall, env_id_of, launch
from batchppo.experiment.run.ledger import TrainResult
from batchppo.experiment.run.run_set import SingleRun, StackedSeeds
from batchppo.experiment.run.window import EPISODE_METRICS, RUNNING_TOTALS
from batchppo.experiment.trainers import (
    EVALUATE_RUN_KEY,
    TrainerFactory,
    TrainerLike,
    default_trainer_factory,
    network_trainer_factory,
)

if TYPE_CHECKING:
    from batchppo.algorithms.networks.networks import NetworkFactory

__all__ = [
    "CHECKPOINT_DIR",
    "CONFIG_FILE",
    "ENV_ERROR_FILE",
    "EPISODE_METRICS",
    "EVALUATE_RUN_KEY",
    "RUNNING_TOTALS",
    "Callback",
    "CallbackArg",
    "EnvArg",
    "EnvFailure",
    "ProgressFn",
    "RunInfo",
    "TrainResult",
    "TrainerFactory",
    "TrainerLike",
    "default_trainer_factory",
    "env_failure",
    "env_id_of",
    "load_policy",
    "load_run",
    "make_timestamp",
    "open_run_dir",
    "prepare_run_dir",
    "run_timestamp",
    "train",
]


def train(
    config: RunConfig | str | None = None,
    logdir: str | Path | None = None,
    *,
    env: EnvArg | None = None,
    name: str | None = None,
    timestamp: str | None = None,
    overrides: Sequence[str] = (),
    progress: str = "bar",
    trainer_factory: TrainerFactory | None = None,
    seeds: int | None = None,
    resume: bool = False,
    network_factory: NetworkFactory | None = None,
    callbacks: CallbackArg | Sequence[CallbackArg] = (),
) -> TrainResult | list[TrainResult]:
    """Trains a policy; resumes when ``<logdir>/<timestamp>-<name>`` already exists.

    With ``seeds=N``, seeds ``config.seed + i`` (``i < N``) train together in one program into run
    dirs ``<timestamp>-<name>-s<i>`` (see ``batchppo.experiment.run.seed_runs``), and one result per
    seed comes back.

    Args:
        config: An algorithm's config (``PPOConfig``, ``A2CConfig``; see
            [`batchppo.algorithms.registry`][batchppo.algorithms.registry]) or a preset name (see
            ``batchppo list``). When a run resumes, a preset name checks only ``overrides`` against
            the stored config (the preset may have been retuned since); a config must match it field
            by field (up to the changes a resume allows). None with ``env``: a starting recipe
            chosen from the env's spaces
            ([`recipes.recipe_for_env`][batchppo.experiment.config.recipes.recipe_for_env]; the
            choice is printed on stderr).
        logdir: Parent directory of runs; None: no disk I/O (no logs, no checkpoints).
        env: The env to train on, replacing the config's: an env id (``"Pendulum-v1"``,
            ``"module:EnvId"``, ``"module:factory"``) or a factory, a callable returning a
            ``gymnasium.Env`` (called with ``env_kwargs``). The run's ``config.yaml``
            records a factory as ``"module:qualname"``, which a resume imports again, so it
            must be defined at the top level of an importable module.
        name: Run dir suffix; defaults to the preset name (the env's name for a recipe), or
            ``custom``.
        timestamp: Run dir prefix; an existing run resumes with its stored config.
        overrides: ``KEY=VALUE`` strings applied to the config (typed; see
            [`configs.apply_overrides`][batchppo.experiment.config.configs.apply_overrides]). When
            resuming, only bookkeeping keys and a larger ``steps`` are accepted.
        progress: ``bar`` (the default): one tqdm bar on stdout, terminal or not (steps, rate,
            ETA, the last train and eval scores; the start-up line and messages above it);
            ``auto`` (``batchppo train``'s default): the bar on a terminal, else ``lines``, a
            line per report; ``none``: nothing. The ETA leaves the first iteration
            (compilation) out (``batchppo.experiment.run.progress``).
        trainer_factory: Builds the trainer from the config (default: the trainer of the
            config's algorithm); not with ``seeds``.
        seeds: Train this many seeds together (see above); None: one run.
        resume: The run (every seed's) must exist: a missing run dir raises
            [`RunDirError`][batchppo.experiment.RunDirError] instead of starting a new run.
        network_factory: Builds the network of the algorithm's trainer, ``(config, spec) ->
            Network``, as Brax's ``network_factory``
            ([`NetworkFactory`][batchppo.algorithms.networks.networks.NetworkFactory]); None:
            ``make_network``, from the config's network fields. Not with ``trainer_factory``.
            The run's ``config.yaml`` does not record it: a resume needs the same factory, and
            loading the run (``load_run``, ``evaluate_run``, ``visualize``, ``export_run``)
            a ``trainer_factory`` that builds the trainer with it.
        callbacks: The user's code called as the run trains: a
            [`Callback`][batchppo.experiment.run.callbacks.Callback] (its hooks at the start, each
            train report, each evaluation and the end; a hook returning False stops the run as
            Ctrl-C does, checkpoint included) or a function ``progress_fn(step, metrics)`` (each
            report, as Brax's), or a sequence of them. With ``seeds``, a ``Callback``'s hooks are
            called for every seed (``RunInfo.index``), a function sees seed 0's reports. An
            exception a callback raises stops the run as an env error does, after a checkpoint.

    Returns:
        The final state, last eval score and its protocol (``TrainResult.protocol``: episodes
        and action mode), step count and run dir; with ``seeds``, a list of them, one per seed.
        A resumed run that is complete already (its newest checkpoint at ``steps`` or beyond)
        says so in one line and returns at once, nothing built or compiled; its
        ``train_state`` loads from that checkpoint when first read.

    Raises:
        UserError: Unknown preset, bad override, an env that fails its start-up check (its id,
            module, constructor, spaces or reset:
            [`env_checks.check_env`][batchppo.experiment.config.env_checks.check_env], run before a
            run dir is made), unusable run dir or checkpoint (subclasses of
            [`UserError`][batchppo.experiment.UserError]), a run dir that another process holds
            (``RunDirLockedError``), a write into the run dir that failed (``StorageError``).
    """
    callbacks = as_callbacks(callbacks)
    if resume and (logdir is None or timestamp is None):
        raise RunDirError("--resume needs --logdir and --timestamp: the run to resume")
    if network_factory is not None and trainer_factory is not None:
        raise TypeError(
            "train: network_factory= builds the network of the algorithm's trainer; with "
            "trainer_factory=, have that factory pass it to the trainer it builds"
        )
    if seeds is not None and trainer_factory is not None:
        raise TypeError("train: seeds= trains with the algorithm's SeedsTrainer (no factory)")
    call = TrainCall(config, logdir, name, timestamp, overrides, progress, resume, env, callbacks)
    if seeds is not None:
        return launch(StackedSeeds(seeds, network_factory), call)
    if network_factory is not None:
        trainer_factory = network_trainer_factory(network_factory)
    return launch(SingleRun(trainer_factory), call)[0]
