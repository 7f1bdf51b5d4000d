"""BatchEnv built by scripts without ``if __name__ == "__main__":``, ``python -c`` and ``-m``.

Forkserver and spawn children normally run the main script again; an unguarded script would
then build another BatchEnv in every worker, and multiprocessing kills that worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(60)

UNGUARDED = textwrap.dedent(
    """
    import gymnasium
    import numpy as np
    from batchppo.envs import BatchEnv, WorkerOptions

    print("top level runs", flush=True)
    env = BatchEnv([lambda: gymnasium.make("Pendulum-v1")] * 3, WorkerOptions(num_workers=2))
    obs, _ = env.reset(seed=0)
    obs, reward, *_ = env.step(np.zeros((3, 1), np.float32))
    print("stepped", obs.shape, reward.dtype, len(env.worker_pids), flush=True)
    env.close()
    """
)

# Workers of a guarded script still import it, so what its top level defines (here a
# registered env id) exists in the workers, as with Gymnasium's AsyncVectorEnv.
GUARDED_REGISTERING = textwrap.dedent(
    """
    import gymnasium
    import numpy as np
    from gymnasium.envs.classic_control import PendulumEnv
    from batchppo.envs import BatchEnv, WorkerOptions

    class MyPendulum(PendulumEnv):
        pass

    gymnasium.register("MyPendulum-v0", entry_point=MyPendulum, max_episode_steps=5)

    if __name__ == "__main__":
        env = BatchEnv([lambda: gymnasium.make("MyPendulum-v0")] * 2, WorkerOptions(num_workers=2))
        env.reset(seed=0)
        env.step(np.zeros((2, 1), np.float32))
        print("stepped", env.get_attr("spec")[1].id, flush=True)
        env.close()
    """
)


def _run(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=50,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


def _assert_ran(result: subprocess.CompletedProcess, expected_stdout: str) -> None:
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected_stdout
    assert "resource_tracker" not in result.stderr, result.stderr


def test_unguarded_script_builds_a_process_batch_env(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    result = _run([str(script)], str(tmp_path))
    # The top level ran once: the workers did not run the script again.
    _assert_ran(result, "top level runs\nstepped (3, 3) float32 2\n")


def test_unguarded_module_run_with_dash_m(tmp_path):
    (tmp_path / "unguarded_mod.py").write_text(UNGUARDED)
    result = _run(["-m", "unguarded_mod"], str(tmp_path))
    _assert_ran(result, "top level runs\nstepped (3, 3) float32 2\n")


def test_python_dash_c(tmp_path):
    result = _run(["-c", UNGUARDED], str(tmp_path))
    _assert_ran(result, "top level runs\nstepped (3, 3) float32 2\n")


def test_guarded_script_is_imported_by_the_workers(tmp_path):
    script = tmp_path / "guarded.py"
    script.write_text(GUARDED_REGISTERING)
    result = _run([str(script)], str(tmp_path))
    _assert_ran(result, "stepped MyPendulum-v0\n")
