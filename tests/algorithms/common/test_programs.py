"""Program: jitted on first use, precompiled in the background, and its fallbacks."""

from concurrent.futures import Executor, Future

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.algorithms.common.programs import Compiler, Program, iteration_donation


class _FailingExecutor(Executor):
    """Every compilation it is given fails, as one that ran out of memory."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        future.set_exception(RuntimeError("out of memory while compiling"))
        return future


def _double() -> jax.stages.Wrapped:
    return jax.jit(lambda x: 2 * x)


def test_a_program_is_jitted_on_first_use():
    program = Program("double", _double)
    assert program.stage is None
    np.testing.assert_array_equal(program(jnp.arange(3.0)), [0.0, 2.0, 4.0])
    assert isinstance(program.stage, jax.stages.Wrapped)


def test_a_precompiled_program_runs_its_compiled_build():
    compiler = Compiler()
    program = Program("double", _double)
    out_info = program.precompile(compiler, jax.ShapeDtypeStruct((3,), jnp.float32))
    assert out_info.shape == (3,) and isinstance(program.stage, Future)
    np.testing.assert_array_equal(program(jnp.arange(3.0)), [0.0, 2.0, 4.0])
    assert isinstance(program.stage, jax.stages.Compiled)
    compiler.shutdown()


def test_a_failed_background_compilation_compiles_again_with_a_warning():
    program = Program("double", _double, owner="Trainer")
    program.precompile(Compiler(_FailingExecutor()), jnp.ones(3))
    with pytest.warns(RuntimeWarning, match="Trainer: .*'double'.*background compilation failed"):
        out = program(jnp.ones(3))
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])
    assert isinstance(program.stage, jax.stages.Wrapped)


def test_inputs_a_precompiled_program_does_not_take_fall_back_with_a_warning():
    compiler = Compiler()
    program = Program("double", _double)
    program.precompile(compiler, jax.ShapeDtypeStruct((3,), jnp.float32))
    with pytest.warns(RuntimeWarning, match="'double'.*does not take these inputs"):
        out = program(jnp.ones(4, jnp.int32))
    np.testing.assert_array_equal(out, [2, 2, 2, 2])
    assert isinstance(program.stage, jax.stages.Wrapped)
    compiler.shutdown()


def test_iteration_donation_keeps_the_train_state_of_host_envs():
    assert iteration_donation(fused=True) == (0, 1)
    assert iteration_donation(fused=False) == (1,)
