"""PPO's per-member hyperparameters: the config values that change no shape and no code path,
carried in the training state so that members with different values train in one program.

A [`TrainState`][batchppo.algorithms.ppo.TrainState] holds ``hparams=None`` in an ordinary
run: PPO then reads every value from its config, as Python constants compiled into its
programs. A state stacked over members (``batchppo tune --batch``: a member is one seed of one
trial) holds an [`HParams`][batchppo.algorithms.ppo.hparams.HParams] of float32 arrays, one
value a member, and ``jax.vmap`` gives each member its own; PPO then reads the values of
``MEMBER_FIELDS`` from the state (``PPO.hparams``), and the optimiser's schedule, the
returns, GAE, the losses and the adaptations of ``beta`` and the learning rate's scale use
them. A member computes what a run of its config computes, to float rounding (the values
are traced where a run's are constants, and the vmapped program is compiled on its own).

``Members`` attaches the values of N members' configs to their stacked state and detaches
them from one member's part, so that a member's checkpoint is an ordinary run's
(``hparams=None``, its values in its ``config.yaml``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from batchppo.algorithms.ppo.config import MEMBER_FIELDS, PPOConfig

__all__ = ["HParams", "Members", "program_key"]


@struct.dataclass
class HParams:
    """The values of ``MEMBER_FIELDS``: Python floats (a config's own, constants in the
    program) or float32 arrays (a member's, in its state); None where the config's is None
    (the feature it switches is off, for every member alike).

    Attributes:
        learning_rate: Adam's learning rate, the start of the schedule.
        anneal_lr_end: The fraction of ``learning_rate`` an annealed schedule ends at.
        clip_epsilon: The ``clip`` objective's ratio range (and the diagnostics' clip fraction).
        discount: Gamma of GAE and of the running returns of ``reward_scale="return"``.
        gae_lambda: GAE lambda.
        entropy_coef: The entropy bonus.
        value_coef: The value loss's weight.
        kl_target: Kappa of ``kl_penalty`` (its cutoff and beta's adaptation).
        kl_cutoff_factor: Where the quadratic KL cutoff starts, in ``kl_target``s.
        kl_cutoff_coef: The quadratic KL cutoff's coefficient.
        kl_init_penalty: Beta of a fresh state.
        target_kl: The ``clip`` objective's early stop; None: none.
        lr_kl_cap: The KL cap held through the learning rate's scale; None: none.
        max_grad_norm: The gradients' global norm clip; None: none.
        value_clip: The value update's clip range; None: none.
        adam_b1: Adam's first-moment decay.
        adam_b2: Adam's second-moment decay.
    """

    learning_rate: Any
    anneal_lr_end: Any
    clip_epsilon: Any
    discount: Any
    gae_lambda: Any
    entropy_coef: Any
    value_coef: Any
    kl_target: Any
    kl_cutoff_factor: Any
    kl_cutoff_coef: Any
    kl_init_penalty: Any
    target_kl: Any
    lr_kl_cap: Any
    max_grad_norm: Any
    value_clip: Any
    adam_b1: Any
    adam_b2: Any

    @classmethod
    def of(cls, config: PPOConfig) -> HParams:
        """The config's own values, as Python floats (or None)."""
        return cls(**{name: getattr(config, name) for name in MEMBER_FIELDS})


class Members:
    """The per-member values of N members of one program: one config each, which differ in
    ``MEMBER_FIELDS`` (and the seed) only, each optional one None in all or in none.

    Args:
        configs: Each member's config, in the order of the stacked state.

    Raises:
        ValueError: No member, or configs that differ in another field or in which optional
            values are None (they would need programs of their own).
    """

    def __init__(self, configs: Sequence[PPOConfig]) -> None:
        if not configs:
            raise ValueError("Members: no member")
        keys = {program_key(c) for c in configs}
        if len(keys) > 1:
            raise ValueError(
                "Members: the members' configs differ in more than their per-member values "
                f"({', '.join(MEMBER_FIELDS)}) and seeds; train each program on its own"
            )
        values = [HParams.of(c) for c in configs]
        self.num_members = len(configs)
        self.values: HParams = jax.tree.map(
            lambda *xs: np.asarray(xs, np.float32), *values
        )  # fields None in every config stay None: no leaf
        """Each field's values over the members, float32 ``(N,)`` on the host."""

    def attach(self, state: Any, fresh: bool = False) -> Any:
        """The members' stacked state carrying their values (new device arrays each call,
        which an iteration may donate).

        Args:
            state: The members' stacked ``TrainState``.
            fresh: A fresh state: its ``beta`` becomes each member's ``kl_init_penalty``,
                as a run of its config starts.
        """
        hparams = jax.tree.map(jnp.asarray, self.values)
        if fresh:
            state = state.replace(beta=hparams.kl_init_penalty)
        return state.replace(hparams=hparams)

    @staticmethod
    def detach(state: Any) -> Any:
        """One member's state as a run of its config holds it (``hparams=None``)."""
        return state.replace(hparams=None)


def program_key(config: PPOConfig) -> tuple[Any, ...]:
    """What members of one program share: every field but ``MEMBER_FIELDS`` and the seed, and
    which of ``MEMBER_FIELDS`` are None."""
    shared = tuple(
        (f.name, repr(getattr(config, f.name)))
        for f in dataclasses.fields(config)
        if f.name not in MEMBER_FIELDS and f.name != "seed"
    )
    return (*shared, tuple(getattr(config, name) is None for name in MEMBER_FIELDS))
