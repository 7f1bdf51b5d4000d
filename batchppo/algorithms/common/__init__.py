"""What every algorithm's trainer shares: compiled programs, the driver, evaluation, deployment.

* :mod:`~batchppo.algorithms.common.programs`: XLA options, the compilation cache, and
  :class:`~batchppo.algorithms.common.programs.Program`, one compiled program that is jitted
  on first use or compiled ahead in a background thread.
* :mod:`~batchppo.algorithms.common.evaluation`: :class:`Evaluator` (the mean-action policy
  in a separate eval env) and :class:`HostPolicy` (``obs -> action`` on the host).
* :mod:`~batchppo.algorithms.common.trainer`: :class:`Trainer`, the object API the experiment
  loop drives, over any agent of the :class:`~batchppo.algorithms.common.trainer.Agent`
  protocol.
* :mod:`~batchppo.algorithms.common.seeds`: :class:`SeedsTrainer`, several seeds of one
  config in one program, over any agent.
* :mod:`~batchppo.algorithms.common.sharding`: the device mesh of a data-parallel learner.
* :mod:`~batchppo.algorithms.common.run_config`: :class:`RunConfig`, the run-level fields
  every algorithm's config subclasses (imports no JAX).
* :mod:`~batchppo.algorithms.common.networks`: the policy and value networks
  (:func:`make_network`, from any config with the fields of :class:`NetworkConfig`).
* :mod:`~batchppo.algorithms.common.acting`: :class:`ActorCriticActing`, the acting functions
  of an agent over those networks and streaming observation statistics (``init_sim``,
  ``acting_params``, ``initial_carry``, ``normalize_obs``, ``mode_fn``), PPO's and A2C's.
"""
