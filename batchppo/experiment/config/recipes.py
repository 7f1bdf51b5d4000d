"""Starting recipes: the config of a run given an env and no config, chosen from its spaces.

``batchppo train --env ID`` (and ``batchppo.train(env=...)`` without a config) start here.

[`recipe_for_env`][batchppo.experiment.config.recipes.recipe_for_env] builds the env once
([`check_env`][batchppo.experiment.config.env_checks.check_env]) and takes the first of
[`RECIPES`][batchppo.experiment.config.recipes.RECIPES] that matches its spaces: a preset and the
fields set on top of it. A ``module:factory`` whose env a backend's record takes (its
``detect``: gymnax's, Brax's or Jumanji's API, or a plug-in's) runs on that backend, from the
preset its ``recipe`` names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from batchppo.algorithms.run_config import RunConfig
from batchppo.backends.factories import is_factory_id
from batchppo.experiment.config.configs import get_preset, replace_config
from batchppo.experiment.config.env_checks import check_env
from batchppo.experiment.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A preset to start from for an env whose spaces match (``batchppo train --env ID``).

    Attributes:
        kind: What the spaces are, for messages (``"continuous control"``), or a function of
            the spaces ``(observation_space, action_space) -> str`` that says so.
        preset: The preset whose hyperparameters the run takes (its env replaced).
        matches: ``matches(observation_space, action_space)``: whether the recipe fits.
        changes: Fields set on top of the preset (e.g. a host backend for a gymnax preset).
    """

    kind: str
    preset: str
    matches: Any
    changes: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def _leaves(space: Any) -> list[Any]:
    """The leaf spaces of a Gymnasium space (``gym_leaves``: Dict and Tuple are walked)."""
    from batchppo.envs.spaces import gym_leaves  # Gymnasium: only when a recipe runs

    return gym_leaves(space)


def _is_vector(obs: Any) -> bool:
    """One Box of rank 0-2: what the networks take flattened into the MLPs, with no encoder."""
    shape = getattr(obs, "shape", None)
    return type(obs).__name__ == "Box" and shape is not None and len(shape) <= 2


def _space_words(space: Any) -> str:
    """A space in a few words for messages: ``Dict``, ``Tuple``, ``Box (5, 5)``,
    ``MultiDiscrete``."""
    name = type(space).__name__
    if name == "Box":
        return f"Box {tuple(space.shape)}"
    return name


def _other_spaces(obs: Any, act: Any) -> str:
    """What the fallback recipes say of the spaces: the spaces themselves."""
    return f"{_space_words(obs)} observations and {_space_words(act)} actions"


def _core_space(space: Any) -> Any:
    """The core's space tree (``from_gymnasium``) of the Gymnasium space of a probe, which passed
    HostEnv's check of its spaces: what the image checks of ``core/spaces.py`` read."""
    from batchppo.backends.host_env import from_gymnasium  # JAX: only when a recipe runs

    return from_gymnasium(space)


def _has_image(obs: Any) -> bool:
    """Whether the Gymnasium space ``obs`` has an image leaf (``has_image`` of
    ``core/spaces.py``)."""
    from batchppo.core import spaces

    return spaces.has_image(_core_space(obs))


NATURE_CNN_MIN_SIDE = 36
"""The smallest image side the Nature CNN takes (8x8/4, 4x4/2 and 3x3/1 valid convolutions)."""


def _has_code_grid(obs: Any) -> bool:
    """Whether an image leaf of the Gymnasium space ``obs`` reads as a grid of codes
    (``is_code_grid`` of ``core/spaces.py``, ``image_encoding=auto``)."""
    from batchppo.core import spaces

    return any(spaces.is_code_grid(leaf) for leaf in spaces.leaves(_core_space(obs)))


def _smallest_image_side(obs: Any) -> int:
    """The shortest height or width over the image leaves of ``obs`` (axes read as ``auto``)."""
    from batchppo.algorithms.networks.encoders import hwc_shape  # Flax: only when a recipe runs
    from batchppo.core import spaces

    leaves = spaces.leaves(_core_space(obs))
    sides = [hwc_shape(leaf.shape, "auto")[:2] for leaf in leaves if spaces.is_image(leaf)]
    return min(min(hw) for hw in sides)


