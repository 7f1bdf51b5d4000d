"""Compiled programs: XLA options, the persistent compilation cache, and ahead-of-time builds.

A trainer holds one ``Program`` per compiled function it runs (init, env reset, the training
iteration, evaluation). A program is jitted on first use, as usual; or ``Program.precompile`` lowers
it at once and compiles it in a background thread of a ``Compiler``, so that the programs of a run
compile side by side, overlapping each other's lowering (on CPU a cold start is mostly XLA
compilation). Calling a program waits for its own compilation.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from typing import Any

import jax

from batchppo.core import spaces

COMPILER_OPTIONS = {"xla_backend_optimization_level": 1}
"""XLA options of the hot programs (the training iteration): LLVM optimisation level 1
instead of 2 compiles the training iteration faster at an unchanged run time (the matmuls are
library calls either way)."""

COLD_COMPILER_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
"""XLA options on CPU of the programs that run once or rarely (init, env resets, evaluation):
no LLVM optimisation and XLA's older, quicker fusion emitters. Their compilation at start-up
takes CPU from the training iteration compiling beside them, and they run too rarely for
their slower code to matter (bench/train.py measures start-up)."""


XLA_CONVOLUTIONS_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}
"""XLA's CPU option that lists the ops it hands to the YNNPACK library: dots only (as a flag,
``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=dot``). By default the XLA of jaxlib 0.10
hands it convolutions too, and a CNN's gradient convolutions (dilated windows) then run far
more slowly than with XLA's own kernels (a Nature-CNN gradient step on Atari frames:
bench/investigations/conv.py measures both). See ``RunConfig.xla_convolutions``."""


def resolve_xla_convolutions(
    xla_convolutions: bool | None, obs_space: Any, image_encoding: str = "auto"
) -> bool:
    """Whether the hot programs keep convolutions on XLA's own kernels
    (``XLA_CONVOLUTIONS_OPTIONS``): ``xla_convolutions`` as set, or where None, whether an
    observation leaf is an image (a CNN torso); never off the CPU, where the option has no
    meaning."""
    if jax.default_backend() != "cpu":
        return False
    if xla_convolutions is None:
        return spaces.has_cnn_image(obs_space, image_encoding)
    return bool(xla_convolutions)


def resolve_host_loop(host_loop: bool | None, host: bool) -> bool:
    """Whether a trainer drives its host envs from a Python loop around the compiled policy
    (``RunConfig.host_loop``): as set, or where None, for host envs on an accelerator, where a
    host callback inside the compiled iteration costs more than the loop's one compiled call
    a step. On the CPU the in-graph rollout is the default: there it trains faster than the
    loop (``bench/train.py`` measures both; docs/benchmarks.md, "Speed on the GPU" and "Speed
    on the CPU")."""
    if host_loop is None:
        return host and jax.default_backend() != "cpu"
    return bool(host_loop)


def hot_compiler_options(xla_convolutions: bool) -> dict[str, Any]:
    """XLA options of the hot programs (the training iteration, the update, the host loop's policy
    step): ``COMPILER_OPTIONS``, with ``XLA_CONVOLUTIONS_OPTIONS`` where ``xla_convolutions`` (see
    ``resolve_xla_convolutions``)."""
    if xla_convolutions:
        return {**COMPILER_OPTIONS, **XLA_CONVOLUTIONS_OPTIONS}
    return COMPILER_OPTIONS


def env_compiler_options(options: dict[str, Any], env: Any) -> dict[str, Any]:
    """``options`` with the XLA options that ``env`` asks of the programs that step it (its
    ``compiler_options``, e.g. ``AleFusedEnv``'s on a GPU); ``options`` where it asks none."""
    own = getattr(env, "compiler_options", None)
    return {**options, **own} if own else options


def env_check(env: Any) -> Callable[[str, str, str], None] | None:
    """The check that ``env`` runs on each compiled program that steps it (its
    ``check_compiled(program, lowered_hlo, compiled_hlo)``, see ``Program``); None where it
    has none."""
    return getattr(env, "check_compiled", None)


def cold_compiler_options() -> dict[str, Any]:
    """XLA options of the programs that run rarely: compiled fast on CPU, as usual elsewhere."""
    return COLD_COMPILER_OPTIONS if jax.default_backend() == "cpu" else COMPILER_OPTIONS


def enable_compilation_cache(path: str | None = None) -> str:
    """Turns on JAX's persistent compilation cache for this process.

    Later runs of the same config then skip XLA compilation (seconds on CPU).

    Args:
        path: Cache directory; default ``$BATCHPPO_CACHE_DIR`` or ``~/.cache/batchppo/jax``.

    Returns:
        The directory used.
    """
    path = (
        path or os.environ.get("BATCHPPO_CACHE_DIR") or os.path.expanduser("~/.cache/batchppo/jax")
    )
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path


def iteration_donation(fused: bool) -> tuple[int, ...]:
    """The arguments of a compiled ``iteration(train_state, sim_state)`` that it donates.

    Over pure-JAX envs both. Host envs can fail mid-rollout, and the train state they were
    given must survive the failed call (the experiment loop checkpoints it): the sim state
    only.
    """
    return (0, 1) if fused else (1,)


class Compiler:
    """The background threads that compile a trainer's precompiled programs.

    Args:
        executor: Runs the compilations; default a thread pool made on first use (tests pass
            their own).
    """

    def __init__(self, executor: Executor | None = None) -> None:
        self._executor = executor
        self._submitted: list[Future] = []
        self._after: tuple[Future, ...] = ()  # what compilations submitted now wait for

    def submit(self, compile_fn: Callable[[], Any]) -> Future:
        """Starts ``compile_fn`` in the background (inside ``after_earlier``, once the
        compilations submitted before have ended); its Future."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(thread_name_prefix="batchppo-compile")
        if self._after:
            compile_fn = functools.partial(_compile_after, self._after, compile_fn)
        future = self._executor.submit(compile_fn)
        self._submitted.append(future)
        return future

    @contextlib.contextmanager
    def after_earlier(self) -> Iterator[None]:
        """Within it, the compilations submitted start only once every compilation submitted
        before it has ended (the eval programs after the training iteration, which the first
        iteration waits on): they take no CPU from those."""
        self._after = tuple(self._submitted)
        try:
            yield
        finally:
            self._after = ()

    def shutdown(self) -> None:
        """Drops the compilations that have not started; running ones finish unwatched."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        self._submitted = []


def _compile_after(earlier: Sequence[Future], compile_fn: Callable[[], Any]) -> Any:
    """``compile_fn()`` once every one of ``earlier`` has ended (failed or cancelled too)."""
    wait(earlier)
    return compile_fn()


class Program:
    """One compiled program: its jitted function, or an AOT build made by ``precompile``.

    Args:
        name: Names the program in warnings (e.g. ``iterations(2)``).
        build: Returns the jitted function (``jax.jit(...)``); called when the program is first
            needed, and again for a foreground compilation after a failed precompiled one.
        owner: Names the program's owner in warnings (e.g. ``Trainer``).
        check: ``check(name, lowered_hlo, compiled_hlo)``, run on the HLO text of the program
            as traced and as compiled before its first call, raising where the compiled
            program is wrong (``env_check``); the program is then always compiled ahead of
            time, so that its compiled text exists. None: no check.
    """

    def __init__(
        self,
        name: str,
        build: Callable[[], Any],
        owner: str = "Trainer",
        check: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.name = name
        self.owner = owner
        self._build = build
        self._check = check
        self._lowered: Any = None  # the precompiled program's lowering, for ``check``
        # The jitted function, a compiled one, or a Future of one while it compiles.
        self._stage: Callable | Future | None = None

    @property
    def stage(self) -> Callable | Future | None:
        """What runs the next call: None (not built yet), a ``Future`` (compiling in the
        background), a ``jax.stages.Compiled`` (precompiled) or a jitted function."""
        return self._stage

    def precompile(self, compiler: Compiler, *args: Any) -> Any:
        """Lowers the program for ``args`` (arrays or shapes) now and compiles it in the
        background (unless it was built already).

        Returns:
            The shapes of its outputs (``out_info``), to lower the programs that take them.
        """
        lowered = self._build().lower(*args)
        if self._stage is None:
            self._stage = compiler.submit(lowered.compile)
            self._lowered = lowered
        return lowered.out_info

    def __call__(self, *args: Any) -> Any:
        """Runs the program: precompiled when ``precompile`` built it, else jitted.

        A precompiled program that cannot be used (its background compilation failed, or it
        does not take these inputs) is replaced by the jitted function, which compiles again
        in the foreground; a ``RuntimeWarning`` says so, as the compilation it was to save is
        then paid on the critical path.
        """
        program = self._stage
        if isinstance(program, Future):
            try:
                program = program.result()
            except Exception as error:  # compiled again below, in the foreground
                self._warn(f"its background compilation failed: {error!r}")
                program = None
            if program is not None:
                self._checked(self._lowered, program)
            self._lowered = None
            self._stage = program = program or self._foreground(args)
        elif program is None:
            self._stage = program = self._foreground(args)
        try:
            return program(*args)
        except TypeError as error:
            # An AOT program only takes the exact input types it was compiled for (a state
            # restored with other dtypes, say): the jitted function takes anything.
            if not isinstance(program, jax.stages.Compiled):
                raise
            self._warn(f"it does not take these inputs: {error}")
            self._stage = program = self._foreground(args)
            return program(*args)

    def _foreground(self, args: tuple[Any, ...]) -> Any:
        """The program built now: the jitted function, or with a ``check`` the checked
        compilation for ``args``."""
        if self._check is None:
            return self._build()
        lowered = self._build().lower(*args)
        return self._checked(lowered, lowered.compile())

    def _checked(self, lowered: Any, compiled: Any) -> Any:
        """``compiled`` once ``check`` passed on it (where there is one)."""
        if self._check is not None:
            self._check(self.name, lowered.as_text(dialect="hlo"), compiled.as_text())
        return compiled

    def _warn(self, why: str) -> None:
        """Warns that this precompiled program is compiled again in the foreground."""
        warnings.warn(
            f"{self.owner}: the precompiled program {self.name!r} is compiled again on first "
            f"use: {why}",
            RuntimeWarning,
            stacklevel=4,
        )
