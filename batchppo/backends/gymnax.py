"""The ``gymnax`` backend: gymnax envs in JAX, fused with the learner.

Its record is registered when this module is imported ([`batchppo.backends`][batchppo.backends]
imports it); the env, [`GymnaxEnv`][batchppo.backends.GymnaxEnv], and gymnax itself are imported
when an env is built or an id checked (``import_gymnax``).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from batchppo.backends._deferred import deferred_imports
from batchppo.backends.factories import check_registered_id
from batchppo.core.autoreset import RestartOptions
from batchppo.core.backends import Backend, FactoryRecipe, factory_package, register

if TYPE_CHECKING:
    from batchppo.backends.gymnax_env import GymnaxEnv

__all__ = [
    "GYMNASIUM_TWINS",
    "GYMNAX_DEFERRED",
    "GYMNAX_TESTED_IDS",
    "check_gymnax_id",
    "gymnax_recipe",
    "has_gymnax_api",
    "import_gymnax",
    "make_gymnax_env",
]

GYMNAX_TESTED_IDS = ("Pendulum-v1", "CartPole-v1", "MountainCarContinuous-v0", "Acrobot-v1")
"""gymnax ids that batchppo's tests train on."""

GYMNASIUM_TWINS = frozenset(
    {"Pendulum-v1", "CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0"}
)
"""gymnax ids whose Gymnasium env of the same id has the same dynamics (``batchppo visualize``
renders gymnax policies in it)."""

# What gymnax 1.0's renderers import at module level (environments/misc, environments/bsuite).
GYMNAX_DEFERRED = ("seaborn", "matplotlib.pyplot")


def import_gymnax() -> types.ModuleType:
    """``import gymnax``, with its renderers' plotting imports deferred.

    ``import gymnax`` imports every gymnax env, and a few of them (Pong, Catch, the mazes) import
    seaborn and ``matplotlib.pyplot`` at module level for their ``render`` methods, which pulls in
    pandas and scipy.stats too: most of the import's time, on the critical path of every fused run's
    start. Those modules are imported on their first use instead
    (``batchppo.backends._deferred.deferred_imports``).
    """
    if "gymnax" in sys.modules:
        return sys.modules["gymnax"]
    with deferred_imports(*GYMNAX_DEFERRED):
        import gymnax
    return gymnax


def check_gymnax_id(env_id: str) -> None:
    """Raises ValueError when ``env_id`` is neither a gymnax id (imports gymnax) nor a
    ``module:factory`` that resolves (``batchppo.backends.factories``; not called here)."""
    check_registered_id(
        env_id, "gymnax env id", lambda: import_gymnax().registered_envs, GYMNAX_TESTED_IDS
    )


def make_gymnax_env(
    env_id: str,
    num_envs: int,
    *,
    max_length: int | None,
    normalize_ranges: bool,
    env_kwargs: Mapping[str, Any],
    options: RestartOptions,
) -> GymnaxEnv:
    """The ``gymnax`` backend's builder (``batchppo.core.backends.MakeEnv``).

    ``env_kwargs`` are ``EnvParams`` fields of a gymnax id, or the keywords a ``module:factory``
    is called with; ``options`` are its ``RestartOptions`` (``GymnaxEnv``'s restart mode).
    """
    from batchppo.backends.gymnax_env import GymnaxEnv

    return GymnaxEnv(
        env_id,
        num_envs,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        param_changes=dict(env_kwargs),
        autoreset=options.autoreset,
        reset_ratio=options.reset_ratio,
    )


def has_gymnax_api(product: Any) -> bool:
    """Whether a factory's product has gymnax's API (``Backend.detect``): ``reset_env``,
    ``step_env`` and ``default_params``, as every ``gymnax.environments.environment.Environment``
    (Craftax's envs share it), alone or in a tuple ``(env, params)`` as ``gymnax.make`` returns."""
    env = product[0] if isinstance(product, tuple) and len(product) == 2 else product
    return all(hasattr(env, a) for a in ("reset_env", "step_env", "default_params"))


def gymnax_recipe(env_id: str, product: Any) -> FactoryRecipe:
    """Where a run of a factory's gymnax env starts (``Backend.recipe``): the preset of its
    spaces, CartPole's (a vector, Discrete actions), Pendulum's (a vector, Box actions) or
    MinAtar's (an image, Discrete actions).

    Raises:
        ValueError: No preset fits the spaces.
    """
    inner, params = product if isinstance(product, tuple) else (product, None)
    params = inner.default_params if params is None else params
    obs, act = inner.observation_space(params), inner.action_space(params)
    shape = tuple(getattr(obs, "shape", ()))
    discrete = type(act).__name__ == "Discrete"
    if len(shape) == 3 and discrete:
        preset = "breakout_minatar"
    elif len(shape) == 1:
        preset = "cartpole_jax" if discrete else "pendulum_jax"
    else:
        raise ValueError(
            f"env {env_id!r}: no starting recipe fits gymnax observation shape {shape} and "
            f"action space {type(act).__name__}: pick a config with --config"
        )
    kind = f"gymnax's API, observations {shape}, {type(act).__name__} actions"
    own_limit = bool(getattr(params, "max_steps_in_episode", None))
    return FactoryRecipe(preset, kind, own_time_limit=own_limit)


register(
    Backend(
        name="gymnax",
        make=make_gymnax_env,
        check_env_id=check_gymnax_id,
        host=False,
        description="gymnax envs in JAX, fused with the learner",
        options=RestartOptions,
        detect=has_gymnax_api,
        recipe=gymnax_recipe,
        env_requires=factory_package,
    )
)
