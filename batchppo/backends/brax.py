"""The ``brax`` backend: Brax (or MuJoCo-MJX through Brax) envs in JAX, fused with the learner.

Its record is registered when this module is imported ([`batchppo.backends`][batchppo.backends]
imports it); the env, [`BraxEnv`][batchppo.backends.BraxEnv], and Brax (the optional ``brax``
package) are imported when an env is built or an id checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from batchppo.backends.factories import is_factory_id, resolve_factory
from batchppo.core.autoreset import RestartOptions
from batchppo.core.backends import LEARNED, Backend, FactoryRecipe, factory_package, register
from batchppo.core.wording import unknown_id_message

if TYPE_CHECKING:
    from batchppo.backends.brax_env import BraxEnv

__all__ = ["BraxOptions", "brax_recipe", "check_brax_id", "has_brax_api", "make_brax_env"]


@dataclasses.dataclass(frozen=True)
class BraxOptions(RestartOptions):
    """The ``backend_options`` of the ``brax`` backend: how finished envs restart
    (``RestartOptions``; ``cond`` by default, since a Brax reset is expensive) and the physics
    (``--set backend_options.backend=mjx``). All change what a run learns: a resumed run keeps
    them."""

    autoreset: str = dataclasses.field(default="cond", metadata=LEARNED)
    """How finished envs restart, one of ``AUTORESET_MODES``: ``cond`` runs a reset only at
    steps where an episode ended."""
    backend: str | None = dataclasses.field(default=None, metadata=LEARNED)
    """Brax's physics backend (``generalized``, ``positional``, ``spring``, ``mjx``); None: the
    env's default."""


def check_brax_id(env_id: str) -> None:
    """Raises ValueError when ``env_id`` is neither a Brax env name (imports Brax) nor a
    ``module:factory`` that resolves (``batchppo.backends.factories``; not called here)."""
    if is_factory_id(env_id):
        resolve_factory(env_id)
        return
    from brax import envs as brax_envs

    known = sorted(getattr(brax_envs, "_envs", {}))
    if known and env_id not in known:
        raise ValueError(
            unknown_id_message("Brax env", env_id, known, f"Valid envs: {', '.join(known)}")
        )


def make_brax_env(
    env_id: str,
    num_envs: int,
    *,
    max_length: int | None,
    normalize_ranges: bool,
    env_kwargs: Mapping[str, Any],
    options: BraxOptions,
) -> BraxEnv:
    """The ``brax`` backend's builder (``batchppo.core.backends.MakeEnv``).

    ``max_length`` None is Brax's 1000 steps; ``env_kwargs`` go to
    ``brax.envs.get_environment`` (or a ``module:factory``); ``options`` are its
    ``BraxOptions``. ``normalize_ranges`` changes nothing: Brax observations are unbounded and its
    actions in [-1, 1] already.
    """
    from batchppo.backends.brax_env import BraxEnv

    del normalize_ranges
    return BraxEnv(
        env_id,
        num_envs,
        max_length=1000 if max_length is None else max_length,
        backend=options.backend,
        autoreset=options.autoreset,
        reset_ratio=options.reset_ratio,
        **env_kwargs,
    )


def has_brax_api(product: Any) -> bool:
    """Whether a factory's product has Brax's API (``Backend.detect``): ``reset(rng)`` and
    ``step(state, action)``, plus ``action_size`` and ``observation_size`` (MuJoCo
    Playground's ``MjxEnv`` has them too)."""
    names = ("reset", "step", "action_size", "observation_size")
    return not isinstance(product, tuple) and all(hasattr(product, a) for a in names)


def brax_recipe(env_id: str, product: Any) -> FactoryRecipe:
    """Where a run of a factory's Brax env starts (``Backend.recipe``): the Ant preset's
    hyperparameters, which fit Brax's locomotion tasks."""
    return FactoryRecipe("ant_brax", "Brax's API")


register(
    Backend(
        name="brax",
        make=make_brax_env,
        check_env_id=check_brax_id,
        host=False,
        description="Brax envs in JAX, fused with the learner",
        title="Brax",
        options=BraxOptions,
        requires="brax",
        detect=has_brax_api,
        recipe=brax_recipe,
        env_requires=factory_package,
    )
)
