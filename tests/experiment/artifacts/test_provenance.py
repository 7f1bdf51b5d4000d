"""provenance: the code version a run records, and the code and config results files record."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest
from experiment_fakes import FakeTrainer, fake_config

from batchppo import cli
from batchppo.experiment.analysis import evaluate, protocols
from batchppo.experiment.artifacts import provenance
from batchppo.experiment.config import configs
from batchppo.experiment.errors import ConfigError, UserError
from batchppo.experiment.run import training


@pytest.fixture
def version(monkeypatch):
    """Sets the code version this process reports: ``version(commit, note)``."""

    def set_version(commit, note=None):
        monkeypatch.setattr(provenance, "code_version", lambda: {"commit": commit, "note": note})

    return set_version


def test_code_version_is_the_package_checkout_s_commit_and_says_what_it_does_not_hold(
    monkeypatch,
):
    answers = {("rev-parse", "HEAD"): "abc123", ("status", "--porcelain", "--", "."): ""}
    monkeypatch.setattr(provenance, "_git", lambda *args: answers[args])
    provenance.code_version.cache_clear()
    assert provenance.code_version() == {"commit": "abc123", "note": None}
    answers[("status", "--porcelain", "--", ".")] = " M experiment/artifacts/provenance.py"
    provenance.code_version.cache_clear()
    assert provenance.code_version() == {
        "commit": "abc123",
        "note": "with uncommitted changes to batchppo/",
    }

    def no_git(*args):
        raise subprocess.CalledProcessError(128, "git")

    monkeypatch.setattr(provenance, "_git", no_git)
    provenance.code_version.cache_clear()
    assert provenance.code_version() == {
        "commit": None,
        "note": f"batchppo at {provenance.PACKAGE} is not in a git checkout",
    }
    provenance.code_version.cache_clear()


def test_a_run_records_its_code_at_each_start_and_resume(tmp_path, version):
    version("aaa")
    training.train(
        fake_config(), tmp_path, name="fake", timestamp="T", progress="none",
        trainer_factory=FakeTrainer,
    )  # fmt: skip
    run_dir = tmp_path / "T-fake"
    assert provenance.run_code(run_dir) == ("aaa", None)
    version("aaa", "with uncommitted changes to batchppo/")
    training.train(
        fake_config(steps=1200), tmp_path, name="fake", timestamp="T", progress="none",
        trainer_factory=FakeTrainer, overrides=["steps=1200"],
    )  # fmt: skip
    lines = (run_dir / provenance.CODE_FILE).read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"step": 0, "commit": "aaa", "note": None},
        {"step": 1000, "commit": "aaa", "note": "with uncommitted changes to batchppo/"},
    ]
    assert provenance.run_code(run_dir) == ("aaa", "with uncommitted changes to batchppo/")
    version("bbb")
    provenance.record_code(run_dir, 1200)
    assert provenance.run_code(run_dir) == (
        None,
        "trained at several code versions: aaa from step 0, aaa from step 1,000, bbb from "
        "step 1,200",
    )
    assert provenance.run_code(tmp_path) == (
        None,
        "the run dir records no code version (it predates CODE_FILE)",
    )


def test_run_provenance_is_the_stored_config_as_loaded_without_its_seed(tmp_path, version):
    version("ccc")
    run_dir = tmp_path / "T-x"
    run_dir.mkdir()
    config = dataclasses.replace(configs.get_preset("pendulum_jax"), seed=7)
    data = configs.config_to_dict(config)
    del data["minibatch_shuffle"]  # stored before the field: loads as the sort it ran
    (run_dir / "config.yaml").write_text(json.dumps(data))
    provenance.record_code(run_dir, 0)
    record = provenance.run_provenance(run_dir)
    expected = configs.config_to_dict(dataclasses.replace(config, minibatch_shuffle="sort"))
    del expected["seed"]
    assert record == {"commit": "ccc", "note": None, "config": expected}


def test_a_recorded_config_loads_with_the_fields_added_since_at_their_former_values():
    shipped = provenance.effective_config(configs.get_preset("pendulum_jax"))
    recorded = {k: v for k, v in shipped.items() if k not in ("minibatch_shuffle", "eval_actions")}
    # minibatch_shuffle's default changed (FIELDS_ADDED: sort); eval_actions' repeats the past.
    assert provenance.loaded(recorded) == {**shipped, "minibatch_shuffle": "sort"}
    with pytest.raises(ConfigError, match=r"^r.json: unknown config keys \['old_field'\]"):
        provenance.loaded({**recorded, "old_field": 1}, "r.json")


def test_fold_keeps_one_value_where_runs_agree_and_a_list_where_they_differ():
    assert provenance.fold([{"a": 1}, {"a": 1}]) == {"a": 1}
    assert provenance.fold(["x", "y", "x"]) == ["x", "y", "x"]
    assert provenance.fold([None, None]) is None
    assert provenance.unfold({"a": 1}, 2) == [{"a": 1}, {"a": 1}]
    assert provenance.unfold(["x", "y"], 2) == ["x", "y"]
    with pytest.raises(ValueError, match="3 values for 2 runs"):
        provenance.unfold(["x", "y", "z"], 2)


def test_config_differences_name_each_field_with_both_values():
    shipped = {"steps": 10, "seed": 1, "minibatch_shuffle": "index", "host_loop": None, "a": 1,
               "representation_diagnostics": False}  # fmt: skip
    recorded = {"steps": 10, "seed": 2, "minibatch_shuffle": "sort", "host_loop": False, "b": 2,
                "representation_diagnostics": True}  # fmt: skip
    # The seed and fields that change neither learning nor measurement (host_loop, the
    # diagnostics) are left out.
    assert provenance.config_differences(shipped, recorded) == [
        ("minibatch_shuffle", "index", "sort"),
        ("a", 1, None),
        ("b", None, 2),
    ]
    assert "eval_every" not in provenance.NO_EFFECT  # the periodic evaluations' cadence counts
    assert {"host_loop", "checkpoint_every", "devices"} <= provenance.NO_EFFECT


def test_of_backend_options_only_those_that_change_what_is_learned_count():
    def config(backend: str, **options: object) -> dict:
        return {"backend": backend, "backend_options": options}

    differences = provenance.config_differences
    # Workers and timeouts say where the envs run; a default given is the default.
    assert differences(config("process", num_workers=2), config("process")) == []
    assert differences(config("gymnax", autoreset="select"), config("gymnax")) == []
    assert differences(config("gymnax", autoreset="first"), config("gymnax")) == [
        ("backend_options", {"autoreset": "first"}, {})
    ]
    assert provenance.config_differences(config("ray"), config("sync")) == [
        ("backend", "ray", "sync")
    ]


def test_a_recorded_config_of_former_fields_loads_with_them_as_options():
    shipped = provenance.effective_config(configs.get_preset("pendulum_fast"))
    recorded = {k: v for k, v in shipped.items() if k != "backend_options"}
    recorded.update(num_workers=3, max_env_restarts=0, env_step_timeout=60.0)
    loaded = provenance.loaded(recorded)
    assert loaded["backend_options"] == {"num_workers": 3}  # the defaults stay defaults
    assert provenance.config_differences(shipped, loaded) == []


def entry(run_dir: str, seed: int, config: dict, commit: str | None) -> dict:
    return {
        "run_dir": run_dir, "env": "Hopper-v5", "checkpoint": 100, "episodes": 4, "seed": seed,
        "mean_return": float(seed), "std_return": 0.0, "commit": commit,
        "note": None, "config": config,
    }  # fmt: skip


def test_a_results_file_records_each_group_s_code_and_config_and_reads_back(tmp_path, version):
    version("eval-commit")
    a = {"steps": 10, "minibatch_shuffle": "sort"}
    b = {"steps": 10, "minibatch_shuffle": "index"}
    groups = {
        "x": [entry("r/s0", 0, a, "c1"), entry("r/s1", 1, a, "c1")],
        "y": [entry("q/s0", 0, a, "c1"), entry("q/s1", 1, b, "c2")],
    }
    document = evaluate.results_document(groups)
    assert document["provenance"] == {
        "x": {"commit": "c1", "note": None, "config": a},
        "y": {"commit": ["c1", "c2"], "note": None, "config": [a, b]},
    }
    assert document["evaluated_with"] == {"commit": "eval-commit", "note": None}
    assert [(r["run_dir"], r["group"]) for r in document["runs"]] == [
        ("r/s0", "x"), ("r/s1", "x"), ("q/s0", "y"), ("q/s1", "y"),
    ]  # fmt: skip
    assert not any(key in r for r in document["runs"] for key in provenance.PROVENANCE_KEYS)
    path = evaluate.write_stats(document, tmp_path / "results.json")
    assert evaluate.load_results(path) == [
        {**e, "group": name} for name, entries in groups.items() for e in entries
    ]
    # A file of an earlier version (a bare list) reads with no provenance.
    (tmp_path / "old.json").write_text(json.dumps([{**e, "group": "x"} for e in groups["x"]]))
    old = evaluate.load_results(tmp_path / "old.json")
    assert [(e["commit"], e["config"]) for e in old] == [(None, None), (None, None)]
    document["provenance"]["y"]["config"] = [a]
    path.write_text(json.dumps(document))
    with pytest.raises(UserError, match=r"results.json: group y's config: 1 values for 2 runs"):
        evaluate.load_results(path)


def test_evaluate_json_records_the_runs_code_and_config(tmp_path, version, capsys):
    version("ddd")
    run_dirs = []
    for seed in (0, 1):
        run_dir = tmp_path / f"T-p-s{seed}"
        run_dir.mkdir()
        config = dataclasses.replace(configs.get_preset("pendulum_jax"), seed=seed)
        configs.save_config(config, run_dir / "config.yaml")
        records = [{"step": 10, "phase": "train", "score": 5.0 + seed, "episodes": 3}]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        provenance.record_code(run_dir, 0)
        run_dirs.append(str(run_dir))
    out = tmp_path / "window.json"
    argv = ["evaluate", *run_dirs, "--training-window", "3", "--json", str(out)]
    with pytest.warns(protocols.ApproximateWindowWarning):  # no episodes.jsonl
        assert cli.main(argv) == 0
    capsys.readouterr()
    written = json.loads(out.read_text())
    shipped = provenance.effective_config(configs.get_preset("pendulum_jax"))
    assert written["provenance"] == {"p": {"commit": "ddd", "note": None, "config": shipped}}
    assert [r["mean_return"] for r in written["runs"]] == [5.0, 6.0]


@pytest.mark.parametrize("backend", ["gymnax", "sync"])
@pytest.mark.usefixtures("cold_training_programs")  # its runs are four iterations each
def test_the_periodic_evaluations_change_nothing_a_run_learns(backend):
    # What PERIODIC_EVALUATION promises: two runs apart only in those fields end in the same
    # training state, bit for bit. The preset's learner (reward scaling, KL stop, annealed
    # rate) at a tiny size: 8 envs x 32 steps an iteration, 2 epochs of 2 minibatches; one run
    # evaluates after every iteration, the other after every second.
    import jax
    import numpy as np

    base = dataclasses.replace(
        configs.get_preset("pendulum_jax"), backend=backend, steps=1024, log_every=512,
        num_agents=8, update_epochs=2, num_minibatches=2, policy_layers=(16,),
        value_layers=(16,),
    )  # fmt: skip
    states = []
    for every, episodes, actions, max_steps in ((512, 2, "mean", 50), (256, 3, "sampled", 200)):
        config = dataclasses.replace(
            base,
            eval_every=every,
            eval_episodes=episodes,
            eval_actions=actions,
            eval_max_steps=max_steps,
        )
        states.append(training.train(config, progress="none").train_state)
    assert set(provenance.PERIODIC_EVALUATION) == {
        "eval_every",
        "eval_episodes",
        "eval_actions",
        "eval_max_steps",
    }
    first, second = (jax.tree.leaves(jax.tree.map(np.asarray, s)) for s in states)
    assert len(first) == len(second) > 0
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_figure_that_reads_no_periodic_evaluation_sets_their_fields_aside():
    shipped = {"eval_every": 30_000, "eval_actions": "sampled", "init_std": 0.3}
    recorded = {"eval_every": 50_000, "eval_actions": "mean", "init_std": 0.3}
    assert provenance.config_differences(shipped, recorded) == [
        ("eval_every", 30_000, 50_000),
        ("eval_actions", "sampled", "mean"),
    ]
    aside = provenance.PERIODIC_EVALUATION
    assert provenance.config_differences(shipped, recorded, aside) == []
    recorded["init_std"] = 0.6
    assert provenance.config_differences(shipped, recorded, aside) == [("init_std", 0.3, 0.6)]
