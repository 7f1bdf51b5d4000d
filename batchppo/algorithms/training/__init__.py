"""What trains any agent: the Trainer over any agent, compiled programs, evaluation, deployment.

* ``trainer``: ``Trainer``, the object API the experiment's driver iterates, over any agent of the
  [`Agent`][batchppo.algorithms.training.trainer.Agent] protocol.
* ``stacked_seeds``: ``SeedsTrainer``, several seeds of one config stacked in one program, over
  any agent.
* ``programs``: XLA options, the compilation cache, and ``Program``, one compiled program that is
  jitted on first use or compiled ahead in a background thread.
* ``sharding``: the device mesh of a data-parallel learner.
* ``shuffle``: minibatch permutations.
* ``acting``: ``ActorCriticActing``, the acting functions of an agent over the networks and
  streaming observation statistics (``init_sim``, ``acting_params``, ``initial_carry``,
  ``normalize_obs``, ``mode_fn``), PPO's and A2C's.
* ``evaluation``: ``Evaluator`` (the mean-action policy in a separate eval env) and ``HostPolicy``
  (``obs -> action`` on the host).
* ``episodes``: ``EndedEpisodes``, every training episode that ended in an iteration, as the
  trainers hand them to the host.
"""
