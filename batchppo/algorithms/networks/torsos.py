"""The registry of torsos: one [`Torso`][batchppo.algorithms.networks.torsos.Torso] record
each, in [`TORSOS`][batchppo.algorithms.networks.torsos.TORSOS].

A torso turns an input into a feature vector. It takes one of two inputs (its ``takes``):

* ``image``: an image observation (a rank-3 ``Box`` leaf); a config's ``cnn`` names it;
* ``vector``: a batch of feature vectors (a vector observation, flattened, or the encoder's
  features); a config's ``mlp`` names it, the hidden layers of both the policy and the value
  network, between their inputs and their heads.

Everything that knows the torsos reads these records: the config checks of ``cnn`` and
``mlp`` (``NetworkConfig``, the choices their messages list, the layers a vector torso
takes), the encoder that builds an image torso (``encoders.ObsEncoder``) and the networks
that build a vector torso (``networks.ValueNet`` and the policies), the check that an image
torso fits its image and the torsos a refusal suggests (``encoders.check_cnn``), and the docs
(the example below).

This module imports nothing heavy: a record points at its torso's Flax module through
``lazy("module:Class")``, imported when a network is built, so that parsing and validating a
config imports no JAX or Flax. The built-in image torsos' classes live in
``batchppo.algorithms.networks.encoders``, the vector torsos' in
``batchppo.algorithms.networks.networks``; their records are registered at the end of this
module. A torso of one's own is its module plus one
[`register_torso`][batchppo.algorithms.networks.torsos.register_torso] call next to it
(docs/design.md, "Adding a torso"). A user's package makes it known without any import by
its user through an entry point of the group ``batchppo.torsos`` (a
[`Registry`][batchppo.core.registry.Registry]'s): one naming that module, a ``Torso`` record or
a callable returning records, so that ``--set mlp=mytorso`` trains from the command line.

Examples:
    >>> for torso in TORSOS.values():
    ...     takes = f"sides >= {torso.min_side}" if torso.takes == "image" else "vectors"
    ...     print(f"{torso.name} ({takes}): {torso.description}")
    nature (sides >= 36): the Nature CNN of Mnih et al. 2015
    impala (sides >= 1): the IMPALA ResNet of Espeholt et al. 2018
    minatar (sides >= 3): the MinAtar paper's one 3x3 conv, for small grids (MinAtar's 10x10)
    plain (vectors): dense layers, each followed by the activation
    layernorm (vectors): dense layers, each followed by LayerNorm, then the activation
    simba (vectors): SimBa's residual blocks (Lee et al. 2024): one per layer entry
    sem (vectors): dense layers, the last split into simplices (Obando-Ceron et al. 2025)
    >>> fitting(10, 10)
    ['minatar', 'impala']
    >>> torso_names("vector")
    ('plain', 'layernorm', 'simba', 'sem')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from batchppo.core.registry import Registry, lazy

__all__ = [
    "SEM_SIMPLEX_SIZE",
    "TORSOS",
    "TORSO_FIELDS",
    "Torso",
    "fitting",
    "get_torso",
    "register_torso",
    "torso_names",
]

TORSO_LAYOUTS = ("hwc", "chw")
"""The axis orders an image torso may take its images in."""

TORSO_FIELDS = {"image": "cnn", "vector": "mlp"}
"""What a torso takes (``Torso.takes``) -> the config field that names such a torso."""

SEM_SIMPLEX_SIZE = 8
"""The units of one simplex of the ``sem`` torso (its ``V``): the torso's last layer is split
into groups of this many, each softmaxed onto a simplex, so its width must be a multiple of it.
Here, not in ``networks.py``, as the config check reads it (no JAX)."""

LayersRule = Callable[[tuple[int, ...]], str | None]
"""A vector torso's rule for the layer sizes it builds from: what is wrong with them, or None."""


