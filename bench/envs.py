"""Batch env throughput, side by side: BatchEnv vs Gymnasium vs EnvPool vs the limit.

Steps per second (env transitions summed over the batch) with random actions, for each env id
and batch size N:

* ``single``: one ``gymnasium.make(env_id)`` env stepped in a loop; ``limit`` = cores x that.
* ``parallel``: ``cores`` processes, each stepping its own single env in a loop, at the same
  time, with nothing shared: what the cores reach together when no process ever waits for
  another. ``limit`` assumes each core steps as fast as one alone; ``parallel`` shows what
  the machine's cores (hyperthreads, a VM's shared host) really give together.
* ``sync``: ``gymnasium.vector.SyncVectorEnv``.
* ``async``: ``gymnasium.vector.AsyncVectorEnv(shared_memory=True)``.
* ``batch``: ``batchppo.envs.BatchEnv.step`` (with infos); ``batch_arr``:
  ``BatchEnv.step_arrays`` (no infos, ``copy=False``: the path of the in-graph adapter).
* ``envpool``: EnvPool's own C++ env of the same id, when envpool is installed.
* ``ale_vector``: ale-py's own vector env (``ale_py.vector_env.AtariVectorEnv``, C++ threads),
  for ``ALE/`` ids.
* ``make``: ``batchppo.envs.make(env_id, N)``, the standard stack (range normalisation, action
  clipping, float32, the finiteness check), through ``step``; ``make_arr``: the same through
  ``step_arrays`` with ``copy=False``. ``make/batch`` is the better of the two over the better
  of ``batch`` and ``batch_arr`` (BatchEnv over the raw envs): what the stack costs.

Every peer but ``make`` steps the same ``gymnasium.make(env_id)`` envs (EnvPool excepted) with
the same pre-drawn random actions, in one run, so the ratios are comparable on a loaded
machine. Every BatchEnv (``batch``, ``make``) isolates the caller: its default
``step_in_parent=False``, so the parent steps no env.

    python bench/envs.py --seconds 2 --rounds 3 --sizes 8,32 --envs Pendulum-v1,HalfCheetah-v5

For an ``ALE/`` id every env is the preprocessed one (``AtariStack().make``: frame skip 4
with max-pooling, 84x84 grey, no-op starts, episodic life, fire reset, reward clipping, a
stack of 4 uint8 frames), ``make`` is ``make(env_id, N, preprocess="atari")``, and EnvPool and
``AtariVectorEnv`` are set to the same preprocessing:

    python bench/envs.py --envs ALE/Breakout-v5 --sizes 8,16,32 --seconds 3 --rounds 2 \
        --peers parallel,batch,batch_arr,envpool,ale_vector,make,make_arr

``--cpu`` prints the same table in CPU time per env step instead of steps/s: the CPU time of
this process (all its threads: EnvPool's) and of its child processes (the workers of every
BatchEnv and AsyncVectorEnv), so each peer's whole cost, measured over the same interleaved
rounds. CPU time depends far less on what else runs on the machine than wall time. The ratio
columns compare the rates the peers would reach with the cores to themselves, ``cores / CPU
per env step`` (``single`` and ``sync`` run on one core: ``1 / CPU per env step``), so
``batch/limit`` is ``single / batch``: an upper estimate that ignores wake-up latencies:

    python bench/envs.py --cpu --seconds 1 --rounds 3 --sizes 32

``--stack-cpu`` prints instead what the wrapper stack costs in CPU time per env step, with
every env in one process: raw envs, the stack around each env, and ``make()``'s batch-wise
stack (robust to load from other processes):

    python bench/envs.py --stack-cpu --seconds 2 --rounds 10 --sizes 16
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import runpy
import sys
import warnings
from collections.abc import Callable

import gymnasium
import numpy as np
from harness import Side, Timing, compare, run_for, time_calls, write_json

from batchppo.envs import BatchEnv, WorkerOptions


def _env_fn(env_id: str) -> Callable[[], gymnasium.Env]:
    if env_id.startswith("ALE/"):  # the preprocessed env, without make()'s standard stack
        from batchppo.envs import AtariStack

        return lambda: AtariStack().make(env_id, None, {})
    return lambda: gymnasium.make(env_id)


def _actions(space: gymnasium.Space, n: int | None, count: int = 64) -> list[np.ndarray]:
    space.seed(0)
    if n is None:
        return [space.sample() for _ in range(count)]
    batch = gymnasium.vector.utils.batch_space(space, n)
    batch.seed(0)
    return [batch.sample() for _ in range(count)]


def timed_steps(
    step: Callable[[np.ndarray], object],
    actions: list[np.ndarray],
    n: int,
    seconds: float,
    cpu: bool = False,
) -> Timing:
    """``step`` over the pre-drawn ``actions`` (``n`` env steps a call), 64 calls at a time for
    ``seconds`` after 8 warm-up calls; with ``cpu``, the CPU time of this process and its
    children (the workers) too."""
    for a in actions[:8]:  # warm-up
        step(a)
    count, done = len(actions), [0]

    def once() -> int:
        for i in range(64):
            step(actions[(done[0] + i) % count])
        done[0] += 64
        return 64 * n

    return run_for(once, seconds, cpu)


def _figure(timing: Timing, cpu: bool) -> float:
    """A peer's figure: steps/s, or with ``cpu`` CPU microseconds per env step."""
    return timing.cpu_us if cpu else timing.rate


