r"""The fused path against its peers, side by side, on one device (issue 41): env steps/s.

Two workloads, each side in its own Python process (so no side reuses another's compilation,
caches or threads), the sides alternating over ``--rounds`` rounds; medians and ratios are
printed and written as JSON (``--json``) with every setting of every side:

* ``cartpole``: PureJaxRL's ``purejaxrl/ppo.py`` as published (commit 31756b1 of
  github.com/luchris429/purejaxrl, its ``__main__`` config: CartPole-v1, 128 steps, 4 epochs x 4
  minibatches, lr 2.5e-4 annealed, 2x64 tanh actor and critic) against batchppo's
  ``algorithms.ppo.make_train`` with the same settings, at each of ``--cartpole-envs``.
  PureJaxRL's code is not part of this repository: ``--purejaxrl-dir`` names a checkout's
  ``purejaxrl/`` folder (the one holding ``ppo.py`` and ``wrappers.py``); without it that side
  is skipped. It is imported unchanged; at import time only (``import_purejaxrl``):
  ``gymnax.make`` as ``ppo.py`` sees it returns the env behind a 5-value ``step`` (gymnax 1.0.1
  returns 6; ``done = terminated | truncated`` and only the ``discount`` info, as gymnax 0.0.x
  returned), ``DEBUG`` is off (its per-step print callback), and the modules ``wrappers.py``
  imports for its other wrappers (navix, brax) are stubbed where not installed.
* ``brax``: Brax's own ``brax.training.agents.ppo.train`` (the installed package, 0.14.2) against
  batchppo's ``make_train`` at the ``ant_brax`` preset's settings (2048 envs x 16 steps, 32
  minibatches, 4 epochs, policy 4x128, value 5x256), for each of ``--brax-envs``. JAX 0.10 and
  later lack ``jax.device_put_replicated``, which that ``train`` calls once to replicate its
  training state; where it is missing it is given one (``_device_put_replicated``: the
  leaves stacked and passed through ``jax.pmap`` with Brax's axis name ``'i'``, so the arrays
  carry the sharding the pmapped epoch returns and the epoch compiles once).

What is timed, per side:

* gymnax sides (PureJaxRL, batchppo): ``setup_s`` builds ``train = make_train(config)`` (env and
  network objects; imports excluded, reported as ``import_s``), of which ``setup_compiles``
  XLA compilations taking ``setup_compile_s`` (programs run eagerly while building; on a GPU
  each is a device compilation); ``compile_s`` is
  ``jax.jit(train).lower(key).compile()``; ``run_s`` are ``--repeats`` calls of the compiled
  program on the whole budget, each ended by ``block_until_ready``; steps/s = env steps of one
  call / its time, the median of the calls; ``cpu_sps`` the same by the process's CPU time
  (``time.process_time``, all threads), steadier where other work shares the machine.
* Brax's side: ``train(num_evals=repeats + 2, run_evals=False)`` runs ``repeats + 1`` epochs of
  the budget each; the first includes the epoch's compilation. ``run_s`` are the later epochs'
  times as Brax measures them (``training/walltime`` differences: the pmapped epoch and its
  ``block_until_ready``); ``compile_s`` = first epoch - median later epoch; ``setup_s`` = the time
  from calling ``train`` to the first epoch's start (Brax builds its env, networks, reset and
  optimiser state there).
* batchppo's Brax side: as the gymnax sides (``make_train``), on the same budget per call;
  ``brax.envs`` is imported with the imports, as on Brax's side.
* Every side: ``backend_s``, JAX starting its backend (on a GPU the driver and context), timed
  apart before the set-up on both sides, so that neither set-up carries it.

Settings: ``settings`` in the JSON lists each side's, matched by name; ``differences`` lists
what cannot be matched (each library's own algorithmic choices). On a GPU machine without a
package index, the packages its image lacks travel as wheels (as docs/benchmarks-journal.md 8c):

    pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl \
        gymnax==1.0.1 gymnasium==1.3.0 farama-notifications distrax==0.1.9 tfp-nightly \
        dm-tree gast decorator tensorboardX brax==0.14.2 mujoco mujoco-core mujoco-mjx \
        trimesh jaxopt ml_collections flax optax chex   # about 30 MB with ale-py; the
    # versions this project's venv resolved (2026-11-27: mujoco and mujoco-core 4.0.0,
    # mujoco-mjx 3.17.0; pyproject.toml's pins of flax, optax and chex, where the image's differ);
    # add --implementation cp and the manylinux --platform tags the device tool's README lists
    # (bench/atari_rate.sh also needs ale-py==0.12.1, 3 MB)
    # on the GPU machine (PureJaxRL's checkout travels in an ignored folder, named in `carry`);
    # bench/gpu.sh does the open questions in one call of about 9 minutes (smaller budgets than
    # below, with Perfetto traces: --profile); by hand, in two calls:
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD
    python3 bench/gpu.py --purejaxrl-dir .purejaxrl/purejaxrl --cartpole-envs 4,2048 \
        --cartpole-steps 1e6,5e7 --brax-envs none --rounds 2 --json $OUT/cartpole.json
    python3 bench/gpu.py --cartpole-envs none --brax-envs ant,humanoid --rounds 1 \
        --repeats 2 --json $OUT/brax.json

Usage on a CPU (seconds; what CI runs, without PureJaxRL, is tests/bench/test_bench_gpu.py):

    JAX_PLATFORMS=cpu python bench/gpu.py --purejaxrl-dir ~/purejaxrl/purejaxrl \
        --cartpole-envs 4,64 --cartpole-steps 65536 --brax-envs none --rounds 3

Every side's process inherits the environment: ``PJRT_NPROC=1`` before the command gives each
side's XLA a CPU thread pool of one thread (XLA's own variable; unset, one thread per core), the
same for all sides; the JSON records it (``machine.pjrt_nproc``). ``--cartpole-threads 1`` runs
both CartPole sides a second time in the same run with that pool (``purejaxrl-threads1``,
``batchppo-threads1``; ``paired_ratios`` in the JSON compares the two).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import itertools
import json
import os
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

from harness import Result, Side, compare, provenance, spawn, time_program, write_json

ROOT = Path(__file__).resolve().parents[1]
PUREJAXRL_COMMIT = "31756b1"

# --------------------------------------------------------------------------------------------
# Settings, side by side
# --------------------------------------------------------------------------------------------


def purejaxrl_config(num_envs: int, steps: int) -> dict[str, Any]:
    """PureJaxRL ``ppo.py``'s ``__main__`` config at ``num_envs`` and ``steps``; DEBUG off."""
    return {
        "LR": 2.5e-4,
        "NUM_ENVS": num_envs,
        "NUM_STEPS": 128,
        "TOTAL_TIMESTEPS": steps,
        "UPDATE_EPOCHS": 4,
        "NUM_MINIBATCHES": 4,
        "GAMMA": 0.99,
        "GAE_LAMBDA": 0.95,
        "CLIP_EPS": 0.2,
        "ENT_COEF": 0.01,
        "VF_COEF": 0.5,
        "MAX_GRAD_NORM": 0.5,
        "ACTIVATION": "tanh",
        "ENV_NAME": "CartPole-v1",
        "ANNEAL_LR": True,
        "DEBUG": False,
    }


