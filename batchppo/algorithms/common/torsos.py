"""The registry of CNN torsos: one [`Torso`][batchppo.algorithms.common.torsos.Torso] record
each, in [`TORSOS`][batchppo.algorithms.common.torsos.TORSOS].

A torso turns an image observation (a rank-3 ``Box`` leaf) into a feature vector; a config's
``cnn`` names it. Everything that knows the torsos reads these records: the config check of
``cnn`` (``NetworkConfig``, the choices its message lists), the encoder that builds a torso
(``encoders.ObsEncoder``), the check that a torso fits its image and the torsos a refusal
suggests (``encoders.check_cnn``), and the docs (the example below).

This module imports nothing heavy: a record points at its torso's Flax module through
``lazy("module:Class")``, imported when a network is built, so that parsing and validating a
config imports no JAX or Flax. The built-in torsos' classes live in
``batchppo.algorithms.common.encoders``; their records are registered at the end of this
module. A torso of one's own is its module plus one
[`register_torso`][batchppo.algorithms.common.torsos.register_torso] call next to it
(docs/design.md, "Adding a torso").

Examples:
    >>> for torso in TORSOS.values():
    ...     print(f"{torso.name} (sides >= {torso.min_side}): {torso.description}")
    nature (sides >= 36): the Nature CNN of Mnih et al. 2015
    impala (sides >= 1): the IMPALA ResNet of Espeholt et al. 2018
    minatar (sides >= 3): the MinAtar paper's one 3x3 conv, for small grids (MinAtar's 10x10)
    >>> fitting(10, 10)
    ['minatar', 'impala']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from batchppo.core.backends import lazy

__all__ = ["TORSOS", "Torso", "fitting", "get_torso", "register_torso", "torso_names"]

TORSO_LAYOUTS = ("hwc", "chw")
"""The axis orders a torso may take its images in."""


@dataclasses.dataclass(frozen=True)
class Torso:
    """What the package knows of one CNN torso.

    Attributes:
        name: The ``cnn`` value of a config.
        module: Builds the torso: ``module(dense=..., name=...)`` returns a Flax module that maps
            a float32 image batch (``(B, H, W, C)`` or ``(B, C, H, W)``, per ``layout``; uint8
            frames already scaled by 1/255) to features ``(B, dense)``. The module's class, or
            ``lazy("package.module:Class")``, which imports it when a network is built.
        min_side: The smallest image height and width it takes (its unpadded convolutions
            leave at least one cell); a smaller image is refused when the network is built.
        layout: The axis order it takes its images in: ``hwc`` or ``chw``; the encoder puts
            each image in it, whatever the observation's own (``image_layout``).
        description: One line for the docs.
    """

    name: str
    module: Callable[..., Any]
    min_side: int
    layout: str
    description: str

    def build(self, dense: int, name: str) -> Any:
        """The torso's Flax module, ``dense`` features wide, named ``name`` in its parent."""
        return self.module(dense=dense, name=name)

    def fits(self, height: int, width: int) -> bool:
        """Whether the torso takes an image of ``height`` x ``width``."""
        return min(height, width) >= self.min_side


TORSOS: dict[str, Torso] = {}
"""The torsos by name, in registration order (the order messages list them)."""


def register_torso(
    name: str,
    module: Callable[..., Any],
    *,
    min_side: int,
    layout: str = "hwc",
    description: str,
) -> Torso:
    """Adds a torso to [`TORSOS`][batchppo.algorithms.common.torsos.TORSOS] (see
    [`Torso`][batchppo.algorithms.common.torsos.Torso] for the fields).

    Returns:
        The record.

    Raises:
        ValueError: A torso of that name exists already, ``min_side`` is below 1, or
            ``layout`` is neither ``hwc`` nor ``chw``.
    """
    if name in TORSOS:
        raise ValueError(f"torso {name!r} is registered already")
    if min_side < 1:
        raise ValueError(f"torso {name!r}: min_side={min_side} must be >= 1")
    if layout not in TORSO_LAYOUTS:
        raise ValueError(f"torso {name!r}: layout={layout!r}: choose one of {TORSO_LAYOUTS}")
    torso = Torso(name, module, min_side, layout, description)
    TORSOS[name] = torso
    return torso


def torso_names() -> tuple[str, ...]:
    """The names of the registered torsos, in registration order."""
    return tuple(TORSOS)


def get_torso(name: str) -> Torso:
    """The registered torso ``name``.

    Raises:
        ValueError: No torso of that name (the message lists the registered ones).
    """
    if name not in TORSOS:
        raise ValueError(f"cnn={name!r}: choose one of {torso_names()}")
    return TORSOS[name]


def fitting(height: int, width: int) -> list[str]:
    """The torsos that take an image of ``height`` x ``width``, the largest ``min_side`` first
    (the one made for the smallest images a refusal suggests last)."""
    fits = [torso for torso in TORSOS.values() if torso.fits(height, width)]
    return [torso.name for torso in sorted(fits, key=lambda torso: -torso.min_side)]


# --- The built-in torsos (their classes are in encoders.py) -----------------------------------

register_torso(
    "nature",
    lazy("batchppo.algorithms.common.encoders:NatureCNN"),
    min_side=36,  # 8x8/4, 4x4/2, 3x3/1 unpadded: 36 -> 8 -> 3 -> 1
    description="the Nature CNN of Mnih et al. 2015",
)
register_torso(
    "impala",
    lazy("batchppo.algorithms.common.encoders:ImpalaCNN"),
    min_side=1,  # padded convs and pools
    description="the IMPALA ResNet of Espeholt et al. 2018",
)
register_torso(
    "minatar",
    lazy("batchppo.algorithms.common.encoders:MinAtarCNN"),
    min_side=3,  # one 3x3/1 unpadded
    description="the MinAtar paper's one 3x3 conv, for small grids (MinAtar's 10x10)",
)
