"""Worker-process plumbing of [`BatchEnv`][batchppo.envs.BatchEnv]: the main script and semaphores.

**The main script.** Forkserver and spawn children prepare ``__main__`` before they unpickle
their process object: they run the parent's main script again (as ``__mp_main__``) so that what
it defines can be unpickled. A script that builds a BatchEnv at its top level, outside
``if __name__ == "__main__":``, would then build another one inside every worker, which
multiprocessing refuses while the worker bootstraps, and the worker dies. For such a script the
workers skip that preparation: everything a worker needs travels in its pickled arguments (the
env functions with cloudpickle, which ships what ``__main__`` defines by value). Workers of a
guarded script still import it, so that what its top level defines (a registered env id, say)
exists in the workers, as with Gymnasium's ``AsyncVectorEnv``.

**Semaphores.** multiprocessing names its semaphores so that forkserver and spawn children can open
them, and unlinks the names when the parent exits normally. A parent that dies otherwise (SIGKILL,
``os._exit`` in an env it steps) leaves them to the resource tracker, which warns about leaked
semaphores. ``unlink_semaphores`` removes the names as soon as every worker has opened them; the
semaphores themselves live on until the last process closes them.
"""

from __future__ import annotations

import ast
import functools
import os
import signal
import sys
import threading
import tokenize
import types
from collections.abc import Iterable
from multiprocessing import context as mp_context
from multiprocessing import forkserver
from multiprocessing import spawn as mp_spawn
from multiprocessing import synchronize as mp_synchronize
from multiprocessing import util as mp_util
from typing import Any

__all__ = [
    "available_cpus",
    "main_would_rerun_caller",
    "process_class",
    "start_forkserver",
    "unlink_semaphores",
]


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start_forkserver() -> None:
    """Starts multiprocessing's fork server, unless it runs, with SIGTERM ignored.

    The server is in the caller's process group, where ``timeout``, Slurm or systemd send
    SIGTERM to stop a job, and multiprocessing's server ignores SIGINT only: killed by that
    SIGTERM, it closes the status pipes of the workers it forked, and multiprocessing then
    reports each living worker as exited with code 255, so that the batch env broke where a
    run should stop and save. Started with SIGTERM ignored (inherited across its ``exec``),
    it lives on until the parent closes it; SIGTERM is blocked in the caller meanwhile, so
    that one arriving then is delivered afterwards, not lost. Only the main thread can set
    handlers; from another thread the server starts as multiprocessing starts it.
    """
    if threading.current_thread() is not threading.main_thread():
        forkserver.ensure_running()
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        if previous is not None:  # None: a handler set outside Python, left to SIG_IGN's place
            signal.signal(signal.SIGTERM, previous)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


_FIX = 'put the code that builds the BatchEnv under `if __name__ == "__main__":`'


def main_would_rerun_caller() -> bool:
    """Whether a worker that prepares ``__main__`` would run the code now building a BatchEnv.

    True when the main script's top-level code is running (the BatchEnv is being built by it,
    directly or through calls) at a line outside every ``if __name__ == "__main__":`` block.
    False for ``python -c``, the REPL, notebooks and packages' ``__main__`` modules, which
    multiprocessing never runs again.

    Returns:
        True when the workers must be started without preparing ``__main__``.
    """
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if spec_name == "__main__" or spec_name.endswith(".__main__"):
        return False
    path = getattr(main, "__file__", None)
    if path is None:
        return bool(spec_name)  # a module run without readable source: do not risk it
    line = None
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    try:
        guards = _guard_lines(os.path.abspath(path), os.stat(path).st_mtime_ns)
    except OSError:
        return True
    if guards is None:
        return True
    if line is None:  # not called from the script's top level (another thread, atexit)
        return not guards
    return not any(first <= line <= last for first, last in guards)