def batchppo_cartpole(num_envs: int, steps: int, **changes: Any) -> dict[str, Any]:
    """The ``PPOConfig`` fields of batchppo matching ``purejaxrl_config``."""
    return {
        "env": "CartPole-v1",
        "backend": "gymnax",
        "max_length": 500,
        "normalize_ranges": False,
        "network": "feed_forward_categorical",
        "num_agents": num_envs,
        "rollout_length": 128,
        "update_epochs": 4,
        "num_minibatches": 4,
        "objective": "clip",
        "learning_rate": 2.5e-4,
        "anneal_lr": True,
        "discount": 0.99,
        "gae_lambda": 0.95,
        "clip_epsilon": 0.2,
        "value_clip": 0.2,
        "entropy_coef": 0.01,
        "value_coef": 0.5,
        "max_grad_norm": 0.5,
        "activation": "tanh",
        "policy_layers": (64, 64),
        "value_layers": (64, 64),
        "init_mean_factor": 0.01,
        "normalize_observations": False,
        "normalize_rewards": False,
        "normalize_advantages": True,
        "steps": steps,
        **changes,
    }


CARTPOLE_DIFFERENCES = [
    "PureJaxRL treats a time-limit end as a termination (no bootstrap); batchppo bootstraps "
    "truncated episodes from V(final_obs).",
    "PureJaxRL's LogWrapper keeps every step's returned-episode statistics as the run's metrics "
    "(4 arrays of (updates, 128, envs)); batchppo reduces its episode statistics to per-"
    "iteration means in the graph, besides its loss metrics (KL, clip fraction, grad norm).",
    "PureJaxRL normalises advantages per minibatch; so does batchppo (normalize_advantages).",
]


