"""What a resumed run may change of its stored config, and what it may not.

A run dir keeps its config (``config.yaml``); a resume (``rundir.prepare_run_dir``) applies the
explicit overrides given with it to that stored config through ``check_resume_overrides``, which
refuses any that would change what the run learns (``RESUME_MUTABLE`` names those that may
change). A larger ``steps`` extends the run: the config's ``extend`` pins a schedule laid over
the budget to the stored one (recorded in the run's ``config.yaml``), or refuses where the
schedule leaves nothing to train past it (``ExtensionError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchppo.algorithms.run_config import RunConfig
from batchppo.backends import get_backend
from batchppo.experiment.config.configs import expand_changes, replace_config
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


class ExtensionError(ConfigError):
    """A resume that raises ``steps`` past a schedule that cannot go on past the run's budget
    (an anneal of the learning rate to 0): ``RunConfig.extend`` refused it.

    Attributes:
        steps: The budget asked for; a new run of it is what works instead.
    """

    def __init__(self, reason: str, steps: int) -> None:
        super().__init__(
            f"cannot extend the run to steps={steps}: {reason}; train a new run of that "
            "budget instead (without --resume and --timestamp; in Python, another timestamp)"
        )
        self.reason, self.steps = reason, steps


def _extension(stored: RunConfig, changes: Mapping[str, Any]) -> dict[str, Any]:
    """What ``stored.extend`` changes where ``changes`` raise ``steps``; else nothing.

    Raises:
        ExtensionError: The config cannot carry its schedule past its budget.
    """
    steps = changes.get("steps", stored.steps)
    if steps <= stored.steps:
        return {}
    try:
        return stored.extend(steps)
    except ValueError as error:
        raise ExtensionError(str(error), steps) from None


def check_resume_overrides(stored: RunConfig, changes: Mapping[str, Any]) -> RunConfig:
    """Applies overrides given when resuming, refusing those that change the run's meaning.

    ``steps`` may be raised, not lowered: ``stored.extend`` gives what else changes with it
    (a schedule over ``steps``, such as PPO's ``anneal_lr``, pinned to the stored budget,
    which the returned config records) or refuses (``ExtensionError``); bookkeeping fields
    in ``RESUME_MUTABLE`` may change, and the options of ``backend_options`` but those that
    change what is learned; anything else that differs from the stored config is refused.
    ``changes`` may set one entry of a mapping (``backend_options.num_workers``:
    ``expand_changes``), merged into the stored mapping.

    Raises:
        ConfigError: Naming the refused keys.
        ExtensionError: ``steps`` raised past a schedule that ends at nothing to train on.
    """
    changes = expand_changes(changes, stored)
    extension = _extension(stored, changes)
    refused = []
    for key, value in changes.items():
        if key == "backend_options":
            refused += learned_option_changes(stored.backend, stored.backend_options, value)
            continue
        if getattr(stored, key) == value or key in RESUME_MUTABLE:
            continue
        if key in extension and extension[key] == value:
            continue
        refused.append(f"{key}={value!r} (stored {getattr(stored, key)!r})")
    if refused:
        raise ConfigError(
            "cannot change a resumed run's meaning: "
            + ", ".join(refused)
            + ". Only raising `steps` and "
            + ", ".join(sorted(RESUME_MUTABLE))
            + " (but the backend options that change what is learned) are allowed; start a new "
            + "run (another --timestamp) instead"
        )
    return replace_config(stored, {**changes, **extension})