@dataclasses.dataclass(frozen=True)
class Torso:
    """What the package knows of one torso.

    Attributes:
        name: The ``cnn`` (image torso) or ``mlp`` (vector torso) value of a config.
        module: Builds the torso: the module's class, or ``lazy("package.module:Class")``,
            which imports it when a network is built. An image torso's
            ``module(dense=..., name=...)`` maps a float32 image batch (``(B, H, W, C)`` or
            ``(B, C, H, W)``, per ``layout``; uint8 frames already scaled by 1/255) to
            features ``(B, dense)``. A vector torso's ``module(layers=..., activation=...)``
            maps float32 features ``(B, D)`` to ``(B, layers[-1])`` (``(B, D)`` unchanged
            where it takes no layers), its hidden sizes being the config's ``policy_layers``
            or ``value_layers`` and its activation the config's ``activation``.
        min_side: Image torsos: the smallest image height and width it takes (its unpadded
            convolutions leave at least one cell); a smaller image is refused when the network
            is built. 1 for a vector torso.
        layout: Image torsos: the axis order it takes its images in, ``hwc`` or ``chw``; the
            encoder puts each image in it, whatever the observation's own (``image_layout``).
        description: One line for the docs.
        takes: What it takes: ``image`` or ``vector`` (``TORSO_FIELDS``).
        layers_rule: Vector torsos: what is wrong with a tuple of layer sizes it cannot
            build from, or None where it builds from any (``check_layers``).
        module_name: The name of its module in a network that builds it unnamed (the
            vector torsos), the key of its parameters (``params["policy"][module_name]``);
            None: Flax's, after its class (``MLP_0``).

    Raises:
        ValueError: ``takes`` is neither ``image`` nor ``vector``, ``min_side`` is below 1,
            or ``layout`` is neither ``hwc`` nor ``chw``.
    """

    name: str
    module: Callable[..., Any]
    min_side: int = 1
    layout: str = "hwc"
    description: str = ""
    takes: str = "image"
    layers_rule: LayersRule | None = None
    module_name: str | None = None

    def __post_init__(self) -> None:
        name = self.name
        if self.takes not in TORSO_FIELDS:
            raise ValueError(
                f"torso {name!r}: takes={self.takes!r}: choose one of {tuple(TORSO_FIELDS)}"
            )
        if self.min_side < 1:
            raise ValueError(f"torso {name!r}: min_side={self.min_side} must be >= 1")
        if self.layout not in TORSO_LAYOUTS:
            raise ValueError(
                f"torso {name!r}: layout={self.layout!r}: choose one of {TORSO_LAYOUTS}"
            )

    def build(self, name: str | None = None, **sizes: Any) -> Any:
        """The torso's Flax module: ``module(**sizes, name=name)``, its sizes those of its
        kind (``dense``; ``layers`` and ``activation``). ``name`` None names it
        ``module_name``, or lets Flax name it after its class in its parent (``MLP_0``)."""
        return self.module(**sizes, name=name or self.module_name)

    def fits(self, height: int, width: int) -> bool:
        """Whether the torso takes an image of ``height`` x ``width``."""
        return min(height, width) >= self.min_side

    def check_layers(self, field: str, layers: tuple[int, ...]) -> None:
        """Raises a one-line ``ValueError`` where the vector torso cannot build from
        ``layers``, the config's ``field``."""
        problem = None if self.layers_rule is None else self.layers_rule(tuple(layers))
        if problem is not None:
            raise ValueError(f"mlp={self.name!r} with {field}={list(layers)}: {problem}")


TORSOS: Registry[Torso] = Registry("torso", Torso, group="batchppo.torsos")
"""The torsos by name, in registration order (the order messages list them): the built-ins,
then those of the entry points of ``batchppo.torsos``."""


def register_torso(
    name: str,
    module: Callable[..., Any],
    *,
    takes: str = "image",
    min_side: int = 1,
    layout: str = "hwc",
    layers_rule: LayersRule | None = None,
    module_name: str | None = None,
    description: str,
) -> Torso:
    """Adds a torso to [`TORSOS`][batchppo.algorithms.networks.torsos.TORSOS] (see
    [`Torso`][batchppo.algorithms.networks.torsos.Torso] for the fields).

    Returns:
        The record.

    Raises:
        ValueError: A torso of that name exists already, or a field ``Torso`` refuses.
    """
    return TORSOS.register(
        Torso(name, module, min_side, layout, description, takes, layers_rule, module_name)
    )


