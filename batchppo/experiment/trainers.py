"""What the experiment loop trains with: the trainer protocol, its factory, the run's keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import jax

from batchppo.algorithms.registry import algorithm_of
from batchppo.algorithms.run_config import RunConfig
from batchppo.experiment.errors import UserError

if TYPE_CHECKING:
    from batchppo.algorithms.networks.networks import NetworkFactory

# What each of a run's PRNG keys is for (``host_key(seed, purpose, ...)``): init, env resets of
# training, training evals, and the evaluations of a saved run (``batchppo evaluate``), which
# therefore never repeat a training eval's episodes.
INIT_KEY, SIM_KEY, EVAL_KEY, EVALUATE_RUN_KEY = 0, 1, 2, 3


class TrainerLike(Protocol):
    """What the loop needs of a trainer (``batchppo.algorithms.training.trainer.Trainer``).

    ``iteration`` reports the same metrics every iteration, ``EPISODE_METRICS`` among them.
    """

    def init(self, key: jax.Array) -> Any: ...
    def init_sim(self, train_state: Any, key: jax.Array) -> Any: ...
    def iteration(self, train_state: Any, sim_state: Any) -> tuple[Any, Any, dict]: ...
    def evaluate(
        self,
        train_state: Any,
        num_episodes: int,
        key: jax.Array,
        task_metrics: bool = False,
        sample: bool = False,
    ) -> dict: ...
    def policy(self, train_state: Any, deterministic: bool = True) -> Callable: ...
    def close(self) -> None: ...


TrainerFactory = Callable[[RunConfig], TrainerLike]


def default_trainer_factory(config: RunConfig) -> TrainerLike:
    """Builds the trainer of ``config``'s algorithm
    ([`batchppo.algorithms.registry`][batchppo.algorithms.registry])."""
    return algorithm_of(config).trainer(config)


def network_trainer_factory(network_factory: NetworkFactory | None) -> TrainerFactory:
    """Builds the trainer of ``config``'s algorithm with its network built by
    ``network_factory`` (``batchppo.train(network_factory=...)``); None:
    ``default_trainer_factory``."""
    if network_factory is None:
        return default_trainer_factory

    def factory(config: RunConfig) -> TrainerLike:
        return algorithm_of(config).trainer(config, network_factory=network_factory)

    return factory


def build_trainer(factory: TrainerFactory | None, config: RunConfig) -> Any:
    """Builds the trainer of ``config`` with ``factory`` (None: ``default_trainer_factory``).

    Raises:
        UserError: The env needs a dependency that is not installed (e.g. MuJoCo).
    """
    import gymnasium

    try:
        return (factory or default_trainer_factory)(config)
    except gymnasium.error.DependencyNotInstalled as error:
        # E.g. MuJoCo envs without the extra: a set-up problem, not a bug.
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"cannot build {config.env!r}: {first}") from None
