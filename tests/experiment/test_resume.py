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


def test_a_resume_may_not_change_the_options_that_change_what_is_learned():
    stored = configs.get_preset("craftax_symbolic")
    with pytest.raises(ConfigError) as info:
        resume.check_resume_overrides(stored, {"backend_options.autoreset": "select"})
    assert str(info.value).startswith(
        "cannot change a resumed run's meaning: backend_options.autoreset='select' (stored "
        "'optimistic'). Only raising `steps`"
    )
    given = {"backend_options": {"autoreset": "optimistic", "reset_ratio": 16}}
    assert resume.check_resume_overrides(stored, given) == stored  # the same, given again
    brax = dataclasses.replace(configs.get_preset("pendulum_jax"), backend="brax", env="ant")
    with pytest.raises(ConfigError, match=r"backend_options.backend='mjx' \(stored None\)"):
        resume.check_resume_overrides(brax, {"backend_options": {"backend": "mjx"}})
