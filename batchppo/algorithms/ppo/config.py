"""The one flat, frozen configuration of a BatchPPO run.

Field names follow the original Batch PPO configs (``steps``, ``num_agents``, ``max_length``,
``update_every``, ``update_epochs``, ``learning_rate``, ``discount``, ``kl_target``, ...), so its
presets read the same. Named presets live in ``batchppo.algorithms.ppo.presets``.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any, ClassVar

from batchppo.algorithms.run_config import (
    NETWORKS,
    RECURRENT,
    SHUFFLES,
    AnnealedRate,
    NetworkConfig,
    RunConfig,
    check,
    check_anneal,
)

OBJECTIVES = ("kl_penalty", "clip")
REWARD_SCALES = ("reward", "return")
METRICS = (
    "policy_loss",
    "value_loss",
    "entropy",
    "kl",
    "loss",
    "grad_norm",
    "steps_taken",
    "clip_fraction",
    "value_mean",
    "return_mean",
    "beta",
    "learning_rate",
    "obs_mean",
    "obs_std",
    "reward_std",
)
"""The train metrics of every PPO iteration (the objective adds its own, such as
``kl_cutoff`` or ``approx_kl``), besides the episode metrics every trainer reports; ``kl``,
``grad_norm`` and ``clip_fraction`` of the ``clip`` objective need ``minibatch_diagnostics``;
``representation_diagnostics`` adds the feature ranks and pre-activation norms."""
MEMBER_FIELDS = (
    "learning_rate",
    "anneal_lr_end",
    "clip_epsilon",
    "discount",
    "gae_lambda",
    "entropy_coef",
    "value_coef",
    "kl_target",
    "kl_cutoff_factor",
    "kl_cutoff_coef",
    "kl_init_penalty",
    "target_kl",
    "lr_kl_cap",
    "max_grad_norm",
    "value_clip",
    "adam_b1",
    "adam_b2",
)
"""The fields whose values change no shape and no code path (but for an optional one being
None or not): members of one program may differ in them, each carrying its own in its
training state (``batchppo.algorithms.ppo.hparams``; ``batchppo tune --batch``)."""


@dataclasses.dataclass(frozen=True)
class PPOConfig(AnnealedRate, NetworkConfig, RunConfig):
    """Everything that defines a BatchPPO training run. Invalid values raise ``ValueError``.

    The run-level fields (env, backend, num_agents, steps, cadences, seed...) are
    [`RunConfig`][batchppo.algorithms.run_config.RunConfig]'s, the network fields
    (network, policy_layers, value_layers, activation, init_std, init_mean_factor, cnn,
    cnn_dense, image_layout, image_encoding, shared_torso) are
    [`NetworkConfig`][batchppo.algorithms.run_config.NetworkConfig]'s, with its
    defaults; the fields below are PPO's.
    """

    FIELDS_ADDED: ClassVar[Mapping[str, Any]] = types.MappingProxyType(
        {"minibatch_shuffle": "sort"}  # the permutations before the field existed
    )

    # --- Schedule ---------------------------------------------------------------------------
    update_every: int = 30
    """Episodes per update (the original's schedule). Used when ``rollout_length`` is None:
    each update then collects ``ceil(update_every / num_agents) * max_length`` steps per env."""
    rollout_length: int | None = None
    """Steps per env per update (modern fixed-length rollouts); overrides ``update_every``."""
    update_epochs: int = 25
    """Passes over the collected batch per update."""
    num_minibatches: int = 1
    """Minibatches per epoch (split over envs/sequences)."""
    minibatch_shuffle: str = "index"
    """How each epoch's permutation of the batch is drawn: ``index`` maps the indices through
    a keyed bijection (``batchppo.algorithms.training.shuffle.index_permutation``: elementwise
    work), ``sort`` sorts random keys (``jax.random.permutation``: XLA's CPU backend sorts
    with a comparator, which at thousands of indices costs more than a minibatch's gradient
    step). Both shuffle every epoch; ``sort`` draws the permutations of batchppo's earlier
    versions, to repeat a run made with them (a run stored before this field resumes with
    it: ``FIELDS_ADDED``)."""
    unroll_update: bool | None = None
    """Compile the update's epochs and minibatch steps unrolled (True) or as loops (False);
    None decides: unrolled where the network has a CNN torso (an image observation) and JAX
    runs on the CPU, loops elsewhere. XLA's CPU backend runs convolution gradients inside a
    loop far more slowly than outside one (jax-ml/jax#12868); unrolled, the program
    holds ``update_epochs * num_minibatches`` gradient steps and compiles longer. With it
    on, ``Trainer.iterations`` runs its iterations as separate calls (a scan over
    iterations would be a loop again); a fused ``make_train`` run stays one loop."""
    chunk_length: int | None = None
    """Cut each env's rollout into sequences of this length for recurrent training; None
    keeps whole rollouts."""

    # --- Losses -----------------------------------------------------------------------------
    objective: str = "kl_penalty"
    """``kl_penalty`` (the original: adaptive beta + quadratic cutoff) or ``clip``."""
    learning_rate: float = 1e-4
    """Adam learning rate."""
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
    lr_kl_cap: float | None = None
    """Bound on the KL per update, held through the learning rate (as rsl_rl's adaptive
    schedule, with a desired KL of half the cap): after an update whose KL, the mean over its
    minibatch steps, exceeds the cap, a scale on the learning rate is divided by 1.5; after one
    under a quarter of the cap it is multiplied by 1.5, up to 1. An update under the cap leaves
    the schedule exactly as it is. None never scales."""
    adam_b1: float = 0.9
    """Adam's decay rate of the gradient's first moment (``optax.adam``'s ``b1``).

    Dohare, Lan and Mahmood 2023 ("Overcoming Policy Collapse in Deep Reinforcement
    Learning") trace PPO's late collapse on MuJoCo partly to Adam's default betas on
    non-stationary data, whose large updates after a change of the gradients' scale they
    tame with ``adam_b1 == adam_b2`` (0.99 both, say)."""
    adam_b2: float = 0.999
    """Adam's decay rate of the gradient's second moment (``optax.adam``'s ``b2``); see
    ``adam_b1``."""
    weight_decay: float = 0.0
    """L2 penalty coefficient ``c``: the loss gains ``c / 2 * ||params||^2`` over every
    parameter (biases, LayerNorm scales and the policy's log-std included), its gradient
    ``c * params`` added to the loss's gradient before clipping and Adam
    (``optax.add_decayed_weights`` first in the chain): coupled L2, the regularisation
    Dohare et al. 2023 find mitigates policy collapse in many cases when aggressive, not
    AdamW's decoupled decay. 0 (the
    default) adds nothing to the optimiser, whose state then stays that of earlier runs."""
    max_grad_norm: float | None = None
    """Clip gradients to this global norm; None disables clipping (the original)."""
    discount: float = 0.995
    """Discount factor gamma."""
    gae_lambda: float = 1.0
    """GAE lambda; 1.0 gives the original's plain discounted returns minus values."""
    normalize_advantages: bool = True
    """Standardise advantages per minibatch."""
    recompute_advantages: bool = False
    """Recompute values, advantages and value targets with the current value network at the
    start of every epoch instead of once per rollout (Andrychowicz et al. 2021, "What Matters
    In On-Policy Reinforcement Learning?"; Tianshou's ``recompute_adv``): one value pass over
    the batch per epoch. Feed-forward networks only."""
    kl_target: float = 0.01
    """Target KL per update (kappa)."""
    kl_cutoff_factor: float = 2.0
    """KL above ``kl_cutoff_factor * kl_target`` is penalised quadratically."""
    kl_cutoff_coef: float = 1000.0
    """Coefficient of the quadratic KL cutoff."""
    kl_init_penalty: float = 1.0
    """Initial KL penalty coefficient beta."""
    clip_epsilon: float = 0.2
    """Ratio clipping range of the ``clip`` objective."""
    target_kl: float | None = None
    """``clip`` objective: end an update early, skipping its remaining minibatch steps, once a
    minibatch's KL from the rollout policy exceeds ``1.5 * target_kl`` (as SB3); None never."""
    value_clip: float | None = None
    """Clip value updates to this range (``clip`` objective); None disables."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient (eta)."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    minibatch_diagnostics: bool = True
    """Compute and log, at every minibatch step, what the loss does not need: the exact KL to
    the rollout policy (``kl``), the ``clip`` objective's ``clip_fraction`` and ``approx_kl``,
    and the gradient norm (``grad_norm``), each a mean over the update. False drops them from
    the step (their reductions add kernels to every minibatch step, which count on an
    accelerator, where a small network's step is mostly kernel launches) and from the
    metrics; ``lr_kl_cap`` and ``target_kl`` read the KL, so they need it on.
    Training is the same either way."""
    representation_diagnostics: bool = False
    """Log, at every update, measures of the networks' representations (Moalla et al. 2024,
    "No Representation, No Trust", arXiv 2405.00662), on the update's whole batch under the
    params the update starts from (those that collected it): ``policy_feature_rank`` and
    ``value_feature_rank``, the effective rank (srank, delta 0.01: the fewest singular values
    that hold 99 % of their sum; ``networks.effective_rank``) of the features that enter the
    policy's head and the value's output layer, and ``policy_preact_norm_<i>`` and
    ``value_preact_norm_<i>``, the mean over samples of the L2 norm of the ``i``-th hidden
    layer's dense output in the vector torso ``mlp`` (before LayerNorm and the activation;
    for ``mlp=simba`` each block's inner layer; for ``mlp=sem`` the last is the dense
    layer the simplices are cut from; a torso of one's own that sows none into
    ``networks.DIAGNOSTICS`` adds none). A collapsing rank and growing pre-activation
    norms precede PPO's collapse in their runs. The measures cost a network pass and an
    SVD per update; training is the same either way. Feed-forward networks only, and a
    network of one's own needs ``Network.representation``."""

    # --- Normalisation ----------------------------------------------------------------------
    normalize_observations: bool = True
    """Streaming centre-and-scale of observations (clip 5)."""
    normalize_rewards: bool = True
    """Streaming scaling of rewards (clip 10)."""
    reward_scale: str = "reward"
    """What the reward scale is the standard deviation of: ``reward`` (single rewards, the
    original) or ``return`` (the running discounted return, as SB3's ``VecNormalize``), which
    keeps value targets near unit scale whatever the discount."""
    obs_clip: float = 5.0
    """Clip normalised observations to [-obs_clip, obs_clip]."""
    reward_clip: float = 10.0
    """Clip scaled rewards to [-reward_clip, reward_clip]."""

    def __post_init__(self) -> None:
        self.check_run()
        self.check_network(NETWORKS)
        check_anneal(self)
        check(
            self.objective in OBJECTIVES,
            f"objective={self.objective!r}: choose one of {OBJECTIVES}",
        )
        check(
            self.reward_scale in REWARD_SCALES,
            f"reward_scale={self.reward_scale!r}: choose one of {REWARD_SCALES}",
        )
        check(
            self.target_kl is None or self.target_kl > 0,
            f"target_kl={self.target_kl}: must be > 0, or None to never stop early",
        )
        check(
            self.lr_kl_cap is None or self.lr_kl_cap > 0,
            f"lr_kl_cap={self.lr_kl_cap}: must be > 0, or None to never scale the learning rate",
        )
        check(
            self.minibatch_diagnostics or (self.lr_kl_cap is None and self.target_kl is None),
            "minibatch_diagnostics=False with lr_kl_cap or target_kl set: both read the "
            "minibatch KL; set minibatch_diagnostics=True or unset them",
        )
        check(
            not (self.recompute_advantages and self.network in RECURRENT),
            f"recompute_advantages=True with network={self.network!r}: advantages are "
            "recomputed for feed-forward networks only; use a feed_forward network or set "
            "recompute_advantages=False",
        )
        check(
            self.minibatch_shuffle in SHUFFLES,
            f"minibatch_shuffle={self.minibatch_shuffle!r}: choose one of {SHUFFLES}",
        )
        check(
            0.0 <= self.adam_b1 < 1.0 and 0.0 <= self.adam_b2 < 1.0,
            f"adam_b1={self.adam_b1}, adam_b2={self.adam_b2}: both must be in [0, 1)",
        )
        check(self.weight_decay >= 0, f"weight_decay={self.weight_decay}: must be >= 0")
        check(
            not (self.representation_diagnostics and self.network in RECURRENT),
            f"representation_diagnostics=True with network={self.network!r}: the diagnostics "
            "measure feed-forward networks only; use a feed_forward network or set "
            "representation_diagnostics=False",
        )
        check(self.update_epochs >= 1, f"update_epochs={self.update_epochs}: must be >= 1")
        check(self.num_minibatches >= 1, f"num_minibatches={self.num_minibatches}: must be >= 1")
        check(0.0 < self.discount <= 1.0, f"discount={self.discount}: must be in (0, 1]")
        check(0.0 <= self.gae_lambda <= 1.0, f"gae_lambda={self.gae_lambda}: must be in [0, 1]")
        check(self.learning_rate > 0, f"learning_rate={self.learning_rate}: must be > 0")
        check(
            self.rollout_length is not None or self.max_length is not None,
            "set rollout_length, or max_length so that update_every (episodes) gives a length",
        )
