"""Program: jitted on first use, precompiled in the background, and its fallbacks."""

import threading
import types
from concurrent.futures import Executor, Future

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.algorithms.training.programs import (
    COMPILER_OPTIONS,
    XLA_CONVOLUTIONS_OPTIONS,
    Compiler,
    Program,
    env_check,
    env_compiler_options,
    hot_compiler_options,
    iteration_donation,
    resolve_host_loop,
    resolve_xla_convolutions,
)
from batchppo.testing import DictCueEnv, ImageCueEnv


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


def test_compilations_after_earlier_ones_start_once_those_have_ended_even_failed():
    compiler, gate, ran = Compiler(), threading.Event(), []

    def earlier():
        gate.wait()
        raise RuntimeError("out of memory while compiling")

    first = compiler.submit(earlier)
    try:
        with compiler.after_earlier():
            later = compiler.submit(lambda: ran.append("later") or "compiled")
        alone = compiler.submit(lambda: "alone")  # outside the block: starts at once
        assert alone.result() == "alone" and ran == []  # `earlier` cannot end before the gate
    finally:
        gate.set()  # a failed assertion must not leave a thread waiting forever
    assert later.result() == "compiled" and ran == ["later"]
    assert isinstance(first.exception(), RuntimeError)
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


def _checking(seen, refuse=False):
    """A program's ``check`` that records what it is given and refuses where asked."""

    def check(name, lowered_hlo, compiled_hlo):
        seen.append((name, "multiply" in lowered_hlo, "ENTRY" in compiled_hlo))
        if refuse:
            raise RuntimeError(f"{name} refused")

    return check


@pytest.mark.parametrize("precompiled", [False, True])
def test_a_checked_program_is_compiled_ahead_and_checked_before_its_first_call(precompiled):
    seen, compiler = [], Compiler()
    program = Program("double", _double, check=_checking(seen))
    if precompiled:
        program.precompile(compiler, jax.ShapeDtypeStruct((3,), jnp.float32))
        assert seen == []  # checked where it is first called
    np.testing.assert_array_equal(program(jnp.ones(3)), [2.0, 2.0, 2.0])
    program(jnp.ones(3))
    assert seen == [("double", True, True)]  # its HLO as traced and as compiled, once
    assert isinstance(program.stage, jax.stages.Compiled)
    compiler.shutdown()


@pytest.mark.parametrize("precompiled", [False, True])
def test_a_program_its_check_refuses_never_runs(precompiled):
    seen, compiler = [], Compiler()
    program = Program("double", _double, check=_checking(seen, refuse=True))
    if precompiled:
        program.precompile(compiler, jnp.ones(3))
    for _ in range(2):  # refused at every call
        with pytest.raises(RuntimeError, match=r"^double refused$"):
            program(jnp.ones(3))
    assert len(seen) == 2
    compiler.shutdown()


def test_an_env_adds_its_compiler_options_and_its_check():
    options = {"xla_backend_optimization_level": 1}
    assert env_compiler_options(options, object()) is options and env_check(object()) is None
    env = types.SimpleNamespace(compiler_options={"a": False}, check_compiled=print)
    assert env_compiler_options(options, env) == {**options, "a": False}
    assert env_check(env) is print


def test_iteration_donation_keeps_the_train_state_of_host_envs():
    assert iteration_donation(fused=True) == (0, 1)
    assert iteration_donation(fused=False) == (1,)


def test_xla_convolutions_are_kept_for_image_observations_on_the_cpu_and_set_explicitly():
    image, vector = ImageCueEnv(4).spec.obs_space, DictCueEnv(4).spec.obs_space
    assert jax.default_backend() == "cpu"  # the tests' platform (JAX_PLATFORMS=cpu in CI)
    assert resolve_xla_convolutions(None, image, "pixels") is True
    assert resolve_xla_convolutions(None, image) is False  # 6x6 uint8: a grid of codes
    assert resolve_xla_convolutions(None, vector) is False
    assert resolve_xla_convolutions(True, vector) is True
    assert resolve_xla_convolutions(False, image, "pixels") is False


def test_host_loop_is_the_default_for_host_envs_on_an_accelerator_only(monkeypatch):
    assert resolve_host_loop(None, host=True) is False  # the CPU: the in-graph rollout
    assert resolve_host_loop(True, host=True) is True
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert resolve_host_loop(None, host=True) is True
    assert resolve_host_loop(None, host=False) is False  # pure-JAX envs fuse
    assert resolve_host_loop(False, host=True) is False  # as set


def test_the_hot_options_keep_convolutions_on_xla_only_where_asked():
    assert hot_compiler_options(False) == COMPILER_OPTIONS
    assert hot_compiler_options(True) == {**COMPILER_OPTIONS, **XLA_CONVOLUTIONS_OPTIONS}


def test_the_option_keeps_a_convolution_out_of_ynnpack():
    # By default XLA may hand an Atari-sized convolution (the Nature CNN's first layer) to
    # YNNPACK, as the root of a fused computation that YNNPACK runs; on the AVX-512 CPU CI
    # ran on it does, and where its cost model declines, the option changes nothing. With
    # the option every convolution stays a plain XLA instruction. An option XLA did not know,
    # or a value it refused, would raise here.
    def conv_then_dense(x, kernel, weights):
        y = jax.lax.conv_general_dilated(x, kernel, (4, 4), "VALID")  # (8, 32, 20, 20)
        return y.reshape(8, -1) @ weights

    args = (jnp.ones((8, 4, 84, 84)), jnp.ones((32, 4, 8, 8)), jnp.ones((32 * 20 * 20, 5)))
    options = hot_compiler_options(True)
    compiled = jax.jit(conv_then_dense, compiler_options=options).lower(*args).compile()
    np.testing.assert_array_equal(compiled(*args), np.full((8, 5), 12800 * 256.0))
    convolutions = [line.split()[0] for line in compiled.as_text().splitlines()
                    if " convolution(" in line]  # fmt: skip
    assert convolutions and "ROOT" not in convolutions  # none is a fused computation's root
