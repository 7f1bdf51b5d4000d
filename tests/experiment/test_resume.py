"""Resume rules: what a resumed run may change of its stored config."""

from __future__ import annotations

import dataclasses

import pytest

from batchppo.experiment import configs, resume
from batchppo.experiment.errors import ConfigError


def test_resume_allows_raising_steps_and_bookkeeping_only():
    stored = dataclasses.replace(configs.get_preset("cartpole_jax"), learning_rate=2.5e-4)
    resumed = resume.check_resume_overrides(stored, {"steps": stored.steps * 2, "log_every": 7})
    assert resumed.steps == stored.steps * 2 and resumed.log_every == 7
    assert resume.check_resume_overrides(stored, {"learning_rate": stored.learning_rate}) == stored
    with pytest.raises(ConfigError, match=r"learning_rate=0\.1 \(stored 0\.00025\)"):
        resume.check_resume_overrides(stored, {"learning_rate": 0.1})
    with pytest.raises(ConfigError, match="steps=10"):
        resume.check_resume_overrides(stored, {"steps": 10})
    annealed = dataclasses.replace(stored, anneal_lr=True)
    with pytest.raises(ConfigError, match="steps="):
        resume.check_resume_overrides(annealed, {"steps": stored.steps * 2})