class _Single:
    """One env stepped in a loop (reset where an episode ends)."""

    def __init__(self, env_id: str):
        self.env = _env_fn(env_id)()
        self.env.reset(seed=0)
        self.single_action_space = self.env.action_space

    def step(self, action: np.ndarray) -> None:
        _, _, terminated, truncated, _ = self.env.step(action)
        if terminated or truncated:
            self.env.reset()

    def close(self) -> None:
        self.env.close()


_CHILD_NAME = "bench_envs_parallel_child"


def _parallel_worker(env_id: str, conn: mp.connection.Connection) -> None:
    """A process of ``parallel``: for each ``(seconds, cpu)`` the parent sends, steps a single
    env as ``single`` is timed and answers its steps/s (with ``cpu``: its CPU us per step);
    exits on None."""
    env = _Single(env_id)
    actions = _actions(env.single_action_space, None)
    while (message := conn.recv()) is not None:
        seconds, cpu = message
        conn.send(_figure(timed_steps(env.step, actions, 1, seconds, cpu), cpu))
    env.close()


class _Parallel:
    """``cores`` processes stepping a single env each, timed together (see the module doc)."""

    def __init__(self, env_id: str, processes: int):
        # Each child runs this file afresh (spawn) under a name of its own, whose last lines
        # start the worker loop: that works whether the bench runs as a script or is loaded
        # from its path (the tests), where a function of this module cannot be pickled.
        ctx = mp.get_context("spawn")
        self.conns, self.procs = [], []
        for _ in range(processes):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=runpy.run_path,
                args=(os.path.abspath(__file__),),
                kwargs={"init_globals": {"_CHILD": (env_id, child)}, "run_name": _CHILD_NAME},
                daemon=True,
            )
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def run(self, seconds: float, cpu: bool) -> float:
        """Steps/s of all the processes together (the sum of theirs, timed at once), or with
        ``cpu`` their mean CPU us per env step."""
        for conn in self.conns:
            conn.send((seconds, cpu))
        values = [conn.recv() for conn in self.conns]
        return sum(values) / len(values) if cpu else sum(values)

    def close(self) -> None:
        for conn in self.conns:
            conn.send(None)
        for proc in self.procs:
            proc.join(5)


def _build(peer: str, env_id: str, n: int):
    """The env of ``peer`` and its step function (None when the peer is unavailable)."""
    fns = [_env_fn(env_id)] * n
    if peer == "single":
        env = _Single(env_id)
        return env, env.step, _actions(env.single_action_space, None), 1
    if peer == "parallel":
        env = _Parallel(env_id, os.cpu_count() or 1)
        return env, None, None, None
    if peer == "sync":
        env = gymnasium.vector.SyncVectorEnv(fns)
    elif peer == "async":
        env = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True)
    elif peer == "batch":
        env = BatchEnv(fns, autoreset_mode="SameStep")
    elif peer == "batch_arr":
        env = BatchEnv(fns, copy=False, autoreset_mode="SameStep")
    elif peer in ("make", "make_arr"):
        from batchppo.envs import make

        atari = {"preprocess": "atari"} if env_id.startswith("ALE/") else {}
        env = make(env_id, n, **atari)
        env.copy = peer == "make"
    elif peer == "envpool":
        try:
            import envpool
        except ImportError:
            return None
        pool_id = env_id.removeprefix("ALE/")
        if pool_id not in envpool.list_all_envs():
            return None
        # EnvPool's Atari defaults match AtariStack's but for these two (off by default).
        atari = {"episodic_life": True, "reward_clip": True} if env_id.startswith("ALE/") else {}
        env = envpool.make_gymnasium(
            pool_id, num_envs=n, num_threads=os.cpu_count(), seed=0, **atari
        )
        env.reset()
        return env, env.step, _actions(env.action_space, n), n
    elif peer == "ale_vector":
        if not env_id.startswith("ALE/"):
            return None
        from ale_py.vector_env import AtariVectorEnv

        # Its defaults are AtariStack's (no-ops, skip 4, max-pool, 84x84 grey, stack 4, fire
        # reset, clipping, no sticky actions) but for the life signal.
        game = gymnasium.spec(env_id).kwargs["game"]  # the ROM's name: "breakout"
        env = AtariVectorEnv(
            game, n, num_threads=os.cpu_count(), episodic_life=True, autoreset_mode="SameStep"
        )
        env.reset(seed=0)
        return env, env.step, _actions(env.single_action_space, n), n
    else:
        raise ValueError(f"unknown peer {peer!r}")
    env.reset(seed=0)
    step = env.step_arrays if peer in ("batch_arr", "make_arr") else env.step
    return env, step, _actions(env.single_action_space, n), n