def brax_settings(args: argparse.Namespace, env: str) -> tuple[dict, dict]:
    """``(brax ppo.train kwargs, batchppo PPOConfig fields)`` at ``ant_brax``'s settings."""
    n, T, M = args.brax_num_envs, args.brax_unroll, args.brax_minibatches
    if (n * T) % M:
        raise SystemExit(f"--brax-minibatches {M} must divide envs x unroll = {n * T}")
    policy = tuple(int(x) for x in args.brax_policy_layers.split(","))
    value = tuple(int(x) for x in args.brax_value_layers.split(","))
    brax_kwargs = {
        "num_envs": n,
        "episode_length": 1000,
        "unroll_length": T,
        # Brax's batch: batch_size x num_minibatches trajectories of unroll_length steps per
        # training step = all n envs x T steps once when batch_size * M == n.
        "batch_size": n // M if n % M == 0 else None,
        "num_minibatches": M,
        "num_updates_per_batch": args.brax_epochs,
        "learning_rate": 3e-4,
        "entropy_cost": 1e-3,
        "discounting": 0.97,
        "gae_lambda": 0.95,
        "clipping_epsilon": 0.2,
        "max_grad_norm": 1.0,
        "normalize_observations": True,
        "reward_scaling": 1.0,
        "vf_loss_coefficient": 0.5,
        "normalize_advantage": True,
        "action_repeat": 1,
        "policy_hidden_layer_sizes": policy,
        "value_hidden_layer_sizes": value,
    }
    if brax_kwargs["batch_size"] is None:
        raise SystemExit(f"--brax-minibatches {M} must divide --brax-num-envs {n}")
    ours = {
        "env": env,
        "backend": "brax",
        "max_length": 1000,
        "num_agents": n,
        "rollout_length": T,
        "num_minibatches": M,
        "update_epochs": args.brax_epochs,
        "objective": "clip",
        "learning_rate": 3e-4,
        "entropy_coef": 1e-3,
        "discount": 0.97,
        "gae_lambda": 0.95,
        "clip_epsilon": 0.2,
        "max_grad_norm": 1.0,
        "normalize_observations": True,
        "value_coef": 0.5,
        "normalize_advantages": True,
        "policy_layers": policy,
        "value_layers": value,
        "activation": "tanh",
        "init_std": 1.0,
        "init_mean_factor": 0.01,
    }
    return brax_kwargs, ours


BRAX_DIFFERENCES = [
    "Brax scales rewards by a constant (reward_scaling=1); batchppo normalises them by a running "
    "std (the ant_brax preset's normalize_rewards).",
    "Brax's minibatches are whole 16-step trajectories of batch_size envs; batchppo's are "
    "individually shuffled transitions (the same 1024 transitions a minibatch).",
    "Brax's policy is a tanh-squashed Normal with softplus std; batchppo's a Normal with a "
    "learned log-std, actions clipped to [-1, 1].",
    "Brax (bootstrap_on_timeout=False, its default) does not bootstrap time-limit ends; batchppo "
    "does.",
    "Brax resets a done env to a cached first state (AutoResetWrapper); batchppo draws a fresh "
    "random reset for the envs that ended.",
]


# --------------------------------------------------------------------------------------------
# Import-time adapters for the peers (their code unchanged)
# --------------------------------------------------------------------------------------------


