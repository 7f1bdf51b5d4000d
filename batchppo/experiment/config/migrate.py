"""Run dirs of earlier versions: their recorded config as the current config reads it.

A run dir keeps the config it trained with (``config.yaml``, and the effective config its
results record). The fields such a config had then and has no more move here, in one table,
to where they are now, so that the run resumes, evaluates and compares
(``configs.load_config``, ``provenance.loaded``). Every other reader of a config (a config
file, ``--set``, a config class in Python) takes the current fields only: a former one is an
unknown key there, named as such.

What moved: the host backends' settings were config fields (``num_workers``,
``env_step_timeout``, ``max_env_restarts``, ``ray_address``, ``ray_num_cpus``,
``ray_startup_timeout``) before they were ``backend_options``; the committed runs of
``docs/runs`` record them. The pure-JAX backends' options (gymnax's ``autoreset`` and
``reset_ratio``) were given in ``env_kwargs`` before; the Craftax results of ``docs/results``
record them there.

Examples:
    >>> migrate_config({"backend": "process", "env_step_timeout": 3600.0, "ray_num_cpus": 0.5})
    {'backend': 'process', 'backend_options': {'step_timeout': 3600.0}}
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any

from batchppo.algorithms.run_config import RunConfig
from batchppo.backends import BACKENDS, Backend

__all__ = ["FORMER_FIELDS", "migrate_config"]

FORMER_FIELDS: Mapping[str, Mapping[str, str]] = types.MappingProxyType(
    {
        "num_workers": {"process": "num_workers", "ray": "num_workers"},
        "env_step_timeout": {"process": "step_timeout", "ray": "step_timeout"},
        "max_env_restarts": {"process": "max_restarts", "sync": "max_restarts"},
        "ray_address": {"ray": "address"},
        "ray_num_cpus": {"ray": "num_cpus"},
        "ray_startup_timeout": {"ray": "startup_timeout"},
    }
)
"""The config fields that became backend options: field -> {backend: its option}. A field
means nothing to a backend it does not name (``ray_address`` to ``process``)."""


def migrate_config(data: Any) -> Any:
    """A recorded config's data as the current config reads it: its former fields
    (``FORMER_FIELDS``) moved into ``backend_options`` where they differ from the option's
    default, those of other backends dropped. Options the data gives in ``backend_options``
    win.

    Args:
        data: A ``config.yaml``'s content (or a recorded effective config); anything but a
            mapping, one without former fields, or a config of an unknown backend, is returned
            as it is (``config_from_dict`` names what is wrong with it).
    """
    if not isinstance(data, dict):
        return data
    record = BACKENDS.get(str(data.get("backend", RunConfig.backend)))
    if record is None:
        return data
    env_kwargs = data.get("env_kwargs") or {}
    moved = _option_names(record) & env_kwargs.keys() if isinstance(env_kwargs, dict) else set()
    if not FORMER_FIELDS.keys() & data.keys() and not moved:
        return data
    data = dict(data)
    options: dict[str, Any] = {key: env_kwargs[key] for key in sorted(moved)}
    if moved:
        data["env_kwargs"] = {k: v for k, v in env_kwargs.items() if k not in moved}
    for field, owners in FORMER_FIELDS.items():
        if field not in data:
            continue
        value = data.pop(field)
        option = owners.get(record.name)
        if option is not None and value != _option_default(record, option):
            options[option] = value
    if options:
        data["backend_options"] = {**options, **(data.get("backend_options") or {})}
    return data


def _option_names(record: Backend) -> set[str]:
    """The option names of a backend's record (none for a backend without options)."""
    options = record.options
    return {f.name for f in dataclasses.fields(options)} if options is not None else set()


def _option_default(record: Backend, option: str) -> Any:
    """The default of the option ``option`` of a backend's record."""
    (field,) = (f for f in dataclasses.fields(record.options) if f.name == option)
    return field.default
