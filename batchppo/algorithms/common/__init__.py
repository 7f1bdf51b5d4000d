"""What every algorithm's trainer shares: compiled programs, the driver, evaluation, deployment.

* :mod:`~batchppo.algorithms.common.programs`: XLA options, the compilation cache, and
  :class:`~batchppo.algorithms.common.programs.Program`, one compiled program that is jitted
  on first use or compiled ahead in a background thread.
* :mod:`~batchppo.algorithms.common.evaluation`: :class:`Evaluator` (the mean-action policy
  in a separate eval env) and :class:`HostPolicy` (``obs -> action`` on the host).
* :mod:`~batchppo.algorithms.common.trainer`: :class:`Trainer`, the object API the experiment
  loop drives, over any agent of the :class:`~batchppo.algorithms.common.trainer.Agent`
  protocol.
"""
