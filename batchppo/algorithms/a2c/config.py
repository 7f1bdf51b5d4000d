"""The configuration of an A2C run:
[`RunConfig`][batchppo.algorithms.run_config.RunConfig]'s run-level fields plus A2C's own.

The defaults are SB3's A2C (Mnih et al. 2016, synchronous): rollouts of 5 steps, one RMSprop
step per rollout at 7e-4, value loss weight 0.5, gradients clipped at 0.5, plain n-step
returns (``gae_lambda`` 1), no advantage normalisation.
"""

from __future__ import annotations

import dataclasses

from batchppo.algorithms import run_config
from batchppo.algorithms.run_config import (
    AnnealedRate,
    NetworkConfig,
    RunConfig,
    check,
    check_anneal,
)

NETWORKS = tuple(n for n in run_config.NETWORKS if n not in run_config.RECURRENT)
"""The networks A2C trains: the feed-forward ones (its rollouts carry no recurrent state)."""
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
class A2CConfig(AnnealedRate, NetworkConfig, RunConfig):
    """Everything that defines an A2C run. Invalid values raise ``ValueError``.

    The run-level fields are [`RunConfig`][batchppo.algorithms.run_config.RunConfig]'s
    and the network fields
    [`NetworkConfig`][batchppo.algorithms.run_config.NetworkConfig]'s (feed-forward
    networks only: ``network`` is one of ``NETWORKS``), five of them with A2C's defaults below;
    the other fields are A2C's.
    """

    rollout_length: int = 5
    """Steps per env per update (SB3's ``n_steps``)."""
    policy_layers: tuple[int, ...] = (64, 64)
    """Hidden sizes of the policy MLP (SB3's A2C; a ``NetworkConfig`` field)."""
    value_layers: tuple[int, ...] = (64, 64)
    """Hidden sizes of the value MLP (SB3's A2C; a ``NetworkConfig`` field)."""
    activation: str = "tanh"
    """Hidden activation (a ``NetworkConfig`` field)."""
    init_std: float = 1.0
    """Initial standard deviation of the Gaussian policy (a ``NetworkConfig`` field)."""
    init_mean_factor: float = 0.01
    """Scale of the policy head's initialisation (a ``NetworkConfig`` field)."""
    optimizer: str = "rmsprop"
    """``rmsprop`` (decay 0.99, as SB3 and the paper) or ``adam``."""
    learning_rate: float = 7e-4
    """Step size of the optimiser."""
    anneal_lr: bool = False
    """Linearly anneal the learning rate over ``steps`` (``anneal_lr_steps`` where set) to
    ``anneal_lr_end`` times its start."""
    anneal_lr_end: float = 0.0
    """With ``anneal_lr``: the fraction of ``learning_rate`` the anneal ends at. At 0 (the
    default) the rate reaches 0 at the end of the budget, and a resume may not raise
    ``steps``; above 0 it may, the rate holding its end value past the annealed steps."""
    anneal_lr_steps: int | None = None
    """With ``anneal_lr``: the training steps the anneal spans; None: ``steps``. A resume that
    raises ``steps`` sets it to the budget the run had, so that the rate anneals as before
    and holds ``learning_rate * anneal_lr_end`` after it."""
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

    def __post_init__(self) -> None:
        self.check_run()
        self.check_network(NETWORKS)
        check_anneal(self)
        check(
            self.optimizer in OPTIMIZERS,
            f"optimizer={self.optimizer!r}: choose one of {OPTIMIZERS}",
        )
        check(self.rollout_length >= 1, f"rollout_length={self.rollout_length}: must be >= 1")
        check(self.learning_rate > 0, f"learning_rate={self.learning_rate}: must be > 0")
        check(self.optimizer_eps > 0, f"optimizer_eps={self.optimizer_eps}: must be > 0")
        check(0.0 < self.discount <= 1.0, f"discount={self.discount}: must be in (0, 1]")
        check(0.0 <= self.gae_lambda <= 1.0, f"gae_lambda={self.gae_lambda}: must be in [0, 1]")
        check(self.reward_factor > 0, f"reward_factor={self.reward_factor}: must be > 0")
