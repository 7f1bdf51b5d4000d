"""An env class written in the script the user runs (``python train.py``) trains, resumes and
evaluates.

Such a class is ``__main__.Point1D``: no other process can import it by name, neither the
workers of the ``process`` backend (forkserver) nor a later ``batchppo train --resume`` or
``batchppo evaluate``. It travels to the workers by value (cloudpickle), and a run with a logdir
records it by value in ``env.pkl``, which the processes that load the run read back.
"""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import cloudpickle
import gymnasium
import numpy as np
import pytest
from gymnasium.wrappers import TimeLimit

from batchppo import cli
from batchppo.envs import env_ids
from batchppo.experiment.artifacts import checkpoint as ckpt
from batchppo.experiment.artifacts import rundir
from batchppo.experiment.config import configs
from batchppo.experiment.errors import RunDirError

pytestmark = pytest.mark.timeout(400)

SCRIPT = textwrap.dedent(
    """
    import sys

    import gymnasium
    import numpy as np

    import batchppo


    class Point1D(gymnasium.Env):
        \"\"\"A point on a line, moved by the action; reward: minus its distance from 0.\"\"\"

        observation_space = gymnasium.spaces.Box(-10.0, 10.0, (1,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.x = self.np_random.uniform(-1.0, 1.0, (1,)).astype(np.float32)
            self.t = 0
            return self.x.copy(), {}

        def step(self, action):
            self.x = np.clip(self.x + action, -10.0, 10.0).astype(np.float32)
            self.t += 1
            return self.x.copy(), -float(abs(self.x[0])), False, self.t >= 20, {}


    def train(steps, logdir=None, timestamp=None):
        result = batchppo.train(
            "pendulum_fast", logdir, env=Point1D, timestamp=timestamp, progress="none",
            overrides=[f"steps={steps}", *sys.argv[1:]],
        )
        print(result.config.env, result.step, result.run_dir, flush=True)


    # No logdir, then a logdir, then a resume of that run, which holds the class by value in
    # env.pkl: the running script's own class wins over the recording.
    train(512)
    train(512, "logs", "T")
    train(768, "logs", "T")
    """
)

SMALL = [
    "num_agents=8",
    "rollout_length=32",
    "update_epochs=1",
    "num_minibatches=1",
    "policy_layers=[16]",
    "value_layers=[16]",
    "eval_episodes=2",
    "anneal_lr=false",
    "backend_options.num_workers=2",
]
"""256 env steps an iteration, in 2 worker processes; no schedule over ``steps``, which a
resume then raises."""

NOTE = (
    "batchppo: env __main__:Point1D is a class or function of the script run as a file, which "
    "no other process can import: recorded by value in logs/T-pendulum_fast/env.pkl "
    "(cloudpickle), which resume, evaluate and visualize load\n"
)


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(Path(__file__).parents[2])}
    if "BATCHPPO_CACHE_DIR" in os.environ:
        # The session's compilation cache (conftest.py) in the script too, which calls
        # batchppo.train and so turns on no cache of its own, as the CLI does: the script and
        # the resume and evaluation in this process compile the same programs.
        env["JAX_COMPILATION_CACHE_DIR"] = os.environ["BATCHPPO_CACHE_DIR"]
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    result = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    return result


def _last_checkpoint(run_dir: Path) -> int:
    return ckpt.latest_checkpoint(run_dir / rundir.CHECKPOINT_DIR)[0]


