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
from batchppo.backends import get_backend
from batchppo.experiment.configs import expand_changes, replace_config
from batchppo.experiment.errors import ConfigError

RESUME_MUTABLE = frozenset(
    {
        "log_every",
        "eval_every",
        "checkpoint_every",
        "keep_checkpoints",
        "eval_max_steps",
        "devices",
        "host_loop",
        "xla_convolutions",
        "backend_options",
        "track",
        "wandb_project",
        "wandb_entity",
        "wandb_group",
    }
)
"""Fields a resumed run may change freely: they affect bookkeeping, speed, where the envs run
or how env faults are handled (``backend_options``: the workers, restarts, timeouts...), not
what is learned. Of ``backend_options``, those that change what is learned
(``Backend.learned_options``: how pure-JAX envs restart, the physics) may not change
(``learned_option_changes``)."""


def learned_option_changes(
    backend: str, stored: Mapping[str, Any], given: Mapping[str, Any]
) -> list[str]:
    """The options of ``backend`` that change what a run learns and whose values (given or
    default) differ between two ``backend_options``: ``"backend_options.NAME=new (stored
    old)"`` each. None for options the backend refuses (the config's validation names them).
    """
    record = get_backend(backend)
    try:
        before, after = record.check_options(stored), record.check_options(given)
    except ValueError:
        return []
    return [
        f"backend_options.{name}={getattr(after, name)!r} (stored {getattr(before, name)!r})"
        for name in record.learned_options()
        if getattr(before, name) != getattr(after, name)
    ]


def check_resume_overrides(stored: RunConfig, changes: Mapping[str, Any]) -> RunConfig:
    """Applies overrides given when resuming, refusing those that change the run's meaning.

    ``steps`` may be raised (not lowered; and not when a schedule spans it, such as PPO's
    ``anneal_lr``: ``schedule_spans_steps``); bookkeeping fields in ``RESUME_MUTABLE`` may change,
    and the options of ``backend_options`` but those that change what is learned; anything else
    that differs from the stored config is refused. ``changes`` may set one entry of a mapping
    (``backend_options.num_workers``: ``expand_changes``), merged into the stored mapping.

    Raises:
        ConfigError: Naming the refused keys.
    """
    changes = expand_changes(changes, stored)
    refused = []
    for key, value in changes.items():
        if key == "backend_options":
            refused += learned_option_changes(stored.backend, stored.backend_options, value)
            continue
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
            + " (but the backend options that change what is learned) are allowed; start a new "
            + "run (another --timestamp) instead"
        )
    return replace_config(stored, changes)
