"""The host backends ``process`` and ``sync``: Gymnasium envs stepped on the host.

Both build their batch env with [`batchppo.envs.make`][batchppo.envs.make.make], each passing its
batch env factory (``process_batch_env``: a ``BatchEnv`` with worker processes, or
``in_process_batch_env``: envs stepped in the calling process), and hand it to the learner as a
[`HostEnv`][batchppo.backends.HostEnv]. Their records are registered when this module is imported
([`batchppo.backends`][batchppo.backends] imports it); ``host_backend`` fills what every host
backend built by ``envs.make`` shares, for ``batchppo.backends.ray`` too. The module is
light: Gymnasium, JAX and the batch envs are imported when an env is built or an id checked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from batchppo.core.backends import Backend, lazy, register

if TYPE_CHECKING:
    from batchppo.backends.host_env import HostEnv

__all__ = [
    "builds_with_envs_make",
    "check_gymnasium_id",
    "host_backend",
    "make_host_env",
    "step_timeout_option",
]


def check_gymnasium_id(env_id: str) -> None:
    """Raises a one-line ValueError when ``env_id`` names no Gymnasium env.

    The rule has one home, ``batchppo.envs.make.check_env_id`` (imported on the call): a registered
    id, ``"module:EnvId"`` or ``"module:factory"``, whose module is imported here.
    """
    from batchppo.envs.make import check_env_id

    check_env_id(env_id)


def step_timeout_option(config: Any) -> dict[str, Any]:
    """The ``run_options`` of the backends whose workers answer within a timeout (``process``,
    ``ray``): the config's ``env_step_timeout`` as ``step_timeout``."""
    return {"step_timeout": config.env_step_timeout}


def make_host_env(
    env_id: str,
    num_envs: int,
    *,
    backend: str | Callable[..., Any],
    max_length: int | None,
    normalize_ranges: bool,
    seed: int,
    num_workers: int | None,
    env_kwargs: Mapping[str, Any],
    max_restarts: int,
    options: Mapping[str, Any],
) -> HostEnv:
    """The host backends' builder (``batchppo.core.backends.MakeEnv``):
    ``batchppo.envs.make(backend=backend)`` in a HostEnv.

    Args:
        env_id: Gymnasium id.
        num_envs: Batch size.
        backend: The ``backend`` of [`batchppo.envs.make`][batchppo.envs.make.make]: the
            batch env factory to build with (``host_backend``'s ``batch_env``), or the name of
            one of ``envs.make``'s (``process``, ``sync``).
        max_length: Time limit in steps; None keeps the registry's.
        normalize_ranges: Rescale finite bounds to [-1, 1].
        seed: Unused: the envs are left unreset, and the learner's first
            ``HostEnv.reset(key)`` seeds them (the one reset before the first step; the
            run's start-up probe has checked that the env resets).
        num_workers: Worker processes (or actors).
        env_kwargs: ``gymnasium.make`` keywords.
        max_restarts: ``BatchEnv``'s restart budget.
        options: The backend's settings (``Backend.make_options``): ``step_timeout``,
            ``wrappers`` (the config's ``env_wrappers``) and, for ``ray``, its
            ``backend_options``, the ``ray_options`` of ``make``.

    Returns:
        The [`HostEnv`][batchppo.backends.HostEnv] (it closes the batch env on ``close()``).
    """
    from batchppo.backends.host_env import wrap_host_env
    from batchppo.envs import make as make_host_envs

    options = dict(options)
    step_timeout = options.pop("step_timeout", None)
    wrappers = options.pop("wrappers", ())
    del seed  # HostEnv.reset(key) seeds the envs
    vector_env = make_host_envs(
        env_id,
        num_envs,
        backend=backend,
        num_workers=num_workers,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        ray_options=options or None,
        max_restarts=max_restarts,
        step_timeout=step_timeout,
        wrappers=wrappers,
        **env_kwargs,
    )
    # make()'s stack (ConvertTo32Bit, per env or applied to the batch in the workers) already
    # rejects every non-finite observation and reward, naming the env: no second check here.
    return wrap_host_env(
        vector_env, check_finite=False, take_games=_game_scores(vector_env, env_kwargs)
    )


def _game_scores(vector_env: Any, env_kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
    """``HostEnv``'s ``take_games`` for a batch env of Atari envs (the preprocessing's
    ``GameScoreLog`` in each, called where the envs live), or None for other envs."""
    import numpy as np

    from batchppo.envs.atari import AtariStack
    from batchppo.envs.make import preprocessing

    if not isinstance(preprocessing(env_kwargs.get("preprocess")), AtariStack):
        return None

    def take() -> Any:
        return np.concatenate([np.asarray(s, np.float64) for s in vector_env.call("take_games")])

    return take


# The start-up probe of a run: one env built, and its spaces checked as HostEnv takes them.
_PROBE_GYMNASIUM = lazy("batchppo.backends.host_env:probe_gymnasium")


def _with_wrappers(run_options: Callable[[Any], Mapping[str, Any]] | None) -> Any:
    """A host backend's ``run_options``: its own, and the config's ``env_wrappers`` as
    ``wrappers`` (which every env ``batchppo.envs.make`` builds is wrapped in)."""

    def options(config: Any) -> dict[str, Any]:
        own = dict(run_options(config)) if run_options is not None else {}
        return {**own, "wrappers": tuple(getattr(config, "env_wrappers", ()) or ())}

    return options


def host_backend(
    name: str, *, description: str, batch_env: Callable[..., Any], **fields: Any
) -> Backend:
    """The record of a host backend whose envs [`batchppo.envs.make`][batchppo.envs.make.make]
    builds with its ``batch_env``, stepped through a [`HostEnv`][batchppo.backends.HostEnv].

    Args:
        name: The backend's name.
        description: What steps the envs, for messages.
        batch_env: The batch env factory ``envs.make`` builds with
            (``batchppo.envs.make.BatchEnvFactory``; a ``lazy`` reference keeps the record
            light).
        **fields: The record's other fields ([`Backend`][batchppo.backends.Backend]).

    Returns:
        The record (not yet registered).
    """
    fields["run_options"] = _with_wrappers(fields.get("run_options"))
    return Backend(
        name=name,
        make=functools.partial(make_host_env, backend=batch_env),
        check_env_id=check_gymnasium_id,
        host=True,
        description=description,
        probe=_PROBE_GYMNASIUM,
        **fields,
    )


def builds_with_envs_make(backend: Backend) -> bool:
    """Whether ``backend`` is a record of ``host_backend``: its envs are Gymnasium envs that
    ``batchppo.envs.make`` builds (and wraps in a config's ``env_wrappers``)."""
    make = backend.make
    return isinstance(make, functools.partial) and make.func is make_host_env


register(
    host_backend(
        "process",
        description="BatchEnv worker processes",
        batch_env=lazy("batchppo.envs.make:process_batch_env"),
        supports_restarts=True,
        run_options=step_timeout_option,
    )
)
register(
    host_backend(
        "sync",
        description="envs stepped in the calling process",
        batch_env=lazy("batchppo.envs.make:in_process_batch_env"),
        supports_restarts=True,
    )
)