def test_a_script_env_trains_records_itself_resumes_and_evaluates(
    tmp_path, monkeypatch, capsys, recorded_envs
):
    (tmp_path / "train.py").write_text(SCRIPT)
    run_dir = tmp_path / "logs" / "T-pendulum_fast"

    first = _run(tmp_path, "train.py", *SMALL)
    assert first.stdout.splitlines() == [
        "__main__:Point1D 512 None",  # no logdir: nothing recorded, nothing on disk
        "__main__:Point1D 512 logs/T-pendulum_fast",
        "__main__:Point1D 768 logs/T-pendulum_fast",  # the script resumed with its own class
    ]
    assert first.stderr.count("recorded by value") == 1 and NOTE in first.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "train.py"]
    assert _last_checkpoint(run_dir) == 768
    config_text = (run_dir / "config.yaml").read_text()
    assert config_text.splitlines()[0] == (
        "# env __main__:Point1D: a class or function of a script run as a file, recorded by "
        "value in env.pkl beside this file (cloudpickle)"
    )
    assert configs.load_config(run_dir / "config.yaml").env == "__main__:Point1D"
    recorded = cloudpickle.loads((run_dir / "env.pkl").read_bytes())
    assert recorded.__name__ == "Point1D" and recorded.__module__ == "__main__"

    # A process that does not run the script (this one): the CLI's resume loads env.pkl, and
    # its worker processes get the class by value again.
    monkeypatch.chdir(tmp_path)
    assert "__main__:Point1D" not in recorded_envs
    code = cli.main(["train", "--config", "pendulum_fast", "--logdir", "logs", "--timestamp", "T",
                     "--resume", "--set", "steps=1024", "--progress", "none"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert _last_checkpoint(run_dir) == 1024
    assert recorded_envs["__main__:Point1D"].__module__ == "__main__"

    capsys.readouterr()
    assert cli.main(["evaluate", "logs/T-pendulum_fast", "--episodes", "2"]) == 0
    assert capsys.readouterr().out.startswith(
        "logs/T-pendulum_fast: __main__:Point1D checkpoint 1,024: mean return"
    )


@pytest.fixture
def recorded_envs():
    """``env_ids``' record of loaded script envs, emptied after the test."""
    yield env_ids._RECORDED
    env_ids._RECORDED.clear()


class Drift:
    """A stand-in for a script's env factory: loading ``env.pkl`` holds what it unpickles."""


def test_a_run_dir_records_and_loads_its_script_env(tmp_path, recorded_envs):
    config = configs.replace_config(configs.get_preset("pendulum_fast"), {"env": "__main__:Drift"})
    recorded_envs["__main__:Drift"] = Drift  # as the script's own, found here
    _, run_dir, resumed = rundir.prepare_run_dir(tmp_path, "drift", config, "T")
    assert not resumed
    assert cloudpickle.loads((run_dir / rundir.ENV_FILE).read_bytes()) is Drift
    recorded_envs.clear()
    stored, _ = rundir.open_run_dir(run_dir)
    assert stored.env == "__main__:Drift"
    assert env_ids.script_factory("__main__:Drift") is Drift
    assert env_ids.env_source("__main__:Drift").value is Drift

    (run_dir / rundir.ENV_FILE).unlink()
    with pytest.raises(RunDirError, match=r"recorded by value in env\.pkl, which cannot be"):
        rundir.open_run_dir(run_dir)


def test_a_script_env_id_without_its_script_or_run_dir_is_one_line(recorded_envs):
    with pytest.raises(ValueError) as info:
        env_ids.env_source("__main__:Nowhere")
    assert str(info.value) == (
        "env '__main__:Nowhere': Nowhere of a script run as a file, which this process does "
        "not run and no run dir recorded here: train it from that script, or resume, "
        "evaluate or visualize its run dir (which holds it by value in env.pkl)"
    )


def test_a_script_env_source_builds_the_recorded_class(recorded_envs):
    """The ``EnvSource`` carries the class itself, which the workers unpickle by value."""

    class Still(gymnasium.Env):
        observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
        action_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)

        def reset(self, *, seed=None, options=None):
            return np.zeros(1, np.float32), {}

    env_ids.hold_script_factory("__main__:Still", Still)
    source = env_ids.env_source("__main__:Still")
    assert source == env_ids.EnvSource("__main__:Still", factory="__main__:Still", value=Still)
    env = cloudpickle.loads(cloudpickle.dumps(source)).build(max_length=3)
    assert isinstance(env, TimeLimit) and env._max_episode_steps == 3
    assert type(env.unwrapped).__qualname__.endswith("<locals>.Still")


def test_the_running_script_wins_over_a_recording_but_not_what_it_imports(
    monkeypatch, recorded_envs
):
    """A script resumes with its own class; a name it only imports (a console script's
    ``main``) is not its env, and the recording is."""
    script = types.ModuleType("__main__")  # run as a file: no __spec__
    own = type("Own", (), {"__module__": "__main__"})
    script.Own, script.main = own, os.getcwd
    monkeypatch.setitem(sys.modules, "__main__", script)
    assert env_ids.factory_env_id(own) == "__main__:Own"
    recorded_own, recorded_main = type("Own", (), {}), type("main", (), {})
    env_ids.hold_script_factory("__main__:Own", recorded_own)
    env_ids.hold_script_factory("__main__:main", recorded_main)
    assert env_ids.script_factory("__main__:Own") is own
    assert env_ids.script_factory("__main__:main") is recorded_main
    script.__spec__ = importlib.machinery.ModuleSpec("pkg.script", None)  # python -m pkg.script
    assert env_ids.script_factory("__main__:Own") is recorded_own
