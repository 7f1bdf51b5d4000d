"""The ``ray`` backend: Gymnasium envs in Ray actors
([`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv], built by
[`batchppo.envs.make`][batchppo.envs.make.make]), stepped on the host through a
[`HostEnv`][batchppo.backends.HostEnv].

Its record is registered when this module is imported ([`batchppo.backends`][batchppo.backends]
imports it); Ray itself is imported when an env is built. Its settings are a config's
``backend_options`` (``RayOptions``).
"""

from __future__ import annotations

import dataclasses

from batchppo.backends.host import host_backend, step_timeout_option
from batchppo.core.backends import lazy, register

__all__ = ["RayOptions"]


@dataclasses.dataclass(frozen=True)
class RayOptions:
    """The ``backend_options`` of the ``ray`` backend: keyword arguments of ``RayBatchEnv``
    (``--set 'backend_options={address: auto}'``). They may change when a run resumes."""

    address: str | None = None
    """The Ray cluster to join (``auto`` or ``host:port``); None: ``RAY_ADDRESS`` if set, else a
    new local Ray. A Ray already initialised in the process is used as it is."""
    num_cpus: float = 0.5
    """CPUs each env actor books on the cluster (fractions share a CPU; half of one lets the
    training and eval envs fit side by side)."""
    startup_timeout: float = 60.0
    """Seconds the env actors may take to start before ``RayResourcesError`` names what they
    need and what the cluster has."""

    def __post_init__(self) -> None:
        if self.address is not None and not self.address.strip():
            raise ValueError(
                "backend_options.address='': give host:port or auto, or None (RAY_ADDRESS, "
                "else a local Ray)"
            )
        if not self.num_cpus >= 0:
            raise ValueError(
                f"backend_options.num_cpus={self.num_cpus}: must be >= 0 (CPUs per Ray env actor)"
            )
        if not self.startup_timeout > 0:
            raise ValueError(
                f"backend_options.startup_timeout={self.startup_timeout}: must be > 0 (seconds)"
            )


register(
    host_backend(
        "ray",
        description="Ray env actors",
        title="Ray",
        batch_env=lazy("batchppo.envs.make:ray_batch_env"),
        options=RayOptions,
        run_options=step_timeout_option,
        load_with="sync",
    )
)
