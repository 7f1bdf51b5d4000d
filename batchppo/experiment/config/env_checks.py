"""The start-up checks of a run's env, made before its run dir exists.

[`check_env`][batchppo.experiment.config.env_checks.check_env] checks the backend and the env id,
the tracker's package and, for a backend with a probe, one env built, reset once and closed; its
mistakes are one line (a [`ConfigError`][batchppo.experiment.ConfigError]) rather than a failure
after the run dir is made. ``describe_images`` and ``describe_action_mask`` say, in one line each,
how the probed env's observations enter the network.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from batchppo.algorithms.run_config import RunConfig
from batchppo.backends import get_backend
from batchppo.experiment.errors import ConfigError


def check_config_env_id(config: RunConfig) -> None:
    """Fails fast when the config's backend or its env needs a package that is not installed
    (``Backend.missing``: the project's extra named) or its env id is unknown to the backend
    (the backend record's ``check_env_id``, which takes the id alone).

    Raises:
        ConfigError: Naming the id, a close match if any, and where the valid ids come from;
            or the package that is missing and the command that installs it.
    """
    backend = get_backend(config.backend)
    if not backend.available():
        raise ConfigError(
            f"backend {backend.name!r} needs {backend.title}, not installed: `{backend.install}`"
        )
    missing = backend.missing(config.env)
    if missing is not None:
        raise ConfigError(
            f"env {config.env!r} needs the {missing.module} package, not installed: "
            f"`{missing.install}`"
        )
    try:
        backend.check_env_id(config.env)
    except ValueError as error:
        raise ConfigError(str(error)) from error.__cause__  # what the env's module raised


def check_tracker(config: RunConfig) -> None:
    """Fails fast when ``track`` names a tracker whose package is not installed.

    Raises:
        ConfigError: One line naming the extra to install.
    """
    if config.track == "wandb" and importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            "track=wandb needs the wandb package: pip install 'batchppo[wandb]' (or drop "
            "track=wandb)"
        )


def check_env(config: RunConfig) -> Any:
    """The start-up check of a run's env, before its run dir is made: the backend and the id
    (``check_config_env_id``), then, for a backend with a ``probe`` (the Gymnasium ones), one env
    built with the config's ``env_kwargs``, reset once and closed (its constructor, its spaces and
    whether the learners take them, its reset).

    Returns:
        The backend's probe of the env (``batchppo.envs.make.EnvProbe``), or None.

    Raises:
        ConfigError: One line naming the problem and the fix; the original exception is its
            ``__cause__`` (``batchppo train --debug`` shows its traceback).
    """
    check_config_env_id(config)
    check_tracker(config)
    backend = get_backend(config.backend)
    if backend.probe is None:
        return None
    wrappers = {"wrappers": config.env_wrappers} if config.env_wrappers else {}
    try:
        probe = backend.probe(
            config.env,
            normalize_ranges=config.normalize_ranges,
            env_kwargs=config.env_kwargs,
            **wrappers,
        )
        if not backend.host and config.max_length is None and probe.time_limit is None:
            # A compiled env counts its steps against a limit; a host env may run unbounded.
            raise ValueError(
                f"env {config.env!r} has no time limit of its own; set max_length "
                "(--set max_length=N)"
            )
    except ValueError as error:
        message = str(error)
        if not message.startswith(("env ", "cannot build", "unknown", "env_wrappers")):
            message = f"env {config.env!r}: {message}"
        raise ConfigError(message) from error
    return probe


def describe_images(config: RunConfig, probe: Any) -> str | None:
    """How the image leaves of a probed env enter the network, in one line: a grid of codes
    (each cell embedded) or pixels (the CNN), by the config's ``image_encoding``
    (``is_code_grid`` of ``core/spaces.py``); None without an image leaf or a probe."""
    encoding = getattr(config, "image_encoding", None)
    if encoding is None or probe is None:
        return None
    from batchppo.backends.host_env import from_gymnasium  # JAX: only when an env is probed
    from batchppo.core import spaces

    images = [
        leaf for leaf in spaces.leaves(from_gymnasium(probe.observation_space))
        if spaces.is_image(leaf)
    ]  # fmt: skip
    if not images:
        return None
    words = [
        f"the {leaf.shape} {leaf.dtype} image is "
        + (
            "a grid of codes (each cell's codes embedded, no CNN)"
            if spaces.is_code_grid(leaf, encoding)
            else "pixels (the CNN)"
        )
        for leaf in images
    ]
    return (
        f"observations: {'; '.join(words)} (image_encoding={encoding}; --set "
        "image_encoding=pixels or codes decides)"
    )


def describe_action_mask(config: RunConfig, probe: Any) -> str | None:
    """Which observation leaf masks the actions, in one line (``NetworkConfig.action_mask``);
    None where none does or without a probe.

    Raises:
        ConfigError: A named ``action_mask`` the env's spaces do not have or fit.
    """
    setting = getattr(config, "action_mask", None)
    if setting is None or setting == "none" or probe is None:
        return None
    from batchppo.algorithms.networks.masking import action_mask_leaf
    from batchppo.backends.host_env import from_gymnasium  # JAX: only when an env is probed
    from batchppo.core import spaces
    from batchppo.core.env import EnvSpec

    obs_space = from_gymnasium(probe.observation_space)
    spec = EnvSpec.from_spaces(obs_space, from_gymnasium(probe.action_space))
    try:
        index = action_mask_leaf(setting, spec)
    except spaces.UnsupportedSpaceError as error:
        raise ConfigError(f"env {config.env!r}: {error}") from None
    if index is None:
        return None
    path = spaces.leaf_paths(obs_space)[index]
    return (
        f"actions: the observation's {path} leaf masks the disallowed ones (never taken; "
        f"action_mask={setting}; --set action_mask=none turns it off)"
    )
