"""The ``ray`` backend: Gymnasium envs in Ray actors
([`RayBatchEnv`][batchppo.envs.adapters.ray_env.RayBatchEnv], built by
[`batchppo.envs.make`][batchppo.envs.make.make] with this module's ``ray_batch_env``), stepped
on the host through a [`HostEnv`][batchppo.backends.HostEnv].

Its record is registered when this module is imported ([`batchppo.backends`][batchppo.backends]
imports it); Ray and Gymnasium are imported when an env is built. Its settings are a config's
``backend_options``, parsed once into ``RayOptions``: the ``RayBatchEnv``'s own
[`RayWorkerOptions`][batchppo.envs.RayWorkerOptions], which travel as that one object to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from batchppo.backends.host import RUN_STEP_TIMEOUT, BackendOptions, host_backend
from batchppo.core.backends import register
from batchppo.core.worker_options import RayWorkerOptions

if TYPE_CHECKING:
    import gymnasium
    from gymnasium.vector import AutoresetMode

    from batchppo.envs.stack.standard_stack import StandardStack

__all__ = ["RayOptions", "ray_batch_env"]


@dataclasses.dataclass(frozen=True)
class RayOptions(BackendOptions, RayWorkerOptions):
    """The ``backend_options`` of the ``ray`` backend: the
    [`RayWorkerOptions`][batchppo.envs.RayWorkerOptions] of its
    [`RayBatchEnv`][batchppo.envs.adapters.ray_env.RayBatchEnv] themselves (the actors:
    ``num_workers``, ``envs_per_worker``, ``step_timeout``; the cluster: ``address``, ``num_cpus``,
    ``startup_timeout``; ``--set backend_options.address=auto``), this object handed to the
    ``RayBatchEnv`` as it is. As ``ProcessOptions``, they differ from the batch env's in one
    default: a run's actors have a ``step_timeout`` (``RUN_STEP_TIMEOUT``). They may change when a
    run resumes."""

    step_timeout: float | None = RUN_STEP_TIMEOUT
    """Seconds an actor may take to answer one step, reset or call of its envs; past it the run
    stops as on an env error, with ``EnvTimeoutError``. None waits for ever."""


def ray_batch_env(
    env_fns: list[Callable[[], gymnasium.Env]],
    *,
    options: RayWorkerOptions | None = None,
    transform: StandardStack,
    autoreset_mode: AutoresetMode | str = "SameStep",
    actor_options: dict[str, Any] | None = None,
) -> gymnasium.vector.VectorEnv:
    """The ``ray`` backend's batch env (a ``batchppo.envs.make.BatchEnvFactory``): a
    [`RayBatchEnv`][batchppo.envs.adapters.ray_env.RayBatchEnv] whose actors build each env inside
    the per-env stack. ``batchppo.envs.make(env_id, n, backend=ray_batch_env)`` builds it.

    Args:
        env_fns: Each builds one raw env.
        options: The ``RayBatchEnv``'s
            [`RayWorkerOptions`][batchppo.envs.RayWorkerOptions], passed as they are (the ray
            backend's ``RayOptions`` are); None: their defaults.
        transform: The standard stack, applied around each env.
        autoreset_mode: ``SAME_STEP``, the only mode of ``RayBatchEnv``.
        actor_options: ``RayBatchEnv``'s ``ray.remote`` options, which ``envs.make`` does not
            pass: bind them (``functools.partial(ray_batch_env, actor_options={...})``).

    Raises:
        ValueError: Another autoreset mode.
        TypeError: ``options`` that are not ``RayWorkerOptions`` (``RayBatchEnv``'s message).
    """
    from gymnasium.vector import AutoresetMode

    from batchppo.envs.adapters.ray_env import RayBatchEnv
    from batchppo.envs.stack.standard_stack import stacked_env_fn

    mode = AutoresetMode(autoreset_mode) if isinstance(autoreset_mode, str) else autoreset_mode
    if mode is not AutoresetMode.SAME_STEP:
        raise ValueError(
            f"autoreset_mode={autoreset_mode!r}: the ray backend has SAME_STEP only; use "
            "backend='process' or 'sync' for another autoreset mode."
        )
    fns = [stacked_env_fn(fn, transform) for fn in env_fns]
    return RayBatchEnv(fns, options, actor_options=actor_options)


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