@functools.lru_cache(maxsize=8)
def _guard_lines(path: str, mtime_ns: int) -> tuple[tuple[int, int], ...] | None:
    """Line ranges of the bodies of ``if __name__ == "__main__":`` blocks; None: unreadable."""
    del mtime_ns  # part of the cache key only
    try:
        with tokenize.open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    return tuple(
        (node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_main_test(node.test)
    )


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    if not isinstance(test.ops[0], ast.Eq):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
        isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
    )


def process_class(ctx: Any, import_main: bool) -> type:
    """The process class for the workers of ``ctx`` (a forkserver or spawn context).

    Args:
        ctx: The multiprocessing context.
        import_main: Whether the workers run the main script first (multiprocessing's default).

    Returns:
        ``ctx.Process``, or a subclass that leaves ``__main__`` alone.

    Raises:
        RuntimeError: ``import_main`` is False and this Python's multiprocessing cannot start
            a process without it (a one-line message naming the fix).
    """
    if import_main:
        return ctx.Process
    method = ctx.get_start_method()
    _popen_without_main(method)  # fail here, at construction, rather than in the worker
    return ForkServerProcessWithoutMain if method == "forkserver" else SpawnProcessWithoutMain


class _SpawnWithoutMain:
    """``multiprocessing.spawn`` whose preparation data leaves ``__main__`` alone."""

    def __getattr__(self, name: str) -> Any:
        return getattr(mp_spawn, name)

    @staticmethod
    def get_preparation_data(name: str) -> dict[str, Any]:
        data = mp_spawn.get_preparation_data(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data


@functools.lru_cache(maxsize=2)
def _popen_without_main(method: str) -> type:
    """The ``multiprocessing`` Popen for ``method`` with its launch reading ``_SpawnWithoutMain``.

    The launch function is the standard library's own, run over a copy of its module's
    globals in which ``spawn`` is replaced: no process-wide patching, and no copy of code that
    changes between Python versions.
    """
    if method == "forkserver":
        from multiprocessing import popen_forkserver as module
    elif method == "spawn":
        from multiprocessing import popen_spawn_posix as module
    else:
        raise ValueError(f"no worker process class for start method {method!r}")
    launch = getattr(module.Popen, "_launch", None)
    if not isinstance(launch, types.FunctionType) or "spawn" not in launch.__code__.co_names:
        raise RuntimeError(
            f"This Python's multiprocessing would run the main script in every worker; {_FIX}."
        )
    patched = types.FunctionType(
        launch.__code__,
        {**vars(module), "spawn": _SpawnWithoutMain()},
        launch.__name__,
        launch.__defaults__,
        launch.__closure__,
    )
    return type("PopenWithoutMain", (module.Popen,), {"_launch": patched})


class ForkServerProcessWithoutMain(mp_context.ForkServerProcess):
    """A forkserver process that does not run the main script before its target."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 (multiprocessing's name)
        return _popen_without_main("forkserver")(process_obj)


class SpawnProcessWithoutMain(mp_context.SpawnProcess):
    """A spawned process that does not run the main script before its target."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:  # noqa: N802 (multiprocessing's name)
        return _popen_without_main("spawn")(process_obj)


def unlink_semaphores(semaphores: Iterable[Any]) -> None:
    """Removes the names of ``semaphores`` once every process that needs them has opened them.

    Runs multiprocessing's own finaliser of each semaphore (unlink the name, tell the resource
    tracker), so nothing is left to unlink at exit, however the process ends.

    Args:
        semaphores: ``multiprocessing`` semaphores already opened by every worker.
    """
    names = {getattr(s._semlock, "name", None) for s in semaphores} - {None}
    if not names:
        return
    cleanup = mp_synchronize.SemLock._cleanup
    for finalizer in list(mp_util._finalizer_registry.values()):
        args = getattr(finalizer, "_args", None)
        if getattr(finalizer, "_callback", None) is cleanup and args and args[0] in names:
            finalizer()
