"""Host-side environments: Gymnasium envs batched in worker processes over shared memory.

* [`BatchEnv`][batchppo.envs.BatchEnv]: a ``gymnasium.vector.VectorEnv`` stepping envs in worker
  processes, a drop-in for ``AsyncVectorEnv`` (all autoreset modes, Gymnasium's ``NEXT_STEP`` by
  default, Dict/Tuple spaces; in same-step mode a dense ``final_obs`` and the ``step_arrays`` fast
  path), its processes and fault handling set by [`WorkerOptions`][batchppo.envs.WorkerOptions]
  (workers, ``step_in_parent``, ``step_timeout``; with ``max_restarts``, envs that crash are
  rebuilt and their episodes truncated); [`RayWorkerOptions`][batchppo.envs.RayWorkerOptions]
  extends them for [`RayBatchEnv`][batchppo.envs.adapters.ray_env.RayBatchEnv]'s Ray actors.
* [`make`][batchppo.envs.make.make] / [`make_env_fn`][batchppo.envs.make_env_fn]: the standard
  wrapper stack and the batch env; ``batch_transform``: that stack as a
  [`BatchTransform`][batchppo.envs.BatchTransform], which a ``BatchEnv`` applies to all the envs of
  a worker at once (what ``make`` does); [`register_vector_env`][batchppo.envs.register_vector_env]:
  an id whose ``gymnasium.make_vec`` builds ``make``'s env.
* ``batchppo.envs.stack.wrappers``: the wrappers Gymnasium lacks.
* [`AtariStack`][batchppo.envs.AtariStack] (``batchppo.envs.stack.atari``): the standard Atari
  preprocessing, run in the workers by ``make(env_id, n, preprocess="atari")``.
"""

from batchppo.core.worker_options import RayWorkerOptions, WorkerOptions
from batchppo.envs.async_compat import InvalidArgumentError
from batchppo.envs.batch_env import BatchEnv
from batchppo.envs.errors import EnvTimeoutError, SpaceMismatchError, WorkerDiedError, WorkerError
from batchppo.envs.make import batch_transform, make, make_env_fn, register_vector_env
from batchppo.envs.stack.atari import AtariStack
from batchppo.envs.stack.batch_transform import BatchTransform
from batchppo.envs.stack.wrappers import (
    ActionRepeat,
    ConvertTo32Bit,
    FrameDelta,
    FrameHistory,
    RandomStart,
    RangeNormalize,
)
from batchppo.envs.workers.call_state import BatchState
from batchppo.envs.workers.restarts import EnvRestartWarning

__all__ = [
    "ActionRepeat",
    "AtariStack",
    "BatchEnv",
    "BatchState",
    "BatchTransform",
    "ConvertTo32Bit",
    "EnvRestartWarning",
    "EnvTimeoutError",
    "FrameDelta",
    "FrameHistory",
    "InvalidArgumentError",
    "RandomStart",
    "RangeNormalize",
    "RayWorkerOptions",
    "SpaceMismatchError",
    "WorkerDiedError",
    "WorkerError",
    "WorkerOptions",
    "batch_transform",
    "make",
    "make_env_fn",
    "register_vector_env",
]
