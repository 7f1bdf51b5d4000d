"""Resume rules: what a resumed run may change of its stored config."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from tiny_runs import tiny_run

from batchppo.experiment import trainers
from batchppo.experiment.artifacts.logging import read_metrics
from batchppo.experiment.config import configs, resume
from batchppo.experiment.errors import ConfigError
from batchppo.experiment.run import training
from batchppo.experiment.run.callbacks import Callback


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


def test_a_larger_budget_pins_an_anneal_that_ends_above_0_and_refuses_one_that_ends_at_0():
    stored = dataclasses.replace(configs.get_preset("cartpole_jax"), anneal_lr=True, steps=2048)
    with pytest.raises(resume.ExtensionError) as info:
        resume.check_resume_overrides(stored, {"steps": 4096})
    assert str(info.value) == (
        "cannot extend the run to steps=4096: anneal_lr anneals the learning rate to 0 over "
        "steps=2048 (anneal_lr_end=0), so past them it would train at a rate of 0; train a new "
        "run of that budget instead (without --resume and --timestamp; in Python, another "
        "timestamp)"
    )
    assert info.value.steps == 4096 and isinstance(info.value, ConfigError)
    ending = dataclasses.replace(stored, anneal_lr_end=0.25)
    extended = resume.check_resume_overrides(ending, {"steps": 4096})
    assert extended == dataclasses.replace(ending, steps=4096, anneal_lr_steps=2048)
    assert extended.schedule_note() == (
        "the learning rate anneals from 0.001 to 0.00025 over the first 2,048 steps "
        "(anneal_lr_steps) and holds 0.00025 from there to steps=4,096"
    )
    # Given as the pin is, the anneal's span is no change of meaning; another span is.
    same = {"steps": 4096, "anneal_lr_steps": 2048}
    assert resume.check_resume_overrides(ending, same) == extended
    with pytest.raises(ConfigError, match=r"anneal_lr_steps=1000 \(stored None\)"):
        resume.check_resume_overrides(ending, {"steps": 4096, "anneal_lr_steps": 1000})
    # Extended again, the anneal keeps the span it was pinned to.
    again = resume.check_resume_overrides(extended, {"steps": 8192})
    assert again == dataclasses.replace(extended, steps=8192)
    # A constant rate spans nothing: steps alone change, and there is nothing to note.
    constant = dataclasses.replace(stored, anneal_lr=False)
    longer = resume.check_resume_overrides(constant, {"steps": 4096})
    assert longer == dataclasses.replace(constant, steps=4096) and longer.schedule_note() is None


def test_the_anneal_fields_are_checked_and_a2c_extends_as_ppo_does():
    base = configs.get_preset("cartpole_jax")
    with pytest.raises(ValueError, match=r"^anneal_lr_steps=100 < steps=300000 with anneal_lr_"):
        dataclasses.replace(base, anneal_lr=True, anneal_lr_steps=100)
    with pytest.raises(ValueError, match=r"^anneal_lr_end=0.5, anneal_lr_steps=None shape an "):
        dataclasses.replace(base, anneal_lr_end=0.5)
    with pytest.raises(ValueError, match=r"^anneal_lr_end=1.5: must be in \[0, 1\]"):
        dataclasses.replace(base, anneal_lr=True, anneal_lr_end=1.5)
    a2c = dataclasses.replace(configs.get_preset("cartpole_a2c"), anneal_lr=True)
    with pytest.raises(resume.ExtensionError, match="anneal_lr anneals the learning rate to 0"):
        resume.check_resume_overrides(a2c, {"steps": a2c.steps * 2})
    a2c = dataclasses.replace(a2c, anneal_lr_end=0.5)
    extended = resume.check_resume_overrides(a2c, {"steps": a2c.steps * 2})
    assert extended.anneal_lr_steps == a2c.steps and extended.steps == a2c.steps * 2


@pytest.mark.parametrize("preset", ["cartpole_jax", "cartpole_a2c"])
def test_an_extended_schedule_is_the_stored_one_whose_end_holds_past_its_budget(preset):
    stored = dataclasses.replace(
        configs.get_preset(preset), anneal_lr=True, anneal_lr_end=0.25, steps=5120, num_agents=8
    )
    extended = resume.check_resume_overrides(stored, {"steps": 10240})
    agents = []
    for config in (stored, extended):
        trainer = trainers.build_trainer(None, config)
        agents.append(trainer.agent)
        trainer.close()
    # PPO: 10 iterations of 4 epochs of 4 minibatches; A2C: 128 iterations of one step each.
    span = 10 * 4 * 4 if preset == "cartpole_jax" else 128
    assert agents[1].num_iterations == 2 * agents[0].num_iterations
    counts = np.arange(2 * span)
    rates = [np.asarray(agent.schedule(counts)) for agent in agents]
    np.testing.assert_array_equal(rates[1], rates[0])
    assert np.all(np.diff(rates[1][: span + 1]) < 0)  # annealed over the stored budget
    np.testing.assert_allclose(rates[1][span:], stored.learning_rate / 4, rtol=1e-6)


class StopAt(Callback):
    """Asks the run to stop after its report at ``step``."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_report(self, run, step, metrics):
        return step != self.step


