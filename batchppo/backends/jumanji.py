"""The ``jumanji`` backend: Jumanji envs in JAX, fused with the learner.

Its record is registered when this module is imported ([`batchppo.backends`][batchppo.backends]
imports it); the env, [`JumanjiEnv`][batchppo.backends.JumanjiEnv], and Jumanji (the optional
``jumanji`` package) are imported when an env is built or a Jumanji id checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from batchppo.backends.factories import check_registered_id
from batchppo.core.autoreset import RestartOptions
from batchppo.core.backends import Backend, FactoryRecipe, factory_package, register
from batchppo.core.registry import lazy

if TYPE_CHECKING:
    from batchppo.backends.jumanji_env import JumanjiEnv

__all__ = [
    "JUMANJI_TESTED_IDS",
    "check_jumanji_id",
    "has_jumanji_api",
    "jumanji_recipe",
    "make_jumanji_env",
]

JUMANJI_TESTED_IDS = ("Snake-v1", "Game2048-v1", "Maze-v0", "Minesweeper-v0")
"""Jumanji ids whose spaces batchppo's tests check (Snake's episodes step by step, Game2048
trained); a Connector of two agents is tested through Jumanji's ``MultiToSingleWrapper``."""


def check_jumanji_id(env_id: str) -> None:
    """Raises ValueError when ``env_id`` is neither a Jumanji id (imports Jumanji) nor a
    ``module:factory`` that resolves (``batchppo.backends.factories``; not called here)."""

    def registered() -> list[str]:
        import jumanji

        return sorted(jumanji.registered_environments())

    check_registered_id(env_id, "Jumanji env id", registered, JUMANJI_TESTED_IDS)


def make_jumanji_env(
    env_id: str,
    num_envs: int,
    *,
    max_length: int | None,
    normalize_ranges: bool,
    env_kwargs: Mapping[str, Any],
    options: RestartOptions,
) -> JumanjiEnv:
    """The ``jumanji`` backend's builder (``batchppo.core.backends.MakeEnv``).

    ``env_kwargs`` go to ``jumanji.make`` (the env's constructor) or a ``module:factory``;
    ``options`` are its ``RestartOptions`` (``JumanjiEnv``'s restart mode, as for the
    other fused backends).
    """
    from batchppo.backends.jumanji_env import JumanjiEnv

    return JumanjiEnv(
        env_id,
        num_envs,
        max_length=max_length,
        normalize_ranges=normalize_ranges,
        env_kwargs=dict(env_kwargs),
        autoreset=options.autoreset,
        reset_ratio=options.reset_ratio,
    )


def has_jumanji_api(product: Any) -> bool:
    """Whether a factory's product has Jumanji's API (``Backend.detect``), read by shape
    (Jumanji need not be importable): ``reset(key)`` and ``step(state, action)``, and
    ``observation_spec`` and ``action_spec`` as spec objects, as every ``jumanji.Environment``."""
    names = ("reset", "step", "observation_spec", "action_spec")
    if isinstance(product, tuple) or not all(hasattr(product, a) for a in names):
        return False
    # dm_env's specs are methods; Jumanji's are (cached) properties holding spec objects.
    return not callable(product.observation_spec) and not callable(product.action_spec)


def jumanji_recipe(env_id: str, product: Any) -> FactoryRecipe:
    """Where a run of a factory's Jumanji env starts (``Backend.recipe``), from its specs read
    as spaces (``jumanji_env.jumanji_spaces``): Pendulum's preset for Box actions, MinAtar's
    for an image observation, CartPole's otherwise, the generic network (an encoder per
    observation leaf, a head per action leaf) but for the image.

    Raises:
        ValueError: A spec the spaces cannot take.
    """
    from batchppo.backends.jumanji_env import jumanji_spaces  # JAX: only when a recipe runs
    from batchppo.core import spaces

    obs, act = jumanji_spaces(product, f"env {env_id!r}")
    generic = {"network": "feed_forward"}
    if isinstance(act, spaces.Box):
        preset, changes = "pendulum_jax", generic
    elif spaces.has_image(obs):
        preset, changes = "breakout_minatar", {}
    else:
        preset, changes = "cartpole_jax", generic
    limit = getattr(product, "time_limit", None)
    words = spaces.describe(obs).replace("'", "")
    kind = f"Jumanji's API, observations {words}, {spaces.describe(act)} actions"
    own_limit = isinstance(limit, int) and limit >= 1
    return FactoryRecipe(preset, kind, changes, own_time_limit=own_limit)


register(
    Backend(
        name="jumanji",
        make=make_jumanji_env,
        check_env_id=check_jumanji_id,
        host=False,
        description="Jumanji envs in JAX, fused with the learner",
        title="Jumanji",
        options=RestartOptions,
        requires="jumanji",
        # One env built before a run dir is made: its mistakes are one line, with exit 2.
        probe=lazy("batchppo.backends.jumanji_env:probe_jumanji_env"),
        detect=has_jumanji_api,
        recipe=jumanji_recipe,
        env_requires=factory_package,
    )
)
