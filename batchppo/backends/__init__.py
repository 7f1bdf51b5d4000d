"""The env backends, one module each, and [`make_env`][batchppo.backends.make_env], the trainer's
factory by backend name.

Each backend module registers its [`Backend`][batchppo.backends.Backend] record in the registry of
``batchppo.core.backends`` when imported, and this package imports them all, in the order messages
list the backends: ``host`` (``process`` and ``sync``), ``ray``, ``gymnax``, ``brax``,
``jumanji`` and ``ale``. Whoever reads the registry (configs, the trainer, the CLI) imports this
package, which also re-exports the registry's lookups. The layers below it (``batchppo.core``,
``batchppo.envs``) know no backend: the host backends build their envs with
[`batchppo.envs.make`][batchppo.envs.make.make], handing it their batch env factory. Backends of
other packages join through the ``batchppo.backends`` entry-point group, loaded on the
registry's first miss or full listing (a [`Registry`][batchppo.core.registry.Registry]). The
backend modules are light (no JAX, gymnax, Gymnasium, Brax, Jumanji or Ray until an env is
built); their envs live in modules of their own, imported on first use:

* [`GymnaxEnv`][batchppo.backends.GymnaxEnv], [`BraxEnv`][batchppo.backends.BraxEnv] and
  [`JumanjiEnv`][batchppo.backends.JumanjiEnv]: pure-JAX envs, fused with the learner.
* [`HostEnv`][batchppo.backends.HostEnv]: a Gymnasium vector env (``BatchEnv`` worker processes,
  envs in the calling process, Ray actors) called through ``io_callback``, and
  [`HostLoop`][batchppo.backends.HostLoop], the Python-loop rollout over it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from batchppo._exports import lazy_exports
from batchppo.core.backends import (
    BACKENDS,
    ENTRY_POINT_GROUP,
    Backend,
    FactoryRecipe,
    factory_backend,
    get_backend,
    names,
    register,
)
from batchppo.core.registry import lazy
from batchppo.core.wording import prose

# isort: off
# Importing a backend module registers it: the built-ins, in the order messages list them.
from batchppo.backends import host, ray, gymnax, brax, jumanji, ale  # noqa: F401

# isort: on
from batchppo.backends.brax import check_brax_id
from batchppo.backends.gymnax import check_gymnax_id
from batchppo.backends.host import builds_with_envs_make, check_gymnasium_id
from batchppo.backends.jumanji import check_jumanji_id

if TYPE_CHECKING:
    from batchppo.backends.brax_env import BraxEnv
    from batchppo.backends.gymnax_env import GymnaxEnv
    from batchppo.backends.host_env import HostEnv
    from batchppo.backends.host_loop import HostLoop
    from batchppo.backends.jumanji_env import JumanjiEnv
    from batchppo.core.env import Env

_LAZY = {
    "BraxEnv": "batchppo.backends.brax_env",
    "GymnaxEnv": "batchppo.backends.gymnax_env",
    "HostEnv": "batchppo.backends.host_env",
    "HostLoop": "batchppo.backends.host_loop",
    "JumanjiEnv": "batchppo.backends.jumanji_env",
}

__all__ = [
    "BACKENDS",
    "ENTRY_POINT_GROUP",
    "HOST_BACKENDS",
    "Backend",
    "BraxEnv",
    "FactoryRecipe",
    "GymnaxEnv",
    "HostEnv",
    "HostLoop",
    "JumanjiEnv",
    "check_brax_id",
    "check_gymnasium_id",
    "check_gymnax_id",
    "check_jumanji_id",
    "factory_backend",
    "get_backend",
    "lazy",
    "make_env",
    "names",
    "prose",
    "register",
]

HOST_BACKENDS: tuple[str, ...] = tuple(
    n for n, b in BACKENDS.registered().items() if builds_with_envs_make(b)
)
"""The built-in host backends whose Gymnasium envs [`batchppo.envs.make`][batchppo.envs.make.make]
builds (records of ``batchppo.backends.host.host_backend``), which a config's ``env_wrappers``
wrap. Read without loading the entry points (importing this package loads none)."""


def make_env(
    env_id: str,
    num_envs: int,
    backend: str,
    *,
    max_length: int | None = None,
    normalize_ranges: bool = True,
    env_kwargs: Mapping[str, Any] | None = None,
    options: Any = None,
    run_options: Mapping[str, Any] | None = None,
) -> Env:
    """Builds a batched Env by backend name: the one factory the trainer uses.

    The backend is looked up in the registry (``batchppo.core.backends``, filled by the backend
    modules of this package), whose record builds the env. The envs are seeded by the key given
    to their first ``reset``.

    Examples:
        >>> from batchppo.backends.host import SyncOptions
        >>> env = make_env("Pendulum-v1", 2, "sync", options=SyncOptions(max_restarts=1))
        >>> env.num_envs, env.spec.obs_shape, env.vector_env.worker_options.max_restarts
        (2, (3,), 1)
        >>> env.close()

    Args:
        env_id: Env id: a gymnax id (``gymnax``), a Brax env name (``brax``), a Jumanji id
            (``jumanji``) or a Gymnasium id (``process``, ``sync``, ``ray``); any fused backend
            takes a ``module:factory`` too (``batchppo.backends.factories``).
        num_envs: Batch size.
        backend: A registered backend: ``process``, ``sync``, ``ray``, ``gymnax``, ``brax``,
            ``jumanji``, ``ale``.
        max_length: Time limit in steps; None keeps the env's own (1000 for Brax).
        normalize_ranges: Rescale finite observation bounds and action bounds to [-1, 1]
            (Brax actions are in [-1, 1] already; its observations are unbounded).
        env_kwargs: Keyword arguments of the env's constructor: ``gymnasium.make`` keywords
            (host backends), ``brax.envs.get_environment`` keywords (``brax``), ``EnvParams``
            fields (``gymnax``) or ``jumanji.make`` keywords (``jumanji``).
        options: The backend's options: an instance of its ``options`` class (a config's
            parsed ``backend_options``, ``RunConfig.parsed_backend_options``), handed to the
            backend as it is; or a mapping of its keys, parsed here as a config's are
            ([`check_options`][batchppo.backends.Backend.check_options]); None: its defaults.
        run_options: The run-level settings of the record's ``run_options``, under their
            keywords (``wrappers`` for the host backends ``batchppo.envs.make`` builds):
            ``Backend.run_settings`` of a config.

    Returns:
        An [`Env`][batchppo.core.Env] (with a ``close()`` method).

    Raises:
        ValueError: An unknown backend, an option the backend does not take or of the wrong
            type (one line, as [`check_options`][batchppo.backends.Backend.check_options]), or
            a run option it does not take.
        TypeError: ``options`` of another backend's class.
    """
    record = get_backend(backend)
    run = dict(run_options or {})
    unknown = sorted(set(run) - set(record.run_options.values()))
    if unknown:
        raise ValueError(
            f"run_options {unknown}: backend {record.name!r} takes "
            f"{sorted(record.run_options.values()) or 'none'}"
        )
    return record.make(
        env_id,
        num_envs,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        env_kwargs=dict(env_kwargs or {}),
        options=record.resolve_options(options),
        **run,
    )


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