def learned(run_dir):
    """The train reports of a run without their timings."""
    rows = [r for r in read_metrics(run_dir) if r["phase"] == "train"]
    return [{k: v for k, v in r.items() if k not in ("sps", "wall_time")} for r in rows]


@pytest.mark.timeout(240)
@pytest.mark.usefixtures("cold_training_programs")  # its runs are a few iterations each
def test_an_extended_run_learns_what_it_learned_up_to_its_budget_then_holds_the_end_rate(
    tmp_path, capsys
):
    # 256 steps an iteration, one optimiser step each: 8 iterations anneal 1e-3 to 2.5e-4.
    fields = tiny_run(anneal_lr="true", anneal_lr_end=0.25, eval_every=0, checkpoint_every=512)
    stopped = training.train(
        "cartpole_jax", tmp_path, timestamp="A", overrides=[*fields, "steps=2048"],
        progress="none", callbacks=[StopAt(1024)],
    )  # fmt: skip
    assert stopped.interrupted and stopped.step == 1024
    shutil.copytree(stopped.run_dir, tmp_path / "B-cartpole_jax")  # the same run, twice
    as_begun = training.train("cartpole_jax", tmp_path, timestamp="A", progress="none")
    assert as_begun.step == 2048 and as_begun.config.anneal_lr_steps is None
    capsys.readouterr()
    extended = training.train(
        "cartpole_jax", tmp_path, timestamp="B", overrides=["steps=3072"], progress="lines"
    )
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        f"resuming {tmp_path / 'B-cartpole_jax'} from step 1,024",
        "the learning rate anneals from 0.001 to 0.00025 over the first 2,048 steps "
        "(anneal_lr_steps) and holds 0.00025 from there to steps=3,072",
    ]
    assert extended.step == 3072 and extended.config.anneal_lr_steps == 2048
    stored = configs.load_config(tmp_path / "B-cartpole_jax" / "config.yaml")
    assert stored == extended.config  # the pinned anneal is the run's config from now on
    longer = learned(extended.run_dir)
    assert [r["step"] for r in longer] == list(range(256, 3073, 256))
    assert longer[:8] == learned(as_begun.run_dir)  # up to the stored budget, the run it was
    # The anneal's rates (1e-3 - 7.5e-4 * u / 8 at iteration u), then its end held.
    rates = np.array([r["learning_rate"] for r in longer])
    np.testing.assert_allclose(rates, 1e-3 - 7.5e-4 * np.minimum(np.arange(12), 8) / 8, rtol=1e-6)
    assert len(set(rates[8:])) == 1
