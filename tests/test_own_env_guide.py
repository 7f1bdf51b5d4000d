"""docs/own_env.md, run: its files written, its commands and Python blocks run in order.

A block after ``<!-- file: NAME -->`` is written to ``NAME``; each ``batchppo`` line of a
``shell`` block runs through ``batchppo.cli.main`` (``> FILE`` captures its output) and
must exit 0; ``python`` blocks run in one namespace; ``text`` blocks are output, not run.
The section on pure-JAX envs uses no file of the others, and runs as a test of its own beside
the rest of the guide (pytest-xdist runs the two side by side).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from batchppo import cli
from batchppo.experiment.config import configs, env_checks, recipes

GUIDE = Path(__file__).parents[1] / "docs" / "own_env.md"
BLOCK = re.compile(r"(?:<!-- file: (?P<file>\S+) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)

pytestmark = pytest.mark.timeout(600)


JAX_SECTION = "## A pure-JAX env from another library"


def blocks(part: str | None = None) -> list[tuple[str | None, str, str]]:
    """``(file, language, body)`` of every fenced block of the guide, in order; of the
    section on pure-JAX envs (``part="jax"``) or of the rest (``part="gymnasium"``) only."""
    text = GUIDE.read_text()
    if part is not None:
        start = text.index(JAX_SECTION)
        end = text.index("\n## ", start)
        text = text[start:end] if part == "jax" else text[:start] + text[end:]
    return [(m["file"], m["lang"], m["body"]) for m in BLOCK.finditer(text)]


def run_command(line: str) -> tuple[str, str]:
    """Runs a ``batchppo`` line of the guide; returns what it printed to stdout and stderr."""
    command, _, target = line.partition(" > ")
    argv = shlex.split(command, comments=True)
    assert argv[0] == "batchppo", line
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv[1:])
    assert code == 0, (line, out.getvalue(), err.getvalue())
    if target:
        Path(target.strip()).write_text(out.getvalue())
    return out.getvalue(), err.getvalue()


def test_the_parts_are_the_whole_guide():
    """The two parts the tests below run hold every block of the guide."""
    parts = blocks("gymnasium"), blocks("jax")
    assert parts[0] and parts[1]
    assert sorted(parts[0] + parts[1], key=str) == sorted(blocks(), key=str)


@pytest.mark.usefixtures("cold_training_programs")  # its runs are a few iterations each
@pytest.mark.parametrize("part", ["gymnasium", "jax"])
def test_the_guide_runs(part, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # a script's directory is importable
    namespace: dict = {}
    kinds, printed = [], []
    for file, lang, body in blocks(part):
        if file is not None:
            Path(file).write_text(body)
        elif lang == "shell":
            printed += [run_command(line) for line in filter(None, body.splitlines())]
        elif lang == "python":
            exec(compile(body, str(GUIDE), "exec"), namespace)
        kinds.append(file or lang)
    logs = tmp_path / "logs"
    if part == "jax":
        assert kinds == ["jaxenvs.py", "shell", "shell", "text"]
        jax_run = configs.load_config(next(logs.glob("*-jax-cartpole")) / "config.yaml")
        assert (jax_run.backend, jax_run.env) == ("gymnax", "jaxenvs:cartpole")
        jumanji_dir = next(logs.glob("*-jumanji-2048"))
        jumanji_run = configs.load_config(jumanji_dir / "config.yaml")
        assert (jumanji_run.backend, jumanji_run.env_kwargs) == ("jumanji", {"id": "Game2048-v1"})
        # The Jumanji run by its registry id prints the guide's text block, trains, evaluates
        # and checkpoints.
        out, err = printed[-1]
        assert err == blocks(part)[-1][2]
        assert "done: 4,096 steps, eval score" in out
        assert (jumanji_dir / "checkpoints" / "ckpt-000000004096.msgpack").is_file()
        return
    assert kinds == [
        "myenvs.py", "shell", "text", "shell", "reach.yaml", "shell", "shell", "python",
        "text", "python",
    ]  # fmt: skip
    # What the blocks made: the runs the guide names, the files it writes.
    assert (logs / "first-reach" / "config.yaml").is_file()
    assert configs.load_config(logs / "first-reach" / "config.yaml").policy_layers == (32, 32)
    assert len(list(logs.glob("*-MyReach-v0"))) == 1
    assert len(list(logs.glob("*-pendulum_fast-make_reach"))) == 1
    assert len(list(logs.glob("*-reach-py"))) == 1
    assert (tmp_path / "reach.png").stat().st_size > 0
    full = configs.load_config(tmp_path / "pendulum_full.yaml")
    assert full == configs.get_preset("pendulum_fast")
    assert namespace["result"].config.env == "myenvs:make_reach"


def test_the_guide_shows_the_messages_batchppo_prints(tmp_path, monkeypatch, capsys):
    """The ``text`` blocks quote batchppo's output: the recipe lines and a start-up error."""
    monkeypatch.chdir(tmp_path)
    texts = [body for _, lang, body in blocks() if lang == "text"]
    (myenvs,) = [body for file, _, body in blocks() if file == "myenvs.py"]
    Path("myenvs.py").write_text(myenvs)
    command, printed = texts[2].splitlines()
    argv = shlex.split(command.removeprefix("$ "))[1:]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == printed + "\n"
    assert not Path("logs").exists()
    recipe = recipes.recipe_for_env("myenvs:MyReach-v0")[1]
    assert texts[0] == f"batchppo: {recipe}\n"
    config, jumanji = recipes.recipe_for_env("jumanji:make", {"id": "Game2048-v1"})
    mask = env_checks.describe_action_mask(config, env_checks.check_env(config))
    assert texts[1] == f"batchppo: {jumanji}\nbatchppo: {mask}\n"