def _all_discrete(act: Any) -> bool:
    return all(type(leaf).__name__ == "Discrete" for leaf in _leaves(act))


def _all_box(act: Any) -> bool:
    return all(type(leaf).__name__ == "Box" for leaf in _leaves(act))


RECIPE_BACKEND = "process"
"""The backend of every recipe: a user's env is a Gymnasium env, stepped in worker processes."""
RECIPE_MAX_LENGTH = 1000
"""The episode limit of a recipe whose preset keeps its env's own (``max_length=None``, as the
Atari and MinAtar presets do) when the user's env has no time limit of its own."""

RECIPES: list[Recipe] = [
    # The locomotion recipe as Walker2d ships it: HalfCheetah's and Hopper's add changes tuned
    # to those tasks (a lower initial std, LayerNorm).
    Recipe(
        "continuous control (vector observations, Box actions)",
        "walker_fast",
        lambda obs, act: _is_vector(obs) and type(act).__name__ == "Box",
    ),
    Recipe(
        "discrete actions (vector observations, Discrete actions)",
        "cartpole_jax",
        lambda obs, act: _is_vector(obs) and type(act).__name__ == "Discrete",
        {"backend": "process"},
    ),
    # Grids of codes (MiniGrid's object/colour/state ids): each cell embedded, then the MLPs;
    # the CartPole recipe's clipped PPO on 8 envs x 128 steps, as rl-zoo's MiniGrid settings.
    Recipe(
        "a grid of codes (an integer image of ids, not pixels: each cell embedded)",
        "cartpole_jax",
        lambda obs, act: _has_code_grid(obs) and _all_discrete(act),
        {
            "backend": "process",
            "network": "feed_forward",
            "num_agents": 8,
            "rollout_length": 128,
            "num_minibatches": 4,
            "learning_rate": 2.5e-4,
            "steps": 100_000,
        },
    ),
    # Pixel observations: the Atari recipe (Nature CNN shared by policy and value) where the
    # images are large enough for it, else the MinAtar recipe (one 3x3 conv). Neither keeps
    # its preset's Atari-only evaluation preprocessing or its gymnax backend.
    Recipe(
        f"image observations ({NATURE_CNN_MIN_SIDE} px or more a side)",
        "breakout_atari",
        lambda obs, act: _has_image(obs) and _smallest_image_side(obs) >= NATURE_CNN_MIN_SIDE,
        {"eval_env_kwargs": {}},
    ),
    Recipe(
        f"small image observations (under {NATURE_CNN_MIN_SIDE} px a side, e.g. grids)",
        "breakout_minatar",
        lambda obs, act: _has_image(obs),
        {"backend": "process"},
    ),
    # Other space trees: the generic network picks an encoder per observation leaf and a head
    # per action leaf; the hyperparameters follow the action leaves' kind.
    Recipe(
        _other_spaces,  # every action leaf a Box
        "walker_fast",
        lambda obs, act: _all_box(act),
        {"network": "feed_forward"},
    ),
    Recipe(
        _other_spaces,
        "cartpole_jax",
        lambda obs, act: True,
        {"backend": "process", "network": "feed_forward"},
    ),
]
"""Starting recipes, tried in order; the first that matches the env's spaces is taken."""


