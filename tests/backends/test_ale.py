"""The ``ale`` backend's record (``batchppo.backends.ale``): its options, and the Atari presets
trained on it from the command line in both modes."""

from __future__ import annotations

import json

import pytest

from batchppo import cli
from batchppo.backends import get_backend, names

pytestmark = pytest.mark.timeout(300)


def test_the_record_is_a_host_backend_with_its_options():
    record = get_backend("ale")
    assert "ale" in names(host=True) and record.option_names() == (
        "mode",
        "batch_size",
        "num_threads",
    )
    assert record.check_options({}).mode == "fused"
    assert record.check_options({"mode": "host", "batch_size": 8}).batch_size == 8
    with pytest.raises(ValueError, match=r"^backend_options\.mode=3: backend 'ale' expects str"):
        record.check_options({"mode": 3})


# Two iterations of 2 envs x 16 steps, one short evaluation each: the presets' whole path
# (probe, trainer, rollout, update, evaluation).
_SMALL = [
    "num_agents=2",
    "rollout_length=16",
    "steps=64",
    "update_epochs=1",
    "num_minibatches=1",
    "cnn_dense=16",
    "eval_episodes=1",
    "eval_max_steps=16",
]


# The default mode in CI; the host mode's rollout is CI's in test_ale_env.py.
@pytest.mark.parametrize("mode", ["fused", pytest.param("host", marks=pytest.mark.extended)])
def test_breakout_atari_trains_from_the_cli_in_each_mode(tmp_path, mode):
    sets = [*_SMALL, "backend=ale", f"backend_options={{mode: {mode}}}"]
    argv = ["train", "--config", "breakout_atari", "--logdir", str(tmp_path), "--name", mode]
    code = cli.main([*argv, *[arg for s in sets for arg in ("--set", s)], "--progress", "none"])
    assert code == 0
    (run,) = tmp_path.iterdir()
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["phase"] == "train"]
    assert [r["step"] for r in train] == [32, 64]
    assert all("games" in r and "game_score" in r for r in train)  # the whole-game scores


def test_a_host_loop_or_shared_seeds_are_refused_where_the_envs_step_in_the_program(
    tmp_path, capsys
):
    argv = ["train", "--config", "breakout_atari", "--logdir", str(tmp_path)]
    argv += ["--set", "backend=ale"]
    assert cli.main([*argv, "--set", "host_loop=true"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "batchppo: error: invalid config: host_loop=True steps host envs from a Python loop; "
        "backend='ale' with backend_options {} steps them inside the compiled rollout: set "
        "host_loop=false (or None)"
    )
    assert cli.main([*argv, "--seeds", "2"]) == 2
    assert "start one run per seed" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
