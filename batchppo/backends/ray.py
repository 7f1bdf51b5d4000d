"""The ``ray`` backend: Gymnasium envs in Ray actors
([`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv], built by
[`batchppo.envs.make`][batchppo.envs.make.make] with this module's ``ray_batch_env``), stepped
on the host through a [`HostEnv`][batchppo.backends.HostEnv].

Its record is registered when this module is imported ([`batchppo.backends`][batchppo.backends]
imports it); Ray and Gymnasium are imported when an env is built. Its settings are a config's
``backend_options`` (``RayOptions``).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from batchppo.backends.host import WorkerSettings, host_backend
from batchppo.core.backends import register

if TYPE_CHECKING:
    import gymnasium
    from gymnasium.vector import AutoresetMode

    from batchppo.envs.standard_stack import StandardStack

__all__ = ["RayOptions", "ray_batch_env"]


@dataclasses.dataclass(frozen=True)
class RayOptions(WorkerSettings):
    """The ``backend_options`` of the ``ray`` backend: the actors (``num_workers``,
    ``step_timeout``, as ``WorkerSettings``) and the keyword arguments of ``RayBatchEnv``
    (``--set backend_options.address=auto``). They may change when a run resumes."""

    FORMER_FIELDS: ClassVar[Mapping[str, str]] = types.MappingProxyType(
        {
            **WorkerSettings.FORMER_FIELDS,
            "ray_address": "address",
            "ray_num_cpus": "num_cpus",
            "ray_startup_timeout": "startup_timeout",
        }
    )
    """The config fields that became these options (stored configs move them here)."""

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
        super().__post_init__()
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


def ray_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    num_workers: int | None = None,
    max_restarts: int = 0,
    transform: StandardStack,
    autoreset_mode: AutoresetMode | str = "SameStep",
    step_timeout: float | None = None,
    **options: Any,
) -> gymnasium.vector.VectorEnv:
    """The ``ray`` backend's batch env (a ``batchppo.envs.make.BatchEnvFactory``): a
    [`RayBatchEnv`][batchppo.envs.ray_env.RayBatchEnv] whose actors build each env inside the
    per-env stack. ``batchppo.envs.make(env_id, n, backend=ray_batch_env)`` builds it.

    Args:
        env_fns: Each builds one raw env.
        num_workers: Actors; None: the CPUs of the Ray cluster.
        max_restarts: Must be 0: Ray env actors are not restarted.
        transform: The standard stack, applied around each env.
        autoreset_mode: ``SAME_STEP``, the only mode of ``RayBatchEnv``.
        step_timeout: Seconds an actor may take to answer (``RayBatchEnv``).
        **options: ``RayBatchEnv``'s own keyword arguments (``address``, ``num_cpus``,
            ``startup_timeout``, ``actor_options``).

    Raises:
        ValueError: Another autoreset mode, or env restarts asked for.
    """
    from gymnasium.vector import AutoresetMode

    from batchppo.envs.ray_env import RayBatchEnv
    from batchppo.envs.standard_stack import stacked_env_fn

    mode = AutoresetMode(autoreset_mode) if isinstance(autoreset_mode, str) else autoreset_mode
    if mode is not AutoresetMode.SAME_STEP:
        raise ValueError(
            f"autoreset_mode={autoreset_mode!r}: the ray backend has SAME_STEP only; use "
            "backend='process' or 'sync' for another autoreset mode."
        )
    if max_restarts:
        raise ValueError(
            f"max_restarts={max_restarts}: Ray env actors are not restarted; use "
            "backend='process' or 'sync' for env restarts."
        )
    fns = [stacked_env_fn(fn, transform) for fn in env_fns]
    return RayBatchEnv(fns, num_workers=num_workers, step_timeout=step_timeout, **options)


register(
    host_backend(
        "ray",
        description="Ray env actors",
        title="Ray",
        batch_env=ray_batch_env,
        requires="ray",
        options=RayOptions,
    )
)