def _fused_recipe(
    env: str, env_kwargs: Mapping[str, Any] | None, env_wrappers: Sequence[Any]
) -> tuple[RunConfig, str] | None:
    """The recipe of a ``module:factory`` whose env a backend's record takes
    (``factory_backend``), run on that backend from its ``recipe``; None for any other env (a
    Gymnasium one)."""
    from batchppo.backends import factory_backend, get_backend
    from batchppo.backends.factories import call_factory

    try:
        product = call_factory(env, env_kwargs)  # resolves the id first
    except ValueError:
        # A 'module:EnvId' that the module registers, or a factory that fails: the host
        # backends' check names the problem and its fix, with the line that raised.
        return None
    api = factory_backend(product)
    if api is None:
        close = getattr(product, "close", None)
        if callable(close):
            close()
        return None
    if env_wrappers:
        raise ConfigError(
            f"env {env!r} returns an env of the {api} backend: env_wrappers wrap Gymnasium "
            "envs; leave them out and wrap the env in its factory"
        )
    backend = get_backend(api)
    if backend.recipe is None:
        raise ConfigError(
            f"env {env!r} returns an env of the {api} backend, which has no starting recipe: "
            "pick a config with --config (`batchppo list`)"
        )
    try:
        start = backend.recipe(env, product)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    max_length = None if start.own_time_limit else RECIPE_MAX_LENGTH
    changes = {"env": env, "env_kwargs": dict(env_kwargs or {}), "backend": api}
    config = replace_config(
        get_preset(start.preset), {**changes, "max_length": max_length, **start.changes}
    )
    limit = (
        "the env's own time limit ends episodes"
        if config.max_length is None
        else f"max_length={config.max_length} (--set max_length=N)"
    )
    network = (
        f" with network={config.network} (an encoder per observation leaf, a head per action leaf)"
        if "network" in start.changes
        else ""
    )
    message = (
        f"no --config: {env} returns an env with {start.kind}, so the run is fused on the "
        f"{api} backend from the {start.preset} recipe{network} ({config.steps:,} steps); "
        f"{limit}"
    )
    return config, message


def recipe_for_env(
    env: str, env_kwargs: Mapping[str, Any] | None = None, env_wrappers: Sequence[Any] = ()
) -> tuple[RunConfig, str]:
    """A starting config for ``env`` chosen from its spaces (``RECIPES``).

    The env is built once (``check_env``), inside ``env_wrappers``, to read its spaces and
    time limit. The config
    is the recipe's preset with ``env`` (and ``env_kwargs``); when the env has a time limit of
    its own, ``max_length`` is None (the env's limit ends episodes), otherwise the preset's
    (``RECIPE_MAX_LENGTH`` where the preset has none).

    Returns:
        ``(config, message)``: the message says which recipe was chosen and why, in one line.

    Raises:
        ConfigError: The env fails its start-up check, or no recipe fits its spaces (one
            line naming the spaces and what to do).
    """
    if is_factory_id(env):
        fused = _fused_recipe(env, env_kwargs, env_wrappers)
        if fused is not None:
            return fused
    probe = check_env(
        RunConfig(
            env=env,
            backend=RECIPE_BACKEND,
            env_kwargs=dict(env_kwargs or {}),
            env_wrappers=tuple(env_wrappers),
        )
    )
    obs, act = probe.observation_space, probe.action_space
    for recipe in RECIPES:
        if not recipe.matches(obs, act):
            continue
        base = get_preset(recipe.preset)
        changes = {"env": env, "env_kwargs": dict(env_kwargs or {}), **recipe.changes}
        if probe.time_limit is not None:
            changes["max_length"] = None
            limit = f"the env's own time limit ({probe.time_limit} steps) ends episodes"
        else:
            changes["max_length"] = base.max_length or RECIPE_MAX_LENGTH
            limit = (
                "the env declares no time limit (no max_episode_steps): "
                f"max_length={changes['max_length']} bounds its episodes (--set max_length=N)"
            )
        config = replace_config(base, changes)
        kind = recipe.kind if isinstance(recipe.kind, str) else recipe.kind(obs, act)
        network = (
            f" with network={config.network} (an encoder per observation leaf, a head per "
            "action leaf)"
            if "network" in recipe.changes
            else ""
        )
        message = (
            f"no --config: {env} has {kind}, so the run starts from the "
            f"{recipe.preset} recipe{network} ({config.steps:,} steps); {limit}"
        )
        return config, message
    raise ConfigError(
        f"env {env!r}: no starting recipe fits observation space {obs} and action space {act}: "
        "pick a config with --config (`batchppo list`)"
    )