def measure(
    env_id: str, n: int, peers: list[str], seconds: float, rounds: int, cpu: bool = False
) -> dict[str, float | None]:
    """Every peer's steps/s, or with ``cpu`` its CPU microseconds per env step (this process
    and its children): the best of ``rounds`` interleaved rounds of ``seconds`` each.

    Interleaving and best-of make the ratios robust to load from other processes. A peer
    that is unavailable (EnvPool not installed, or without this env) gets None.
    """
    built = {p: _build(p, env_id, n) for p in ["single", *peers]}

    def side(peer: str, env, step, actions, width) -> Side:
        if isinstance(env, _Parallel):
            return Side(peer, lambda _: env.run(seconds, cpu))
        return Side(peer, lambda _: _figure(timed_steps(step, actions, width, seconds, cpu), cpu))

    try:
        result = compare([side(p, *b) for p, b in built.items() if b is not None], rounds)
    finally:
        for b in built.values():
            if b is not None:
                b[0].close()
    return {p: None if b is None else result.best(p, lower=cpu) for p, b in built.items()}


def rates_of_cpu(us: dict[str, float | None], cores: int) -> dict[str, float | None]:
    """The steps/s each peer would reach with the cores to itself, from its CPU microseconds
    per env step: ``cores / us`` (``single`` and ``sync`` step in one thread: ``1 / us``)."""
    return {
        peer: None if not value else (1 if peer in ("single", "sync") else cores) * 1e6 / value
        for peer, value in us.items()
    }


def stack_cpu(env_id: str, n: int, steps: int, rounds: int) -> dict[str, float]:
    """CPU time per env step of ``n`` envs stepped in this process, with and without the stack.

    ``raw``: ``BatchEnv`` over ``gymnasium.make(env_id)``; ``per_env``: over
    ``make_env_fn(env_id)`` (the wrapper stack around each env); ``make``: ``make(env_id, n)``.
    All three use ``backend="sync"`` (every env stepped in the calling process, no worker to
    signal) and ``step_arrays`` with ``copy=False``, so the differences are what the stack
    costs. Best of ``rounds`` interleaved rounds of ``steps`` batch steps each.

    Returns:
        CPU microseconds per env step of each.
    """
    from batchppo.envs import make, make_env_fn

    envs = {
        "raw": BatchEnv(
            [_env_fn(env_id)] * n,
            WorkerOptions(num_workers=1, step_in_parent=True),
            autoreset_mode="SameStep",
        ),
        "per_env": BatchEnv(
            [make_env_fn(env_id)] * n,
            WorkerOptions(num_workers=1, step_in_parent=True),
            autoreset_mode="SameStep",
        ),
        "make": make(env_id, n, backend="sync"),
    }
    actions = {}

    def side(name: str, env: BatchEnv) -> Side:
        def run(_: int) -> float:
            a = actions[name]
            calls = time_calls(lambda: [env.step_arrays(a[i % len(a)]) for i in range(steps)], 1)
            return calls.cpu_s[0] / steps / n * 1e6

        return Side(name, run)

    try:
        for name, env in envs.items():
            env.copy = False
            env.reset(seed=0)
            actions[name] = _actions(env.single_action_space, n)
        result = compare([side(name, env) for name, env in envs.items()], rounds)
    finally:
        for env in envs.values():
            env.close()
    return {name: result.best(name, lower=True) for name in envs}


