"""What a resumed run may change of its stored config, and what it may not.

A run dir keeps its config (``config.yaml``); a resume (``rundir.prepare_run_dir``) applies the
explicit overrides given with it to that stored config through ``check_resume_overrides``, which
refuses any that would change what the run learns (``RESUME_MUTABLE`` names those that may
change).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchppo.algorithms.common.run_config import RunConfig
from batchppo.experiment.configs import replace_config
from batchppo.experiment.errors import ConfigError

RESUME_MUTABLE = frozenset(
    {
        "log_every",
        "eval_every",
        "checkpoint_every",
        "keep_checkpoints",
        "eval_max_steps",
        "num_workers",
        "devices",
        "host_loop",
        "xla_convolutions",
        "max_env_restarts",
        "env_step_timeout",
        "backend_options",
        "track",
        "wandb_project",
        "wandb_entity",
        "wandb_group",
    }
)
"""Fields a resumed run may change freely: they affect bookkeeping, speed, where the envs run
(``backend_options``: a backend's options must not change what is learned) or how env faults
are handled, not what is learned."""


def check_resume_overrides(stored: RunConfig, changes: Mapping[str, Any]) -> RunConfig:
    """Applies overrides given when resuming, refusing those that change the run's meaning.

    ``steps`` may be raised (not lowered; and not when a schedule spans it, such as PPO's
    ``anneal_lr``: ``schedule_spans_steps``); bookkeeping fields in ``RESUME_MUTABLE`` may change;
    anything else that differs from the stored config is refused.

    Raises:
        ConfigError: Naming the refused keys.
    """
    refused = []
    for key, value in changes.items():
        if getattr(stored, key) == value or key in RESUME_MUTABLE:
            continue
        if key == "steps" and value > stored.steps and not stored.schedule_spans_steps:
            continue
        refused.append(f"{key}={value!r} (stored {getattr(stored, key)!r})")
    if refused:
        raise ConfigError(
            "cannot change a resumed run's meaning: "
            + ", ".join(refused)
            + ". Only raising `steps` (unless a schedule spans it, as anneal_lr does) and "
            + ", ".join(sorted(RESUME_MUTABLE))
            + " are allowed; start a new run (another --timestamp) instead"
        )
    return replace_config(stored, changes)
