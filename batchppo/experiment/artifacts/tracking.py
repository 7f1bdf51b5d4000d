"""Experiment tracking beside TensorBoard: Weights & Biases (``--set track=wandb``).

A tracked run sends to W&B what it writes to TensorBoard, from the same place: the host side of the
loop, where each report becomes a record of ``metrics.jsonl``
(``batchppo.experiment.artifacts.logging.RunLogger``), never from inside a compiled JAX function. So
W&B sees plain Python floats:

* the run's config (the mapping of its ``config.yaml``) as the W&B run's config;
* every report as one ``wandb.log`` call: ``step`` (training env steps) and
  ``<phase>/<metric>`` for each numeric metric of the record (``train/score``,
  ``eval/score``, ``train/policy_loss``...), with ``step`` declared as their x-axis
  (``define_metric``), as TensorBoard's scalars of ``<run>/train`` and ``<run>/eval``;
* the videos of ``batchppo visualize`` of a tracked run, as ``videos/episode_<i>`` (MP4).

The W&B run's id is kept in ``<run dir>/wandb_id``, so a resumed run (and ``visualize``)
continues the same W&B run (``resume="allow"``); W&B's own files go to ``<run dir>/wandb``.
A resumed run first drops the reports after its checkpoint from ``metrics.jsonl`` and
TensorBoard; W&B keeps what it was sent, so its history may hold reports of the lost steps
twice (each with its ``step``). ``WANDB_MODE=offline`` keeps everything on disk
(``wandb sync`` uploads it later).
"""

from __future__ import annotations

import secrets
import string
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from batchppo.experiment.errors import UserError

__all__ = ["DEFAULT_PROJECT", "ID_FILE", "WandbTracker", "open_tracker"]

ID_FILE = "wandb_id"
"""The file of a run dir that holds its W&B run id."""
DEFAULT_PROJECT = "batchppo"
"""The W&B project of ``wandb_project=None``."""
_ID_CHARS = string.ascii_lowercase + string.digits


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError:
        raise UserError(
            "track=wandb needs the wandb package: pip install 'batchppo[wandb]' (or drop "
            "track=wandb)"
        ) from None
    return wandb


class WandbTracker:
    """One run's W&B run: its config, its reports and videos (see the module docstring).

    Args:
        run_dir: The run directory (the W&B id file and ``wandb/`` go there).
        config: The run's config mapping (what ``config.yaml`` holds).
        project: W&B project (None: ``DEFAULT_PROJECT``).
        entity: W&B entity (None: the account's default).
        group: W&B group (None: none).
        job_type: W&B job type (``train``, ``visualize``).

    Raises:
        UserError: wandb is not installed, or ``wandb.init`` failed (one line).
    """

    def __init__(
        self,
        run_dir: str | Path,
        config: Mapping[str, Any],
        *,
        project: str | None = None,
        entity: str | None = None,
        group: str | None = None,
        job_type: str = "train",
    ) -> None:
        wandb = _import_wandb()
        self.run_dir = Path(run_dir)
        id_file = self.run_dir / ID_FILE
        if id_file.exists():
            run_id = id_file.read_text().strip()
        else:
            run_id = "".join(secrets.choice(_ID_CHARS) for _ in range(8))
            id_file.write_text(run_id + "\n")
        (self.run_dir / "wandb").mkdir(exist_ok=True)
        try:
            self.run = wandb.init(
                project=project or DEFAULT_PROJECT,
                entity=entity,
                group=group,
                job_type=job_type,
                name=self.run_dir.name,
                id=run_id,
                resume="allow",
                dir=str(self.run_dir),
                config=dict(config),
                settings=wandb.Settings(console="off", silent=True),
                reinit="create_new",
            )
        except Exception as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise UserError(
                f"track=wandb: wandb.init failed ({first}); log in with `wandb login`, or set "
                "WANDB_MODE=offline to keep the run on disk"
            ) from error
        self.run_id = run_id
        self.run.define_metric("step")
        for phase in ("train", "eval"):
            self.run.define_metric(f"{phase}/*", step_metric="step")

    def write(self, phase: str, step: int, scalars: Mapping[str, float]) -> None:
        """Sends one report: ``step`` and ``<phase>/<name>`` for each scalar."""
        data: dict[str, Any] = {"step": int(step)}
        data.update({f"{phase}/{name}": value for name, value in scalars.items()})
        self.run.log(data)

    def videos(self, paths: Sequence[str | Path], fps: int | None = None) -> None:
        """Sends MP4 files as ``videos/episode_<i>``."""
        wandb = _import_wandb()
        kwargs = {} if fps is None else {"fps": fps}
        self.run.log(
            {
                f"videos/episode_{i}": wandb.Video(str(path), format="mp4", **kwargs)
                for i, path in enumerate(paths)
            }
        )

    def flush(self) -> None:
        """Nothing to do: W&B's own process writes the run's file as reports come."""

    def close(self) -> None:
        """Finishes the W&B run (its files complete; an online run uploads them)."""
        self.run.finish()


def open_tracker(
    config: Any, run_dir: Path | None, group: str | None = None, job_type: str = "train"
) -> WandbTracker | None:
    """The tracker of ``config.track`` for a run dir; None without one (and, with a warning,
    without a run dir).

    Args:
        config: The run's config (``track``, ``wandb_*``).
        run_dir: The run directory; None (no disk I/O) tracks nothing.
        group: The group to use when ``config.wandb_group`` is None (a ``--seeds`` run's).
        job_type: W&B job type.
    """
    if config.track is None:
        return None
    if run_dir is None:
        warnings.warn(
            f"track={config.track}: the run has no logdir, so nothing is tracked (W&B keeps its "
            "run id and files in the run dir); give a logdir",
            stacklevel=2,
        )
        return None
    if config.track != "wandb":  # RunConfig refuses other values; a guard for subclasses
        raise UserError(f"track={config.track!r}: unknown tracker")
    import yaml

    from batchppo.experiment.config import configs

    return WandbTracker(
        run_dir,
        yaml.safe_load(configs.config_to_yaml(config)),
        project=config.wandb_project,
        entity=config.wandb_entity,
        group=config.wandb_group or group,
        job_type=job_type,
    )
