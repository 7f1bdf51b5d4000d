"""A standalone reproduction, for XLA's maintainers, of the GPU compiler's abort on an ordered
host callback whose scan stacks uint8 frames (the ``frames`` form of
``bench/investigations/callback_repro.py``, which aborted on an H200 with jaxlib 0.11.2;
docs/benchmarks-journal.md, 11i).

Run on a GPU: ``python bench/investigations/xla_token_repro.py`` compiles the program with
``ordered=True`` (aborted there: ``shape_util.cc:757 Check failed: shape.IsArray() ||
shape.IsTuple()`` in ``GpuHloCostAnalysis`` under ``PriorityFusion``), ``--unordered`` the same
program without the token (compiled there). Needs only JAX and NumPy; prints ``compiled`` and
the device.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

ENVS, FRAME, STEPS = 8, (84, 84, 4), 16


def host_step(action):
    """A fake batch of Atari steps: frames, rewards, terminations, truncations, final frames."""
    obs = np.full((ENVS, *FRAME), int(np.asarray(action).sum()) % 255, np.uint8)
    flags = np.zeros(ENVS, np.bool_)
    return obs, (np.asarray(action) % 2).astype(np.float32), flags, flags, obs.copy()


def main(ordered: bool) -> None:
    frames = jax.ShapeDtypeStruct((ENVS, *FRAME), np.uint8)
    flags = jax.ShapeDtypeStruct((ENVS,), np.bool_)
    structs = (frames, jax.ShapeDtypeStruct((ENVS,), np.float32), flags, flags, frames)

    def body(carry, _):
        head, obs = carry
        action = jnp.argmax(obs.astype(jnp.float32).mean(axis=(1, 2)) @ head, axis=-1)
        next_obs, reward, term, trunc, final = io_callback(
            host_step, structs, action.astype(jnp.int32), ordered=ordered
        )
        return (head, next_obs), (reward, term | trunc, trunc, obs, final)  # frames stacked

    def rollout(head):
        return jax.lax.scan(body, (head, jnp.zeros(frames.shape, np.uint8)), None, STEPS)[1]

    head = jnp.linspace(-1.0, 1.0, FRAME[-1] * 4, dtype=jnp.float32).reshape(FRAME[-1], 4)
    jax.jit(rollout).lower(head).compile()
    print("compiled", "ordered" if ordered else "unordered", "on", jax.devices()[0])


if __name__ == "__main__":
    main(ordered="--unordered" not in sys.argv[1:])
