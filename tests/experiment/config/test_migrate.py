"""Run dirs of earlier versions (``batchppo.experiment.config.migrate``): their former config fields
move to where they are now, and only a run dir's config needs it."""

from __future__ import annotations

from pathlib import Path

import yaml

from batchppo.backends import get_backend
from batchppo.backends.host import ProcessOptions
from batchppo.experiment.config import configs
from batchppo.experiment.config.migrate import FORMER_FIELDS, migrate_config

RUNS = Path(__file__).resolve().parents[3] / "docs" / "runs"


def test_each_former_field_is_an_option_of_the_backends_it_names():
    for field, owners in FORMER_FIELDS.items():
        for backend, option in owners.items():
            assert option in get_backend(backend).option_names(), (field, backend, option)


def test_former_fields_move_into_backend_options_unless_at_their_default():
    data = {"backend": "ray", "ray_address": "auto", "ray_num_cpus": 0.5, "num_workers": 2}
    assert migrate_config(data) == {
        "backend": "ray",
        "backend_options": {"address": "auto", "num_workers": 2},
    }
    # Another backend's fields meant nothing to it; options given win; the data is not changed.
    data = {"backend": "sync", "ray_address": "auto", "max_env_restarts": 3}
    data["backend_options"] = {"max_restarts": 5}
    assert migrate_config(data) == {"backend": "sync", "backend_options": {"max_restarts": 5}}
    assert "ray_address" in data
    # A config without former fields, or not a config, is returned as it is.
    current = {"backend": "process", "backend_options": {"num_workers": 1}}
    assert migrate_config(current) is current and migrate_config([1]) == [1]


def test_the_committed_runs_that_give_former_fields_load_with_them_as_options():
    # The reason the module exists: committed run dirs record the former fields.
    former = []
    for path in sorted(RUNS.glob("*/config.yaml")):
        data = yaml.safe_load(path.read_text())
        if FORMER_FIELDS.keys() & data.keys():
            former.append(path)
            config = configs.load_config(path)
            options = config.parsed_backend_options
            if config.backend == "process":
                assert isinstance(options, ProcessOptions)
                timeout = data.get("env_step_timeout", 60.0)
                assert options.step_timeout == timeout, path
    assert former, (
        "no committed run gives a former field: batchppo.experiment.config.migrate can go"
    )


def test_a_pure_jax_backends_options_move_out_of_env_kwargs():
    recorded = {
        "backend": "gymnax",
        "env_kwargs": {"autoreset": "first", "reset_ratio": 16, "size": 9},
        "backend_options": {"reset_ratio": 4},
    }
    assert migrate_config(recorded) == {
        "backend": "gymnax",
        "env_kwargs": {"size": 9},
        "backend_options": {"autoreset": "first", "reset_ratio": 4},
    }
    # A keyword that is no option of the backend stays the env's.
    assert migrate_config({"backend": "process", "env_kwargs": {"autoreset": 1}}) == {
        "backend": "process",
        "env_kwargs": {"autoreset": 1},
    }
