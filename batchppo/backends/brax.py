"""The ``brax`` backend: Brax (or MuJoCo-MJX through Brax) envs in JAX, fused with the learner.

Its record is registered when this module is imported ([`batchppo.backends`][batchppo.backends]
imports it); the env, [`BraxEnv`][batchppo.backends.BraxEnv], and Brax (the optional ``brax``
package) are imported when an env is built or an id checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from batchppo.backends.factories import is_factory_id, resolve_factory
from batchppo.core.backends import Backend, FactoryRecipe, register
from batchppo.core.wording import unknown_id_message

if TYPE_CHECKING:
    from batchppo.backends.brax_env import BraxEnv

__all__ = ["brax_recipe", "check_brax_id", "has_brax_api", "make_brax_env"]


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
    env_kwargs: Mapping[str, Any],
    **_: Any,
) -> BraxEnv:
    """The ``brax`` backend's builder (``batchppo.core.backends.MakeEnv``).

    ``max_length`` None is Brax's 1000 steps; ``env_kwargs`` go to
    ``brax.envs.get_environment`` (or a ``module:factory``), but for ``BraxEnv``'s own
    ``backend``, ``autoreset`` and ``reset_ratio``; the host-side arguments are ignored (Brax
    observations are unbounded and its actions in [-1, 1] already, so ``normalize_ranges``
    changes nothing).
    """
    from batchppo.backends.brax_env import BraxEnv

    return BraxEnv(
        env_id, num_envs, max_length=1000 if max_length is None else max_length, **env_kwargs
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
        requires="brax",
        detect=has_brax_api,
        recipe=brax_recipe,
    )
)
