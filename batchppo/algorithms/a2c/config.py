"""The configuration of an A2C run: [`RunConfig`][batchppo.algorithms.common.run_config.RunConfig]'s
run-level fields plus A2C's own.

The defaults are SB3's A2C (Mnih et al. 2016, synchronous): rollouts of 5 steps, one RMSprop
step per rollout at 7e-4, value loss weight 0.5, gradients clipped at 0.5, plain n-step
returns (``gae_lambda`` 1), no advantage normalisation.
"""

from __future__ import annotations

import dataclasses

from batchppo.algorithms.common.run_config import RunConfig, check, check_image_fields

NETWORKS = ("feed_forward", "feed_forward_gaussian", "feed_forward_categorical")
OPTIMIZERS = ("rmsprop", "adam")
METRICS = (
    "policy_loss",
    "value_loss",
    "entropy",
    "loss",
    "grad_norm",
    "value_mean",
    "return_mean",
    "learning_rate",
)
"""The train metrics of every A2C iteration, besides the episode metrics."""


@dataclasses.dataclass(frozen=True)
class A2CConfig(RunConfig):
    """Everything that defines an A2C run. Invalid values raise ``ValueError``."""

    rollout_length: int = 5
    """Steps per env per update (SB3's ``n_steps``)."""
    network: str = "feed_forward_gaussian"
    """``feed_forward`` (the action head chosen from the action space),
    ``feed_forward_gaussian`` or ``feed_forward_categorical`` (``common/networks.py``)."""
    policy_layers: tuple[int, ...] = (64, 64)
    """Hidden sizes of the policy MLP."""
    value_layers: tuple[int, ...] = (64, 64)
    """Hidden sizes of the value MLP."""
    activation: str = "tanh"
    """Hidden activation: ``relu`` or ``tanh``."""
    init_std: float = 1.0
    """Initial standard deviation of the Gaussian policy (state-independent)."""
    init_mean_factor: float = 0.01
    """Scale of the policy head's initialisation."""
    cnn: str = "nature"
    """The CNN torso of image observations (rank-3 Box leaves): a name of the torso registry
    [`TORSOS`][batchppo.algorithms.common.torsos.TORSOS], which lists each torso with the
    smallest image it takes (``nature``, the Nature CNN, needs sides of 36 or more)."""
    cnn_dense: int = 512
    """Width of the dense layer that ends the CNN torso."""
    image_layout: str = "auto"
    """How image observations' axes are read: ``hwc``, ``chw`` or ``auto`` (the smaller of the
    first and last axes is the channels; the last on a tie)."""
    image_encoding: str = "auto"
    """Integer image observations: ``pixels`` (scaled into the CNN), ``codes`` (a grid of
    codes such as MiniGrid's object/colour/state ids: each cell's values embedded, then
    flattened into the MLPs, no CNN) or ``auto`` (codes for an integer image whose ``high``
    is below 255 or whose side is under 8, as MiniGrid's 7x7 view:
    ``is_code_grid`` in ``core/spaces.py``)."""
    shared_torso: bool = False
    """Policy and value networks share one observation encoder (the CNNs, the norm for
    pixels) instead of each having its own. One vector observation has no encoder: it goes
    straight into the MLPs, so the setting changes nothing there."""
    optimizer: str = "rmsprop"
    """``rmsprop`` (decay 0.99, as SB3 and the paper) or ``adam``."""
    learning_rate: float = 7e-4
    """Step size of the optimiser."""
    anneal_lr: bool = False
    """Linearly anneal the learning rate to 0 over ``steps``."""
    optimizer_eps: float = 1e-5
    """Epsilon of the optimiser's denominator."""
    max_grad_norm: float | None = 0.5
    """Clip gradients to this global norm; None disables clipping."""
    discount: float = 0.99
    """Discount factor gamma."""
    gae_lambda: float = 1.0
    """GAE lambda; 1 gives the paper's n-step returns."""
    normalize_advantages: bool = False
    """Standardise the advantages of each rollout."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    normalize_observations: bool = False
    """Streaming centre-and-scale of observations (statistics fixed during a rollout)."""
    obs_clip: float = 5.0
    """Clip normalised observations to [-obs_clip, obs_clip]."""
    reward_factor: float = 1.0
    """A constant factor on the rewards the learner sees (reported scores are the env's)."""

    @property
    def schedule_spans_steps(self) -> bool:
        """True with ``anneal_lr``: a resumed run may not raise ``steps``."""
        return self.anneal_lr

    def __post_init__(self) -> None:
        self.check_run()
        check(self.network in NETWORKS, f"network={self.network!r}: choose one of {NETWORKS}")
        check_image_fields(self)
        check(
            self.optimizer in OPTIMIZERS,
            f"optimizer={self.optimizer!r}: choose one of {OPTIMIZERS}",
        )
        check(
            self.activation in ("relu", "tanh"),
            f"activation={self.activation!r}: use relu or tanh",
        )
        check(self.rollout_length >= 1, f"rollout_length={self.rollout_length}: must be >= 1")
        check(self.learning_rate > 0, f"learning_rate={self.learning_rate}: must be > 0")
        check(self.optimizer_eps > 0, f"optimizer_eps={self.optimizer_eps}: must be > 0")
        check(0.0 < self.discount <= 1.0, f"discount={self.discount}: must be in (0, 1]")
        check(0.0 <= self.gae_lambda <= 1.0, f"gae_lambda={self.gae_lambda}: must be in [0, 1]")
        check(self.init_std > 0, f"init_std={self.init_std}: must be > 0")
        check(self.reward_factor > 0, f"reward_factor={self.reward_factor}: must be > 0")
