"""The algorithm registry: records, lookups, config files naming their algorithm, a user's
package's algorithm trained from the command line through an entry point, and the experiment
layer's independence of any one algorithm."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
import yaml

import batchppo
from batchppo.algorithms import registry
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.config import configs
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


def test_a_record_the_lookups_could_not_tell_from_a_registered_one_is_refused():
    ppo = registry.get_algorithm("ppo")
    with pytest.raises(ValueError) as info:
        registry.register(dataclasses.replace(ppo, name="ppo2", presets={}))
    assert str(info.value) == (
        "algorithm 'ppo2': config class PPOConfig belongs to algorithm 'ppo' already; give it "
        "a class of its own (a subclass will do)"
    )

    @dataclasses.dataclass(frozen=True)
    class OwnConfig(PPOConfig):
        pass

    with pytest.raises(ValueError) as info:
        registry.register(
            dataclasses.replace(ppo, name="own", config=OwnConfig, presets={"cartpole_jax": None})
        )
    assert str(info.value) == (
        "algorithm 'own': preset names ['cartpole_jax'] belong to algorithm 'ppo' already; "
        "rename them"
    )
    with pytest.raises(ValueError, match=r"^algorithm 'own': its config must be a subclass of Run"):
        registry.register(dataclasses.replace(ppo, name="own", config=dict, presets={}))
    assert "own" not in registry.ALGORITHMS.registered()


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


SHARED = ("networks", "training")
"""The packages of ``algorithms/`` that every algorithm shares (no algorithm of their own)."""


def _is_in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_algorithm_imports_another_algorithms_package():
    # What two algorithms share lives in algorithms/networks/ and algorithms/training/.
    packages = sorted(
        p for p in (PACKAGE / "algorithms").iterdir() if (p / "__init__.py").is_file()
    )
    algorithms = [p.name for p in packages if p.name not in SHARED]
    assert {"ppo", "a2c"} <= set(algorithms) and set(registry.ALGORITHMS) <= set(algorithms)
    for name in algorithms:
        others = [f"batchppo.algorithms.{o}" for o in algorithms if o != name]
        for path in sorted((PACKAGE / "algorithms" / name).rglob("*.py")):
            found = [m for m in _imported_modules(path) if any(_is_in(m, o) for o in others)]
            assert not found, f"algorithms/{name}/{path.name} imports {found}"
    for shared in SHARED:
        for path in sorted((PACKAGE / "algorithms" / shared).rglob("*.py")):
            found = [
                m
                for m in _imported_modules(path)
                if any(_is_in(m, f"batchppo.algorithms.{o}") for o in algorithms)
            ]
            assert not found, f"algorithms/{shared}/{path.name} imports {found}"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("objective", ["kl_penalty", "clip"])
@pytest.mark.usefixtures("cold_training_programs")  # one iteration: the metrics it names
def test_ppo_iterations_report_the_declared_metrics(objective):
    from batchppo.algorithms.ppo.ppo import Trainer
    from batchppo.core.keys import host_key
    from batchppo.experiment.run.training import EPISODE_METRICS

    config = PPOConfig(
        env="Pendulum-v1", backend="gymnax", num_agents=2, rollout_length=4, update_epochs=1,
        policy_layers=(4,), value_layers=(4,), steps=8, objective=objective,
    )  # fmt: skip
    trainer = Trainer(config)
    ts = trainer.init(host_key(0, 0))
    _, _, metrics = trainer.iteration(ts, trainer.init_sim(ts, host_key(0, 1)))
    trainer.close()
    assert {*EPISODE_METRICS, *registry.get_algorithm("ppo").metrics} <= set(metrics)


USER_ALGORITHM = '''
"""A user's algorithm package: PPO under a config class of its own, with a field of its own."""

import dataclasses

from batchppo.algorithms.ppo.config import METRICS, PPOConfig
from batchppo.algorithms.registry import Algorithm

BUILT = []


@dataclasses.dataclass(frozen=True)
class PatientConfig(PPOConfig):
    patience: int = 3


def trainer(config, **kwargs):
    from batchppo.algorithms.ppo.ppo import Trainer

    BUILT.append(config.patience)
    return Trainer(config, **kwargs)


ALGORITHM = Algorithm(
    name="patient",
    title="Patient PPO",
    config=PatientConfig,
    presets={
        "cartpole_patient": PatientConfig(
            env="CartPole-v1", backend="gymnax", normalize_ranges=False,
            network="feed_forward_categorical", num_agents=8, rollout_length=64,
            policy_layers=(8,), value_layers=(8,), steps=100_000,
        )
    },
    trainer=trainer,
    metrics=METRICS,
)
'''


@pytest.fixture
def fresh_algorithms():
    """The algorithm registry loads its entry points again, and forgets the user's after."""
    registry.ALGORITHMS.forget_entry_points()
    yield
    registry.ALGORITHMS.forget_entry_points()


@pytest.mark.timeout(300)
@pytest.mark.usefixtures("cold_training_programs")  # its run is two iterations
def test_a_users_algorithm_trains_from_the_cli_through_an_entry_point(
    install_package, fresh_algorithms, tmp_path
):
    import sys

    from batchppo import cli
    from batchppo.experiment.artifacts.loading import load_run

    points = {"batchppo.algorithms": {"patient": "patientppo:ALGORITHM"}}
    install_package("patientppo", points, {"patientppo": USER_ALGORITHM})
    assert "patient" not in registry.ALGORITHMS.registered()  # nothing imported the package
    assert "cartpole_patient" in configs.PRESETS  # listing the presets loads the entry points
    logdir = tmp_path / "logs"
    argv = ["train", "--config", "cartpole_patient", "--set", "patience=5", "--set", "steps=1024"]
    assert cli.main([*argv, "--logdir", str(logdir), "--progress", "none"]) == 0
    (run_dir,) = logdir.iterdir()
    stored = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (stored["algorithm"], stored["patience"]) == ("patient", 5)
    assert sys.modules["patientppo"].BUILT[0] == 5  # the package's trainer trained it
    config, trainer, _, step = load_run(run_dir)
    trainer.close()
    assert type(config).__name__ == "PatientConfig" and step == 1024
