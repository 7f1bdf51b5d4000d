"""The ``ray`` backend: Gymnasium envs in Ray actors
([`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv], built by
[`batchppo.envs.make`][batchppo.envs.make.make]), stepped on the host through a
[`HostEnv`][batchppo.backends.HostEnv].

Its record is registered when this module is imported ([`batchppo.backends`][batchppo.backends]
imports it); Ray itself is imported when an env is built.
"""

from __future__ import annotations

from typing import Any

from batchppo.backends.host import host_backend
from batchppo.core.backends import register

__all__: list[str] = []


def _ray_options(config: Any) -> dict[str, Any]:
    """The config's settings of the ray backend: keyword arguments of ``RayBatchEnv``."""
    return {
        "address": config.ray_address,
        "num_cpus": config.ray_num_cpus,
        "startup_timeout": config.ray_startup_timeout,
        "step_timeout": config.env_step_timeout,
    }


register(
    host_backend(
        "ray",
        description="Ray env actors",
        title="Ray",
        config_options=_ray_options,
        config_fields=("ray_address",),
        load_with="sync",
    )
)