def main(argv: list[str] | None = None) -> None:
    """Runs the benchmark and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="Pendulum-v1,HalfCheetah-v5")
    parser.add_argument("--sizes", default="8,32", help="comma-separated batch sizes")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (best kept)")
    parser.add_argument(
        "--peers",
        default="parallel,sync,async,batch,batch_arr,envpool,make,make_arr",
        help="comma-separated subset of parallel,sync,async,batch,batch_arr,envpool,ale_vector,"
        "make,make_arr",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="print the same table in CPU time per env step of this process and its workers "
        "instead of steps/s (robust to load from other processes)",
    )
    parser.add_argument(
        "--stack-cpu",
        action="store_true",
        help="print the CPU time per env step of raw envs, the per-env wrapper stack and "
        "make(), all in this process (what the stack costs; robust to load)",
    )
    parser.add_argument(
        "--json",
        default="",
        help="also write the table's figures to this file: {env: {N: {peer: value}}}, values "
        "in steps/s, or with --cpu in CPU us per env step (keys ending in _us), beside the "
        "run's date, command, commit and machine",
    )
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    cores = os.cpu_count() or 1
    if args.stack_cpu:
        print(
            f"{'env':16s} {'N':>3s} {'raw':>9s} {'per_env':>9s} {'make':>9s}  per_env/raw make/raw"
        )
        for env_id in args.envs.split(","):
            for n in [int(s) for s in args.sizes.split(",")]:
                steps = max(1, int(args.seconds * (20000 if "Pendulum" in env_id else 5000)) // n)
                us = stack_cpu(env_id, n, steps, args.rounds)
                print(
                    f"{env_id:16s} {n:3d} {us['raw']:7.2f}us {us['per_env']:7.2f}us "
                    f"{us['make']:7.2f}us {us['per_env'] / us['raw']:11.2f}x "
                    f"{us['make'] / us['raw']:8.2f}x",
                    flush=True,
                )
        print("CPU us per env step, every env in this process (backend sync), step_arrays;")
        print("best of rounds. per_env = the wrapper stack around each env (make_env_fn).")
        return
    peers = args.peers.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    unit = "CPU us per env step, best of rounds" if args.cpu else "steps/s, best of rounds"
    print(
        f"cores={cores} seconds/round={args.seconds} rounds={args.rounds} "
        f"python={sys.version.split()[0]} ({unit})"
    )
    print(
        f"{'env':16s} {'N':>3s} {'single':>8s} {'limit':>8s} "
        + " ".join(f"{p:>9s}" for p in peers)
        + "  batch/async batch/limit batch/par batch/envpool make/batch make/limit make/par"
        + " make/envpool make/alevec"
    )
    table: dict[str, dict[str, dict[str, float]]] = {}
    for env_id in args.envs.split(","):
        for n in sizes:
            values = measure(env_id, n, peers, args.seconds, args.rounds, cpu=args.cpu)
            suffix = "_us" if args.cpu else ""
            table.setdefault(env_id, {})[str(n)] = {
                f"{peer}{suffix}": value for peer, value in values.items() if value
            }
            rates = rates_of_cpu(values, cores) if args.cpu else values
            limit = cores * rates["single"]
            best = max((rates.get(p) or 0.0) for p in ("batch", "batch_arr"))
            made = max((rates.get(p) or 0.0) for p in ("make", "make_arr"))

            def ratio(peer: str, best: float = best, rates: dict = rates) -> str:
                value = rates.get(peer)
                return f"{best / value:10.2f}x" if value and best else f"{'-':>11s}"

            def cell(value: float | None, width: int) -> str:
                if not value:
                    return f"{'-':>{width}s}"
                if args.cpu:
                    return f"{value:{width - 2}.2f}us"
                return f"{value / 1e3:{width - 1}.1f}k"

            # --cpu: at the limit every env step costs what a single env's does.
            limit_cell = cell(values["single"] if args.cpu else limit, 8)
            cells = " ".join(cell(values.get(p), 9) for p in peers)
            print(
                f"{env_id:16s} {n:3d} {cell(values['single'], 8)} {limit_cell} {cells} "
                f"{ratio('async')} {best / limit:10.2f}x {ratio('parallel')}{ratio('envpool')}"
                f"{made / best if made and best else 0:10.2f}x {made / limit:10.2f}x"
                f"{ratio('parallel', made)}{ratio('envpool', made)}{ratio('ale_vector', made)}"
                f"  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    if args.json:
        write_json(args.json, table)
    print("batch = BatchEnv.step (infos); batch_arr = BatchEnv.step_arrays (copy=False); the")
    print("ratios use the better of the two (make: of make and make_arr). limit = cores x")
    print("single; par = parallel, cores processes stepping a single env each, at once. load =")
    print("1-min load average after the row (other processes competing for the cores distort")
    print("every figure).")
    if args.cpu:
        print("--cpu: CPU time of this process and its children (the workers); at the limit")
        print("each env step costs single's. The ratios compare cores / CPU per env step")
        print("(single and sync: 1 / CPU per env step): upper estimates that ignore wake-up")
        print("latencies.")


if __name__ == "__main__":
    main()
elif __name__ == _CHILD_NAME:  # a process of the parallel peer (see _Parallel)
    _parallel_worker(*globals()["_CHILD"])
