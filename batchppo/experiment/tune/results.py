"""What a study leaves for its user: ``best.yaml``, the table of trials, and the plots.

``best.yaml`` is the complete config of the best trial (``batchppo train --config
STUDY/best.yaml`` trains it; its seed is the config's, seed 0 of the trial's runs);
``history.png`` is Optuna's optimization history and ``importances.png`` its parameter
importances (PED-ANOVA, ``optuna.importance.PedAnovaImportanceEvaluator``, which needs no
scikit-learn), drawn once two trials completed.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.config import configs
from batchppo.experiment.fileio import atomic_write_bytes
from batchppo.experiment.tune.space import SearchSpace
from batchppo.experiment.tune.study import NOTE_ATTR, import_optuna, quiet_experimental

BEST_FILE = "best.yaml"
HISTORY_FILE = "history.png"
IMPORTANCES_FILE = "importances.png"
MIN_TRIALS_FOR_IMPORTANCES = 2


def complete_trials(study: Any) -> list[Any]:
    """The study's completed trials."""
    optuna = import_optuna()
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def format_value(value: Any) -> str:
    """A parameter's or an objective's value for the table (``-`` for none)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def retries(study: Any) -> dict[int, int]:
    """Each failed trial that was retried, and the trial that retries it (the last one)."""
    retried = {}
    for trial in study.get_trials(deepcopy=False):
        history = trial.system_attrs.get("retry_history") or []
        if history:
            retried[history[-1]] = trial.number
    return retried


def trial_note(trial: Any, retried: Mapping[int, int]) -> str:
    """Why a trial was pruned or failed, or stopped (its ``NOTE_ATTR``), and the trial that
    retries it (``retries``); a queued retry says which trial it retries."""
    if trial.state.name == "WAITING":  # a retry holds a copy of the failed trial's note
        origin = trial.system_attrs.get("retry_history") or []
        return f"retry of trial {origin[-1]}" if origin else ""
    note = trial.user_attrs.get(NOTE_ATTR) or ""
    if trial.number in retried:
        note = f"{note}; retried as trial {retried[trial.number]}".lstrip("; ")
    return note


def trial_rows(study: Any, keys: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The table of ``batchppo tune --show``: a header, then one row per trial (number, state,
    objective value, each parameter of ``keys``, the note)."""
    retried = retries(study)
    rows = [("trial", "state", "value", *keys, "note")]
    for trial in study.get_trials(deepcopy=False):
        note = trial_note(trial, retried)
        params = [format_value(trial.params.get(key)) for key in keys]
        rows.append((str(trial.number), trial.state.name, format_value(trial.value), *params, note))
    return rows


def best_config(study: Any, space: SearchSpace, base: RunConfig) -> tuple[Any, RunConfig] | None:
    """The best trial and its config; None before a trial completed."""
    if not complete_trials(study):
        return None
    best = study.best_trial
    return best, space.config(base, best.params)


def write_best(
    study: Any, space: SearchSpace, base: RunConfig, study_dir: Path, what: str
) -> Path | None:
    """Writes ``best.yaml``: a comment naming the trial and its value, then its full config.

    Args:
        study: The study.
        space: Its search space.
        base: The config its trials start from.
        study_dir: Where to write.
        what: The objective in words.

    Returns:
        The file; None before a trial completed.
    """
    found = best_config(study, space, base)
    if found is None:
        return None
    trial, config = found
    params = ", ".join(f"{k}={format_value(v)}" for k, v in trial.params.items())
    header = (
        f"# batchppo tune: the best trial of study {study.study_name!r}: trial {trial.number}, "
        f"value {trial.value:.6g} ({what}); {params}\n"
    )
    path = study_dir / BEST_FILE
    atomic_write_bytes(path, (header + configs.config_to_yaml(config)).encode())
    return path


def write_plots(study: Any, study_dir: Path) -> list[str]:
    """Writes ``history.png`` and ``importances.png``; one line for each (the file, or why it
    is not drawn yet)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    optuna = import_optuna()
    done = len(complete_trials(study))
    if not done:
        return ["plots: no trial completed yet"]
    lines = []
    with quiet_experimental():
        axes = optuna.visualization.matplotlib.plot_optimization_history(study)
        lines.append(f"wrote {_save(axes, study_dir / HISTORY_FILE, plt)}")
        if done < MIN_TRIALS_FOR_IMPORTANCES:
            lines.append(
                f"parameter importances need {MIN_TRIALS_FOR_IMPORTANCES} completed trials, "
                f"the study has {done}: {IMPORTANCES_FILE} not drawn"
            )
            return lines
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        # PED-ANOVA warns that importances are alike where too few trials set its quantiles
        # apart; the line below says how many trials they come from.
        warnings.filterwarnings("ignore", "Target and region quantiles", UserWarning)
        axes = optuna.visualization.matplotlib.plot_param_importances(study, evaluator=evaluator)
        path = _save(axes, study_dir / IMPORTANCES_FILE, plt)
        lines.append(f"wrote {path} (PED-ANOVA over {done} complete trials)")
    return lines


def _save(axes: Any, path: Path, plt: Any) -> Path:
    """Saves the figure of ``axes`` to ``path`` and closes it."""
    figure = axes.figure
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
