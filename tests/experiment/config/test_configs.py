"""Presets, typed overrides and the YAML round trip of a config."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import yaml

from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.experiment.artifacts.rundir import prepare_run_dir
from batchppo.experiment.config import configs, resume
from batchppo.experiment.errors import ConfigError

ORIGINAL_TABLE = {
    # name: (env, max_length, steps, overrides) from the original's config table.
    "pendulum": ("Pendulum-v1", 200, 1_000_000, {"chunk_length": 50}),
    "cartpole": (
        "CartPole-v1",
        500,
        200_000,
        {"network": "feed_forward_categorical", "normalize_ranges": False},
    ),
    "reacher": ("Reacher-v5", 1000, 5_000_000, {"discount": 0.985, "update_every": 60}),
    "cheetah": ("HalfCheetah-v5", 1000, 10_000_000, {"discount": 0.99}),
    "walker": ("Walker2d-v5", 1000, 10_000_000, {}),
    "hopper": ("Hopper-v5", 1000, 10_000_000, {"update_every": 60}),
    "ant": ("Ant-v5", 1000, 20_000_000, {}),
    "humanoid": ("Humanoid-v5", 1000, 50_000_000, {"update_every": 60}),
}


@pytest.mark.parametrize("name", list(ORIGINAL_TABLE))
def test_original_presets_keep_the_original_values(name):
    env, max_length, steps, overrides = ORIGINAL_TABLE[name]
    config = configs.get_preset(name)
    assert (config.env, config.max_length, config.steps) == (env, max_length, steps)
    assert config.backend == "process"
    for key, value in overrides.items():
        assert getattr(config, key) == value
    # The original's defaults where the table does not override them.
    assert config.num_agents == 30
    assert config.update_epochs == 25
    assert config.learning_rate == 1e-4
    assert config.kl_target == 0.01
    assert config.objective == "kl_penalty"
    assert config.policy_layers == (200, 100)
    if "discount" not in overrides:
        assert config.discount == 0.995
    if "update_every" not in overrides:
        assert config.update_every == 30


def test_jax_presets_and_default():
    assert configs.DEFAULT_PRESET == "pendulum_jax"
    assert configs.get_preset("pendulum_jax").backend == "gymnax"
    assert configs.get_preset("cartpole_jax").network == "feed_forward_categorical"
    assert {n for n, c in configs.PRESETS.items() if c.backend == "brax"} >= {"ant_brax"}
    for name, config in configs.PRESETS.items():
        assert config.eval_interval <= config.steps, name
        assert config.checkpoint_interval <= config.steps, name


@pytest.mark.parametrize("name", ["cheetah", "pendulum_fast", "cartpole_jax"])
def test_cadence_follows_a_changed_budget_unless_set(name):
    # Presets leave the cadence to the budget: 20 evals, 100 reports, 10 checkpoints a run.
    def cadence(config):
        return config.eval_interval, config.log_interval, config.checkpoint_interval

    config = configs.apply_overrides(configs.get_preset(name), ["steps=1000000"])
    assert cadence(config) == (50_000, 10_000, 100_000)
    config = configs.apply_overrides(config, ["steps=4e6", "eval_every=7", "log_every=0"])
    assert cadence(config) == (7, 0, 400_000)
    assert configs.apply_overrides(config, ["steps=5"]).checkpoint_interval == 1


def test_negative_cadence_is_refused():
    with pytest.raises(ConfigError, match=r"eval_every=-1: must be >= 0 \(0 disables\), or None"):
        configs.apply_overrides(configs.get_preset("cheetah_fast"), ["eval_every=-1"])


def test_locomotion_presets_share_one_recipe():
    names = ["cheetah_fast", "hopper_fast", "walker_fast", "ant_fast", "humanoid_fast"]
    envs = ["HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5"]
    for name, env in zip(names, envs, strict=True):
        config = configs.get_preset(name)
        assert (config.env, config.backend, config.steps) == (env, "process", 1_000_000)
        assert config.objective == "clip" and config.anneal_lr and config.lr_kl_cap == 0.03
        want_kwargs = {"include_cfrc_ext_in_observation": False} if env == "Ant-v5" else {}
        assert config.env_kwargs == want_kwargs
        # Tianshou's evaluations, whatever the budget: 10 sampled-action episodes every 30k.
        changed = configs.apply_overrides(config, ["steps=4e6"])
        assert (changed.eval_interval, config.eval_episodes, config.eval_actions) == (
            30_000,
            10,
            "sampled",
        )


def test_craftax_preset_has_the_craftax_baselines_settings():
    """``craftax_symbolic`` is the Craftax baselines' ppo.py at its defaults (bench/
    craftax_side_by_side.py runs the two side by side), with their optimistic resets."""
    config = configs.get_preset("craftax_symbolic")
    assert (config.env, config.backend) == (
        "craftax.craftax_env:make_craftax_env_from_name",
        "gymnax",
    )
    assert config.env_kwargs == {"name": "Craftax-Classic-Symbolic-v1", "auto_reset": False}
    assert config.backend_options == {"autoreset": "optimistic", "reset_ratio": 16}
    settings = (
        config.num_agents, config.rollout_length, config.update_epochs, config.num_minibatches,
        config.learning_rate, config.anneal_lr, config.discount, config.gae_lambda,
        config.clip_epsilon, config.value_clip, config.entropy_coef, config.value_coef,
        config.max_grad_norm, config.activation, config.policy_layers, config.value_layers,
    )  # fmt: skip
    assert settings == (
        1024, 64, 4, 8, 2e-4, True, 0.99, 0.8, 0.2, 0.2, 0.01, 0.5, 1.0, "tanh",
        (512, 512, 512), (512, 512, 512),
    )  # fmt: skip
    assert not (config.normalize_observations or config.normalize_rewards)


def test_unknown_preset_lists_valid_names_and_suggests():
    with pytest.raises(ConfigError) as info:
        configs.get_preset("pendulm")
    message = str(info.value)
    assert "'pendulm'" in message and "Did you mean 'pendulum'" in message
    for name in configs.PRESETS:
        assert name in message


def test_brax_preset_without_brax_is_a_clear_error(monkeypatch):
    # brax is in the test extra: pretend it is missing, as where the extra is not installed.
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "brax" else real(name, *a)
    )
    assert not configs.brax_available()
    with pytest.raises(ConfigError, match=r"needs Brax.*`pip install 'batchppo\[brax\]'`"):
        configs.get_preset("ant_brax")


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("steps=2000", "steps", 2000),
        ("steps=1e6", "steps", 1_000_000),
        ("steps=2.0e3", "steps", 2000),
        ("learning_rate=3e-4", "learning_rate", 3e-4),
        ("learning_rate=1", "learning_rate", 1.0),
        ("anneal_lr=true", "anneal_lr", True),
        ("normalize_ranges=False", "normalize_ranges", False),
        ("max_grad_norm=null", "max_grad_norm", None),
        ("max_grad_norm=None", "max_grad_norm", None),
        ("max_grad_norm=0.5", "max_grad_norm", 0.5),
        ("max_length=none", "max_length", None),
        ("rollout_length=64", "rollout_length", 64),
        ("policy_layers=[64, 32]", "policy_layers", (64, 32)),
        ("value_layers=[]", "value_layers", ()),
        ("env=CartPole-v1", "env", "CartPole-v1"),
        ("objective = clip", "objective", "clip"),
        ("env_kwargs={}", "env_kwargs", {}),
        (
            "env_kwargs={include_cfrc_ext_in_observation: false, frame_skip: 5}",
            "env_kwargs",
            {"include_cfrc_ext_in_observation": False, "frame_skip": 5},
        ),
        (
            "env_kwargs={sizes: [1, 2.5], name: null}",
            "env_kwargs",
            {"sizes": [1, 2.5], "name": None},
        ),
    ],
)
def test_parse_override_converts_to_the_field_type(text, key, value):
    parsed_key, parsed = configs.parse_override(text)
    assert parsed_key == key
    assert parsed == value
    assert type(parsed) is type(value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("steps=abc", "'steps' expects int, got 'abc'"),
        ("steps=1.5", "'steps' expects int, got 1.5"),
        ("steps=true", "'steps' expects int, got True"),
        ("steps=null", "'steps' expects int, got None"),
        ("anneal_lr=1", "'anneal_lr' expects bool, got 1"),
        ("learning_rate=fast", "'learning_rate' expects float, got 'fast'"),
        ("max_grad_norm=[1]", "'max_grad_norm' expects float or None, got [1]"),
        ("policy_layers=64", "'policy_layers' expects list of int, got 64"),
        ("policy_layers=[64, 1.5]", "'policy_layers' expects list of int, got [64, 1.5]"),
        ("env=3", "'env' expects str, got 3"),
        ("env_kwargs=[1]", "'env_kwargs' expects mapping of names to values, got [1]"),
        ("env_kwargs={1: 2}", "'env_kwargs' expects mapping of names to values, got {1: 2}"),
        ("env_kwargs={a: {b: 1}}", "'env_kwargs' expects mapping of names to values"),
    ],
)
def test_parse_override_rejects_wrong_types(text, expected):
    with pytest.raises(ConfigError) as info:
        configs.parse_override(text)
    assert expected in str(info.value)


def test_unknown_override_key_lists_allowed_keys_and_suggests():
    with pytest.raises(ConfigError) as info:
        configs.parse_override("learning_rat=0.1")
    message = str(info.value)
    assert "unknown config key 'learning_rat'" in message
    assert "Did you mean 'learning_rate'" in message
    for field in dataclasses.fields(PPOConfig):
        assert field.name in message


def test_override_without_equals_sign():
    with pytest.raises(ConfigError, match="not of the form KEY=VALUE"):
        configs.parse_override("steps")


def test_apply_overrides_later_wins_and_config_validation_is_a_config_error():
    config = configs.apply_overrides(configs.get_preset("cartpole"), ["steps=10", "steps=20"])
    assert config.steps == 20
    with pytest.raises(ConfigError, match=r"discount=2\.0: must be in"):
        configs.apply_overrides(config, ["discount=2"])


def test_yaml_round_trip_is_plain_data():
    config = configs.apply_overrides(
        configs.get_preset("pendulum_jax"), ["policy_layers=[8, 4]", "max_grad_norm=null"]
    )
    text = configs.config_to_yaml(config)
    data = yaml.safe_load(text)
    assert data["policy_layers"] == [8, 4]
    assert data["max_grad_norm"] is None
    assert list(data) == ["algorithm", *(f.name for f in dataclasses.fields(PPOConfig))]
    assert data["algorithm"] == "ppo"
    assert "!!python" not in text
    assert configs.config_from_yaml(text) == config


def test_env_kwargs_round_trip_and_configs_stored_without_them_load(tmp_path):
    config = configs.apply_overrides(
        configs.get_preset("ant_fast"), ["env_kwargs={include_cfrc_ext_in_observation: true}"]
    )
    path = tmp_path / "config.yaml"
    configs.save_config(config, path)
    assert configs.load_config(path) == config
    data = configs.config_to_dict(config)
    del data["env_kwargs"]
    path.write_text(yaml.safe_dump(data))
    assert configs.load_config(path).env_kwargs == {}
    with pytest.raises(ConfigError, match="cannot change a resumed run's meaning: env_kwargs"):
        resume.check_resume_overrides(config, {"env_kwargs": {}})


def test_a_run_stored_before_minibatch_shuffle_resumes_with_the_sort_it_used(tmp_path):
    """A stored config.yaml without a field of ``FIELDS_ADDED`` loads with the value that
    repeats the code before the field (PPO's permutations were sorts); one that names the
    field keeps it, and a field added with a default that repeats the old code stays at it."""
    assert PPOConfig.FIELDS_ADDED == {"minibatch_shuffle": "sort"}
    config = configs.get_preset("pendulum_fast")
    assert config.minibatch_shuffle == "index"
    data = configs.config_to_dict(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    assert configs.load_config(path) == config
    del data["minibatch_shuffle"], data["env_kwargs"]
    path.write_text(yaml.safe_dump(data))
    assert configs.load_config(path) == dataclasses.replace(config, minibatch_shuffle="sort")
    run_dir = tmp_path / "T-pendulum_fast"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(data))
    resumed, _, was_resumed = prepare_run_dir(tmp_path, "pendulum_fast", config, "T", {})
    assert was_resumed and resumed.minibatch_shuffle == "sort"
    assert configs.load_config(run_dir / "config.yaml").minibatch_shuffle == "sort"
    a2c = configs.config_to_dict(configs.get_preset("cartpole_a2c"))
    path.write_text(yaml.safe_dump(a2c))
    assert configs.load_config(path) == configs.get_preset("cartpole_a2c")  # A2C adds none


FORMER_FIELDS = {
    "num_workers": None,
    "max_env_restarts": 0,
    "env_step_timeout": 60.0,
    "ray_address": None,
    "ray_num_cpus": 0.5,
    "ray_startup_timeout": 60.0,
}
"""The backend settings a ``config.yaml`` held as fields before ``backend_options``, at their
defaults."""


def _former(config: PPOConfig, **fields: object) -> dict:
    """``config`` as a ``config.yaml`` written before ``backend_options``: the former fields."""
    data = {k: v for k, v in configs.config_to_dict(config).items() if k != "backend_options"}
    return {**data, **FORMER_FIELDS, **fields}


def test_a_stored_config_with_the_former_fields_loads_them_as_backend_options(tmp_path):
    path = tmp_path / "config.yaml"
    process = configs.get_preset("pendulum_fast")
    path.write_text(yaml.safe_dump(_former(process, ray_num_cpus=2.0)))
    assert configs.load_config(path) == process  # another backend's fields meant nothing
    path.write_text(yaml.safe_dump(_former(process, num_workers=2, max_env_restarts=3)))
    assert configs.load_config(path) == dataclasses.replace(
        process, backend_options={"num_workers": 2, "max_restarts": 3}
    )
    sync = dataclasses.replace(process, backend="sync")
    path.write_text(yaml.safe_dump(_former(sync, num_workers=2, env_step_timeout=5.0)))
    assert configs.load_config(path) == sync  # the sync backend read neither
    ray = dataclasses.replace(process, backend="ray")
    path.write_text(yaml.safe_dump(_former(ray)))
    assert configs.load_config(path) == ray  # the defaults: no options given
    former = _former(ray, ray_address="auto", ray_startup_timeout=5.0, env_step_timeout=None)
    path.write_text(yaml.safe_dump(former))
    loaded = configs.load_config(path)
    assert loaded == dataclasses.replace(
        ray, backend_options={"step_timeout": None, "address": "auto", "startup_timeout": 5.0}
    )
    assert loaded.parsed_backend_options.num_cpus == 0.5


def test_a_run_dir_with_the_former_fields_resumes(tmp_path):
    process = configs.get_preset("pendulum_fast")
    run_dir = tmp_path / "T-pendulum_fast"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(_former(process, num_workers=2)))
    stored = dataclasses.replace(process, backend_options={"num_workers": 2})
    changes = {"log_every": 7, "backend_options.max_restarts": 4}
    resumed, _, was_resumed = prepare_run_dir(tmp_path, "pendulum_fast", process, "T", changes)
    assert was_resumed
    assert resumed == dataclasses.replace(
        stored, log_every=7, backend_options={"num_workers": 2, "max_restarts": 4}
    )
    assert configs.load_config(run_dir / "config.yaml") == resumed  # rewritten as it is now


def test_a_former_field_is_an_unknown_key_outside_a_run_dir(tmp_path):
    # Only a run dir's recorded config is migrated (batchppo.experiment.config.migrate): a new
    # config gives the current keys, and a former one is unknown like any other.
    with pytest.raises(ConfigError, match=r"^unknown config key 'ray_address'"):
        configs.parse_override("ray_address=auto")
    path = tmp_path / "part.yaml"
    path.write_text("base: pendulum_fast\nbackend: ray\nray_num_cpus: 1\n")
    with pytest.raises(ConfigError, match=r"unknown config keys? \['ray_num_cpus'\]"):
        configs.config_from_file(path)
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_workers'"):
        PPOConfig(num_workers=4)  # type: ignore[call-arg]
    config = configs.apply_overrides(
        configs.get_preset("pendulum_fast"),
        ["backend=ray", "backend_options.address=auto", "backend_options.step_timeout=none"],
    )
    assert config.backend_options == {"address": "auto", "step_timeout": None}


def test_set_of_one_entry_of_a_mapping_field():
    base = configs.get_preset("pendulum_fast")
    config = configs.apply_overrides(
        base,
        ["backend_options={num_workers: 1}", "backend_options.max_restarts=2", "env_kwargs.g=9"],
    )
    assert config.backend_options == {"num_workers": 1, "max_restarts": 2}
    assert config.env_kwargs == {"g": 9}
    with pytest.raises(ConfigError) as info:
        configs.parse_override("steps.x=1")
    assert str(info.value) == (
        "override 'steps.x=1': FIELD.NAME sets one entry of a mapping field (env_kwargs, "
        "eval_env_kwargs, backend_options)"
    )
    with pytest.raises(ConfigError, match=r"^unknown config key 'backend_option'\. Did you mean"):
        configs.parse_override("backend_option.num_workers=1")
    with pytest.raises(ConfigError, match="backend 'process' has no option 'num_worker'"):
        configs.apply_overrides(base, ["backend_options.num_worker=1"])


def test_stored_config_with_unknown_or_mistyped_keys_is_an_error(tmp_path):
    data = configs.config_to_dict(PPOConfig())
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**data, "gae": 0.9}))
    with pytest.raises(ConfigError, match=r"unknown config keys \['gae'\]"):
        configs.load_config(path)
    path.write_text(yaml.safe_dump({**data, "steps": "many"}))
    with pytest.raises(ConfigError, match="'steps' expects int, got 'many'"):
        configs.load_config(path)
    path.write_text("steps: [1\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        configs.load_config(path)
    path.write_text("- 1\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        configs.load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        configs.load_config(tmp_path / "missing.yaml")


def test_python_objects_in_yaml_are_refused(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("!!python/object/apply:os.system ['echo hacked']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        configs.load_config(path)


# --- Config files -----------------------------------------------------------------------------


def test_config_file_or_preset():
    assert configs.is_config_file("my.yaml") and configs.is_config_file("runs/x/config.yaml")
    assert configs.is_config_file("my.yml") and not configs.is_config_file("pendulum_fast")


def test_a_config_records_an_env_id_not_a_callable():
    with pytest.raises(ValueError) as info:
        PPOConfig(env=len)  # a builtin no library patches (Ray's tqdm replaces print)
    assert str(info.value) == (
        "env=<built-in function len>: a config records an env id (a string); pass an env "
        "factory as batchppo.train(config, env=factory), or its id 'module:name'"
    )