class _FiveValueStep:
    """A gymnax 1.0 env whose ``step`` returns gymnax 0.0.x's 5 values (what ``ppo.py``
    unpacks): ``done = terminated | truncated`` and the info holding only ``discount``."""

    def __init__(self, env: Any) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def step(self, key: Any, state: Any, action: Any, params: Any = None) -> tuple:
        import jax.numpy as jnp

        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return (
            obs,
            state,
            reward,
            jnp.logical_or(terminated, truncated),
            {"discount": info["discount"]},
        )


def _stub_attribute(attr: str) -> Any:
    """A stubbed module's attribute: a blank object, but no module dunder (``__file__``,
    ``__path__``...), which Python's own tools (``inspect.getmodule`` over ``sys.modules``) read."""
    if attr.startswith("__"):
        raise AttributeError(attr)
    return types.SimpleNamespace()


def import_purejaxrl(folder: str | os.PathLike) -> types.ModuleType:
    """PureJaxRL's ``ppo.py`` from ``folder``, its ``gymnax.make`` adapted to gymnax 1.0.

    The modules ``wrappers.py`` imports for wrappers ``ppo.py`` does not use (navix, and brax
    where absent) are stubbed in ``sys.modules`` when they are not installed.
    """
    import gymnax

    folder = str(Path(folder).resolve())
    for name in ("navix", "brax", "brax.envs", "brax.envs.wrappers", "brax.envs.wrappers.training"):
        try:
            importlib.import_module(name)
        except ImportError:
            stub = types.ModuleType(name)
            stub.__getattr__ = _stub_attribute  # type: ignore[method-assign]
            sys.modules[name] = stub
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location("purejaxrl_ppo", Path(folder) / "ppo.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)

    def make(env_id: str, **kwargs: Any) -> tuple[Any, Any]:
        env, params = gymnax.make(env_id, **kwargs)
        return _FiveValueStep(env), params

    module.gymnax = types.SimpleNamespace(make=make)
    return module


def _device_put_replicated(x: Any, devices: list) -> Any:
    """``jax.device_put_replicated`` for JAX versions without it: ``x`` stacked once per
    device, placed as ``jax.pmap`` places outputs over Brax's axis name ``'i'``."""
    import jax
    import jax.numpy as jnp

    stacked = jax.tree.map(lambda a: jnp.stack([jnp.asarray(a)] * len(devices)), x)
    return jax.pmap(lambda t: t, axis_name="i", devices=devices)(stacked)


# --------------------------------------------------------------------------------------------
# Workers (each in its own process; one JSON line on stdout)
# --------------------------------------------------------------------------------------------


def _make_side(side: str, settings: dict[str, Any]) -> tuple[Any, Any, int]:
    """``(train, key, env steps per call)`` of PureJaxRL's side or batchppo's (any backend)."""
    import jax

    if side == "purejaxrl":
        config = dict(settings["config"])
        train = settings["module"].make_train(config)
        steps = int(config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"])
        return train, jax.random.PRNGKey(30), steps
    from batchppo.algorithms.ppo import PPOConfig, make_train
    from batchppo.algorithms.ppo.ppo import num_iterations

    fields = dict(settings["config"])
    for k in ("policy_layers", "value_layers"):
        fields[k] = tuple(fields[k])
    config = PPOConfig(**fields)
    steps = num_iterations(config) * config.rollout_length * config.num_agents
    return make_train(config), jax.random.key(0), steps


def _profile(side: str, settings: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """One call of a short program (``profile_iterations`` iterations) under JAX's profiler.

    The Perfetto trace (kernels and their launches, host and device) is written under
    ``spec["profile"]/<name>-<workload>``, ``name`` the side's own (``batchppo-lean``, where
    ``side`` says which library runs); returns its folder and the call's time.
    """
    import jax

    config = dict(settings["config"])
    per_iteration = config.get("NUM_ENVS", config.get("num_agents")) * config.get(
        "NUM_STEPS", config.get("rollout_length")
    )
    budget = per_iteration * spec["profile_iterations"]
    config["TOTAL_TIMESTEPS" if side == "purejaxrl" else "steps"] = budget
    train, key, steps = _make_side(side, {**settings, "config": config})
    compiled = jax.jit(train).lower(key).compile()
    jax.block_until_ready(compiled(key))
    folder = Path(spec["profile"]) / f"{spec.get('name', side)}-{spec['workload']}"
    t0 = time.perf_counter()
    with jax.profiler.trace(str(folder), create_perfetto_trace=True):
        jax.block_until_ready(compiled(key))
    return {
        "profile_dir": str(folder),
        "profile_s": time.perf_counter() - t0,
        "profile_steps": steps,
    }


_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


def _compile_times() -> list[float]:
    """A list that, from now on, gets the seconds of each XLA compilation in this process."""
    import jax.monitoring

    times: list[float] = []

    def listen(event: str, seconds: float, **_: Any) -> None:
        if event == _COMPILE_EVENT:
            times.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(listen)
    return times


def _backend_start() -> float:
    """Seconds JAX takes to start its backend (a GPU's driver and context), which the first
    array would otherwise charge to a side's set-up."""
    import jax

    t0 = time.perf_counter()
    jax.block_until_ready(jax.numpy.zeros(()))
    return time.perf_counter() - t0


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs one side of one workload (in its own process) and returns its figures."""
    t_start = time.perf_counter()
    import jax

    side, repeats = spec["side"], spec["repeats"]
    out: dict[str, Any] = {"side": side}
    if side in ("purejaxrl", "batchppo"):
        settings = {"config": spec["settings"]}
        if side == "purejaxrl":
            settings["module"] = import_purejaxrl(spec["purejaxrl_dir"])
        else:
            import batchppo.algorithms.ppo  # noqa: F401  (imports timed apart from set-up)

            if spec["settings"].get("backend") == "brax":
                import brax.envs  # noqa: F401  (as Brax's side imports it before its set-up)
        out["import_s"] = time.perf_counter() - t_start
        out["backend_s"] = _backend_start()
        compiles = _compile_times()
        t0 = time.perf_counter()
        train, key, out["steps"] = _make_side(side, settings)
        out["setup_s"] = time.perf_counter() - t0
        out["setup_compiles"], out["setup_compile_s"] = len(compiles), sum(compiles)
        timed = time_program(train, key, repeats)
        del timed["output"]
        out.update(timed)
        if spec.get("profile"):
            out.update(_profile(side, settings, spec))
    elif side == "brax":
        import functools

        if not hasattr(jax, "device_put_replicated"):
            jax.device_put_replicated = _device_put_replicated
        from brax import envs
        from brax.training.agents.ppo import networks as ppo_networks
        from brax.training.agents.ppo import train as ppo

        out["import_s"] = time.perf_counter() - t_start
        out["backend_s"] = _backend_start()
        kwargs = dict(spec["settings"])
        factory = functools.partial(
            ppo_networks.make_ppo_networks,
            policy_hidden_layer_sizes=tuple(kwargs.pop("policy_hidden_layer_sizes")),
            value_hidden_layer_sizes=tuple(kwargs.pop("value_hidden_layer_sizes")),
        )
        per_epoch = kwargs["num_envs"] * kwargs["unroll_length"]
        per_epoch *= -(-spec["steps"] // per_epoch)
        epochs: list[tuple[float, float, int, float]] = []  # wall, Brax's walltime, step, CPU
        t0 = time.perf_counter()

        def progress(step: int, metrics: dict) -> None:
            now = (time.perf_counter(), float(metrics["training/walltime"]), step)
            epochs.append((*now, time.process_time()))

        ppo.train(
            envs.get_environment(spec["env"]),
            num_timesteps=per_epoch * (repeats + 1),
            num_evals=repeats + 2,
            run_evals=False,
            network_factory=factory,
            progress_fn=progress,
            seed=0,
            **kwargs,
        )
        walls = [e[1] for e in epochs]
        cpus = [e[3] for e in epochs]
        out["cpu_s"] = [b - a for a, b in itertools.pairwise(cpus)]
        times = [b - a for a, b in zip([0.0, *walls[:-1]], walls, strict=True)]
        out["steps"] = epochs[1][2] - epochs[0][2] if len(epochs) > 1 else epochs[0][2]
        out["run_s"] = times[1:]
        out["compile_s"] = times[0] - statistics.median(times[1:])
        out["setup_s"] = epochs[0][0] - t0 - times[0]
    else:
        raise ValueError(side)
    out["sps"] = out["steps"] / statistics.median(out["run_s"])
    # On a machine shared with other work, CPU time is the steadier measure of a side's work.
    out["cpu_sps"] = out["steps"] / statistics.median(out["cpu_s"])
    out["device"] = str(jax.devices()[0].device_kind)
    out["pjrt_nproc"] = os.environ.get("PJRT_NPROC")  # XLA's CPU pool size, if set
    return out


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def workloads(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each workload: ``name``, its sides' worker specs (peer first), settings, differences."""
    out = []
    base = {"repeats": args.repeats}
    if getattr(args, "profile", None):
        base.update(profile=args.profile, profile_iterations=args.profile_iterations)
    counts = [int(x) for x in args.cartpole_envs.split(",") if x not in ("", "none")]
    budgets = [int(float(x)) for x in str(args.cartpole_steps).split(",")]
    if len(budgets) == 1:
        budgets *= len(counts)
    if counts and len(budgets) != len(counts):
        raise SystemExit("--cartpole-steps: one budget, or one per --cartpole-envs entry")
    for n, budget in zip(counts, budgets[: len(counts)], strict=True):
        steps = max(budget // (128 * n), 1) * 128 * n
        sides = {}
        if args.purejaxrl_dir:
            sides["purejaxrl"] = {
                **base,
                "workload": f"cartpole-{n}",
                "side": "purejaxrl",
                "purejaxrl_dir": args.purejaxrl_dir,
                "settings": purejaxrl_config(n, steps),
            }
        sides["batchppo"] = {
            **base,
            "side": "batchppo",
            "workload": f"cartpole-{n}",
            "settings": batchppo_cartpole(n, steps),
        }
        if getattr(args, "cartpole_lean", False):
            # batchppo without the minibatch diagnostics PureJaxRL does not compute.
            sides["batchppo-lean"] = {
                **sides["batchppo"],
                "settings": batchppo_cartpole(n, steps, minibatch_diagnostics=False),
            }
        for threads in _thread_counts(args):
            # Both sides again, each process's XLA with a CPU pool of `threads` threads.
            for side in [k for k in ("purejaxrl", "batchppo") if k in sides]:
                sides[f"{side}-threads{threads}"] = {**sides[side], "xla_threads": threads}
        if getattr(args, "cartpole_sort", False):
            # batchppo shuffling minibatches by sorting random keys, as before the default
            # became the elementwise index permutation (and as PureJaxRL does).
            sides["batchppo-sort"] = {
                **sides["batchppo"],
                "settings": batchppo_cartpole(n, steps, minibatch_shuffle="sort"),
            }
        out.append(
            {
                "name": f"cartpole-{n}",
                "peer": "purejaxrl",
                "sides": sides,
                "differences": CARTPOLE_DIFFERENCES,
            }
        )
    for env in [x for x in args.brax_envs.split(",") if x not in ("", "none")]:
        brax_kwargs, ours = brax_settings(args, env)
        per_call = args.brax_num_envs * args.brax_unroll
        steps = max(args.brax_steps // per_call, 1) * per_call
        sides = {}
        if not args.skip_brax_peer:
            sides["brax"] = {
                **base,
                "side": "brax",
                "env": env,
                "steps": steps,
                "settings": brax_kwargs,
            }
        for mode in args.brax_autoreset.split(","):
            # batchppo's default restart draws a fresh reset (``cond``); ``first`` restarts
            # from each env's first state, as Brax's AutoResetWrapper does.
            name = "batchppo" if mode == "cond" else f"batchppo-{mode}"
            restart = {} if mode == "cond" else {"backend_options": {"autoreset": mode}}
            sides[name] = {
                **base,
                "side": "batchppo",
                "workload": f"brax-{env}",
                "settings": {**ours, "steps": steps, **restart},
            }
        out.append(
            {"name": f"brax-{env}", "peer": "brax", "sides": sides, "differences": BRAX_DIFFERENCES}
        )
    return out


def _thread_counts(args: argparse.Namespace) -> list[int]:
    """``--cartpole-threads`` as a list of positive ints (empty when not given)."""
    value = getattr(args, "cartpole_threads", "") or ""
    counts = [int(x) for x in value.split(",") if x.strip()]
    if any(n < 1 for n in counts):
        raise SystemExit(f"--cartpole-threads {value}: thread counts must be >= 1")
    return counts


MEDIANS = ("cpu_sps", "compile_s", "setup_s", "backend_s")
"""The figures of each side's rows that ``summarize`` gives the median of, besides ``sps``."""


def summarize(rows: list[dict[str, Any]], peer: str) -> dict[str, Any]:
    """Per side: median steps/s, compile and set-up over rounds; the ratio batchppo / peer."""
    result = Result(sorted({r["side"] for r in rows}), rows)
    sides: dict[str, Any] = {}
    for side in [s for s in result.names if result.values(s, "sps")]:  # sides that measured
        first = result.readings(side)[0]
        sides[side] = {
            "sps_median": result.median(side, "sps"),
            "sps_rounds": result.values(side, "sps"),
            **{f"{key}_median": result.median(side, key) for key in MEDIANS},
            "steps_per_call": first["steps"],
            "device": first["device"],
        }
    summary: dict[str, Any] = {"sides": sides}
    if peer in sides:
        # Sides run the same way on both libraries (e.g. ``-threads1``): batchppo's over the
        # peer's with the same suffix, never over the peer's default side.
        suffixes = [s.removeprefix(f"{peer}-") for s in sorted(sides) if s.startswith(f"{peer}-")]
        ratios = result.ratios(peer, "sps")
        summary["variant_ratios"] = {
            side: ratios[side]
            for side in sorted(sides)
            if side.startswith("batchppo-") and side.removeprefix("batchppo-") not in suffixes
        }
        summary["paired_ratios"] = {
            suffix: sides[f"batchppo-{suffix}"]["sps_median"]
            / sides[f"{peer}-{suffix}"]["sps_median"]
            for suffix in suffixes
            if f"batchppo-{suffix}" in sides
        }
    if peer in sides and "batchppo" in sides:
        summary["ratio"] = result.ratios(peer, "sps")["batchppo"]
        summary["cpu_ratio"] = result.ratios(peer, "cpu_sps")["batchppo"]
        # Per round (the sides of one round ran back to back).
        summary["ratio_rounds"] = result.round_ratios("batchppo", peer, "sps")
    return summary


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--purejaxrl-dir", help="folder holding PureJaxRL's ppo.py and wrappers.py")
    p.add_argument("--cartpole-envs", default="4,2048", help="comma list, or none")
    p.add_argument(
        "--cartpole-steps",
        default="1e6,5e7",
        help="env steps per call: one budget, or one per --cartpole-envs entry",
    )
    p.add_argument(
        "--cartpole-lean",
        action="store_true",
        help="also a batchppo side with minibatch_diagnostics=False ('batchppo-lean')",
    )
    p.add_argument(
        "--cartpole-sort",
        action="store_true",
        help="also a batchppo side with minibatch_shuffle='sort' ('batchppo-sort')",
    )
    p.add_argument(
        "--cartpole-threads",
        default="",
        help="comma list of XLA CPU pool sizes: for each N, both sides again with PJRT_NPROC=N "
        "in their processes ('purejaxrl-threadsN', 'batchppo-threadsN')",
    )
    p.add_argument("--brax-envs", default="ant,humanoid", help="comma list, or none")
    p.add_argument("--brax-steps", type=int, default=2_097_152, help="env steps per timed call")
    p.add_argument("--brax-num-envs", type=int, default=2048)
    p.add_argument("--brax-unroll", type=int, default=16)
    p.add_argument("--brax-minibatches", type=int, default=32)
    p.add_argument("--brax-epochs", type=int, default=4)
    p.add_argument("--brax-policy-layers", default="128,128,128,128")
    p.add_argument("--brax-value-layers", default="256,256,256,256,256")
    p.add_argument("--skip-brax-peer", action="store_true", help="batchppo's Brax side only")
    p.add_argument(
        "--brax-autoreset",
        default="cond",
        help="batchppo sides' restart modes (comma list of pure_env.AUTORESET_MODES): cond is "
        "the default side 'batchppo', the others run as 'batchppo-<mode>'",
    )
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of the sides")
    p.add_argument("--repeats", type=int, default=2, help="timed calls per side and round")
    p.add_argument("--timeout", type=float, default=1800.0, help="per worker, seconds")
    p.add_argument("--json", help="write the results here")
    p.add_argument(
        "--profile",
        help="folder for a Perfetto trace of each batchppo and PureJaxRL side (one more "
        "compiled program per side: --profile-iterations iterations, traced once warm)",
    )
    p.add_argument("--profile-iterations", type=int, default=4)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))), flush=True)
        return {}
    from batchppo.core.pure_env import AUTORESET_MODES

    modes = [m for m in args.brax_autoreset.split(",") if m not in AUTORESET_MODES]
    if modes:
        p.error(
            f"--brax-autoreset: unknown modes {modes}; choose from {', '.join(AUTORESET_MODES)}"
        )
    import jax

    run = provenance(argv)
    results: dict[str, Any] = {
        **run,
        "machine": {
            **run["machine"],
            "jax": jax.__version__,
            "backend": os.environ.get("JAX_PLATFORMS", "") or "default",
            # XLA's CPU thread pool size in every side's process (unset: one thread per core)
            "pjrt_nproc": os.environ.get("PJRT_NPROC"),
        },
        "purejaxrl_commit": PUREJAXRL_COMMIT if args.purejaxrl_dir else None,
        "workloads": {},
    }
    with contextlib.suppress(ImportError):
        import brax

        results["machine"]["brax"] = brax.__version__
    for load in workloads(args):

        def side(name: str, spec: dict[str, Any]) -> Side:
            threads = spec.get("xla_threads")
            worker_args = ["--worker", json.dumps({**spec, "name": name})]
            env = {"PJRT_NPROC": str(threads)} if threads else None
            return Side(name, lambda _: spawn(__file__, worker_args, args.timeout, env=env))

        def on_row(row: dict[str, Any], result: Result, load: dict[str, Any] = load) -> None:
            shown = {k: v for k, v in row.items() if k not in ("run_s", "cpu_s")}
            print(f"{load['name']} {row['side']} round {row['round']}: {shown}", flush=True)
            # after each side: a run cut short keeps what it measured
            _record(results, load, result.rows, complete=False, path=args.json)

        sides = [side(name, spec) for name, spec in load["sides"].items()]
        result = compare(sides, args.rounds, on_row=on_row)
        summary = _record(results, load, result.rows, complete=True, path=args.json)
        if "ratio" in summary:
            rr = ", ".join(f"{r:.2f}" for r in summary["ratio_rounds"])
            print(
                f"{load['name']}: batchppo / {load['peer']} steps/s = {summary['ratio']:.2f} "
                f"(rounds {rr}); by CPU time {summary['cpu_ratio']:.2f}"
            )

        for side, ratio in summary.get("variant_ratios", {}).items():
            print(f"{load['name']}: {side} / {load['peer']} steps/s = {ratio:.2f}")
        for suffix, ratio in summary.get("paired_ratios", {}).items():
            print(
                f"{load['name']}: batchppo-{suffix} / {load['peer']}-{suffix} steps/s = {ratio:.2f}"
            )
    return results


def _record(
    results: dict[str, Any],
    load: dict[str, Any],
    rows: list[dict],
    complete: bool,
    path: str | None,
) -> dict[str, Any]:
    """Puts ``load``'s summary of ``rows`` into ``results`` (and the file ``path``, if any)."""
    summary = summarize(rows, load["peer"])
    results["workloads"][load["name"]] = {
        **summary,
        "complete": complete,
        "rows": rows,
        "settings": {k: v["settings"] for k, v in load["sides"].items()},
        "differences": load["differences"],
    }
    if path:
        write_json(path, results)
    return summary


if __name__ == "__main__":
    main()