def torso_names(takes: str = "image") -> tuple[str, ...]:
    """The names of the registered torsos that take ``takes``, in registration order."""
    return tuple(name for name, torso in TORSOS.items() if torso.takes == takes)


def get_torso(name: str, takes: str = "image") -> Torso:
    """The registered torso ``name``, one that takes ``takes`` (the entry points loaded
    first if it is not registered).

    Raises:
        ValueError: No such torso, in one line naming the config field, the closest name and
            the registered torsos that take ``takes``.
    """
    return TORSOS.lookup(
        name, among=torso_names(takes), kind=f"{takes} torso", field=TORSO_FIELDS[takes]
    )


def fitting(height: int, width: int) -> list[str]:
    """The image torsos that take an image of ``height`` x ``width``, the largest
    ``min_side`` first (the one made for the smallest images a refusal suggests last)."""
    fits = [TORSOS[name] for name in torso_names("image") if TORSOS[name].fits(height, width)]
    return [torso.name for torso in sorted(fits, key=lambda torso: -torso.min_side)]


def _blocks_of_one_width(layers: tuple[int, ...]) -> str | None:
    # Each block adds its output to its input, so every block has the same width.
    if layers and len(set(layers)) == 1:
        return None
    return (
        "SimBa builds one residual block per entry, all of one width: repeat one width "
        "(e.g. [64, 64] for two blocks of 64)"
    )


def _last_width_in_simplices(layers: tuple[int, ...]) -> str | None:
    # The last layer is cut into whole simplices, so its width is a multiple of their size.
    if layers and layers[-1] % SEM_SIMPLEX_SIZE == 0:
        return None
    return (
        f"SEM splits the last layer into simplices of {SEM_SIMPLEX_SIZE} units: end the "
        f"layers with a multiple of {SEM_SIMPLEX_SIZE} (e.g. [64, 64])"
    )


# --- The built-in torsos (the image torsos' classes are in encoders.py, the vector torsos' in
# --- networks.py) -----------------------------------------------------------------------------

register_torso(
    "nature",
    lazy("batchppo.algorithms.networks.encoders:NatureCNN"),
    min_side=36,  # 8x8/4, 4x4/2, 3x3/1 unpadded: 36 -> 8 -> 3 -> 1
    description="the Nature CNN of Mnih et al. 2015",
)
register_torso(
    "impala",
    lazy("batchppo.algorithms.networks.encoders:ImpalaCNN"),
    min_side=1,  # padded convs and pools
    description="the IMPALA ResNet of Espeholt et al. 2018",
)
register_torso(
    "minatar",
    lazy("batchppo.algorithms.networks.encoders:MinAtarCNN"),
    min_side=3,  # one 3x3/1 unpadded
    description="the MinAtar paper's one 3x3 conv, for small grids (MinAtar's 10x10)",
)
register_torso(
    "plain",
    lazy("batchppo.algorithms.networks.networks:MLP"),
    takes="vector",
    description="dense layers, each followed by the activation",
)
register_torso(
    "layernorm",
    lazy("batchppo.algorithms.networks.networks:MLP", layer_norm=True),
    takes="vector",
    module_name="LayerNormMLP_0",  # the name its parameters had as a class of its own
    description="dense layers, each followed by LayerNorm, then the activation",
)
register_torso(
    "simba",
    lazy("batchppo.algorithms.networks.networks:SimbaMLP"),
    takes="vector",
    layers_rule=_blocks_of_one_width,
    description="SimBa's residual blocks (Lee et al. 2024): one per layer entry",
)
register_torso(
    "sem",
    lazy("batchppo.algorithms.networks.networks:SemMLP"),
    takes="vector",
    layers_rule=_last_width_in_simplices,
    description="dense layers, the last split into simplices (Obando-Ceron et al. 2025)",
)
