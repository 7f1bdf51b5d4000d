"""The algorithm registry: records, lookups, config files naming their algorithm, and the
experiment layer's independence of any one algorithm."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import yaml

import batchppo
from batchppo.algorithms import registry
from batchppo.algorithms.common.run_config import RunConfig
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.experiment import configs
from batchppo.experiment.errors import ConfigError

PACKAGE = Path(batchppo.__file__).parent


def test_lookups_by_name_and_by_config():
    ppo = registry.get_algorithm("ppo")
    assert ppo.config is PPOConfig and registry.algorithm_of(PPOConfig()) is ppo
    assert set(ppo.presets) <= set(configs.PRESETS) and "pendulum_jax" in ppo.presets
    with pytest.raises(ValueError, match=r"unknown algorithm 'ppp'\. Did you mean 'ppo'\?"):
        registry.get_algorithm("ppp")
    with pytest.raises(TypeError, match=r"config must be one of PPOConfig.*got RunConfig"):
        registry.algorithm_of(RunConfig())
    with pytest.raises(ValueError, match="'ppo' is registered already"):
        registry.register(ppo)


def test_every_config_class_is_a_run_config_and_every_preset_its_algorithms():
    for algorithm in registry.ALGORITHMS.values():
        assert issubclass(algorithm.config, RunConfig)
        for name, preset in algorithm.presets.items():
            assert type(preset) is algorithm.config, name
    names = [name for a in registry.ALGORITHMS.values() for name in a.presets]
    assert len(names) == len(set(names)) == len(configs.PRESETS)


def test_run_fields_are_run_configs_and_validated_there():
    run_fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert {"env", "backend", "num_agents", "steps", "eval_every", "seed"} <= run_fields
    assert "learning_rate" not in run_fields
    with pytest.raises(ValueError, match="num_agents=0: must be >= 1"):
        RunConfig(num_agents=0)
    assert RunConfig(steps=2000).eval_interval == 100 and not RunConfig().schedule_spans_steps
    assert PPOConfig(anneal_lr=True).schedule_spans_steps


def test_config_files_name_their_algorithm_and_old_ones_load_as_ppo(tmp_path):
    config = configs.get_preset("cartpole_jax")
    data = configs.config_to_dict(config)
    assert next(iter(data)) == "algorithm" and data["algorithm"] == "ppo"
    del data["algorithm"]  # a config.yaml written before the field existed
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    assert configs.load_config(path) == config
    path.write_text(yaml.safe_dump({**data, "algorithm": "trpo"}))
    with pytest.raises(ConfigError, match=r"config\.yaml: unknown algorithm 'trpo'"):
        configs.load_config(path)


def test_stored_runs_of_the_docs_load():
    paths = sorted((PACKAGE.parent / "docs" / "runs").glob("*/config.yaml"))
    for path in paths:
        config = configs.load_config(path)
        assert type(config) is PPOConfig, path


def _imported_modules(path: Path) -> set[str]:
    package = path.relative_to(PACKAGE.parent).parent.parts  # relative imports resolve here
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            modules |= {module, *(f"{module}.{a.name}" for a in node.names)}
    return modules


def test_the_experiment_layer_and_the_cli_import_no_algorithm():
    paths = [*sorted((PACKAGE / "experiment").glob("*.py")), PACKAGE / "cli.py"]
    algorithms = tuple(f"batchppo.algorithms.{name}" for name in registry.ALGORITHMS)
    for path in paths:
        found = [m for m in _imported_modules(path) if m.startswith(algorithms)]
        assert not found, f"{path.name} imports {found}"


def _is_in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_algorithm_imports_another_algorithms_package():
    # What two algorithms share (networks, the driver) lives in algorithms/common/.
    packages = sorted(
        p for p in (PACKAGE / "algorithms").iterdir() if (p / "__init__.py").is_file()
    )
    algorithms = [p.name for p in packages if p.name != "common"]
    assert {"ppo", "a2c"} <= set(algorithms) and set(registry.ALGORITHMS) <= set(algorithms)
    for name in algorithms:
        others = [f"batchppo.algorithms.{o}" for o in algorithms if o != name]
        for path in sorted((PACKAGE / "algorithms" / name).rglob("*.py")):
            found = [m for m in _imported_modules(path) if any(_is_in(m, o) for o in others)]
            assert not found, f"algorithms/{name}/{path.name} imports {found}"
    for path in sorted((PACKAGE / "algorithms" / "common").rglob("*.py")):
        found = [
            m
            for m in _imported_modules(path)
            if any(_is_in(m, f"batchppo.algorithms.{o}") for o in algorithms)
        ]
        assert not found, f"algorithms/common/{path.name} imports {found}"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("objective", ["kl_penalty", "clip"])
def test_ppo_iterations_report_the_declared_metrics(objective):
    from batchppo.algorithms.ppo.ppo import Trainer
    from batchppo.core.keys import host_key
    from batchppo.experiment.training import EPISODE_METRICS

    config = PPOConfig(
        env="Pendulum-v1", backend="gymnax", num_agents=2, rollout_length=4, update_epochs=1,
        policy_layers=(4,), value_layers=(4,), steps=8, objective=objective,
    )  # fmt: skip
    trainer = Trainer(config)
    ts = trainer.init(host_key(0, 0))
    _, _, metrics = trainer.iteration(ts, trainer.init_sim(ts, host_key(0, 1)))
    trainer.close()
    assert {*EPISODE_METRICS, *registry.get_algorithm("ppo").metrics} <= set(metrics)
