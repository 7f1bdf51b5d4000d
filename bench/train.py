"""BatchPPO training benchmarks, side by side with the peers in one run; prints ratios.

Sections (``--only`` picks some):

* ``pendulum``: wall-clock until the mean deterministic eval return reaches -200 on Pendulum-v1,
  per seed, each seed in a fresh Python process (start-up, imports and compilation included),
  seed ``r`` of every side in round ``r``, the sides alternating:
  Stable-Baselines3 PPO with the rl-baselines3-zoo hyperparameters (4 envs, n_steps 1024, gamma
  0.9, GAE 0.95, 10 epochs, lr 1e-3, clip 0.2, gSDE every 4 steps), batchppo with
  Gymnasium envs in worker processes (preset ``pendulum_fast``) through both host drivers
  (in-graph ``HostEnv``, and ``+host_loop``: a Python loop around the compiled policy), and
  batchppo fused with gymnax (preset ``pendulum_jax``). All evaluate 10 episodes every 4096
  steps, as SB3's callback does every rollout. Medians over seeds; ratios against SB3.
* ``throughput``: fused steps/s at PureJaxRL's ppo_continuous_action config (gymnax Pendulum,
  2048 envs x 10 steps, 4 epochs, 32 minibatches, 256x256 tanh): our PureJaxRL-style baseline
  (bench/purejaxrl_style.py) against batchppo's ``make_train`` with the same sizes.
* ``cheetah``: HalfCheetah-v5 end-to-end training steps/s (env workers + learner) of batchppo's
  ``cheetah_fast`` settings, with each host driver, against CleanRL's ppo_continuous_action
  figure quoted from the issue (2.1k steps/s on this 2-core machine; no CleanRL loop is run);
  ``--cheetah-variants`` adds the preset's variants (a flag switched on or off) with their
  ratio to it.
* ``atari``: ``breakout_atari`` training steps/s (CleanRL's settings, no evaluation) on the
  process backend (a worker per core) against the ale backend (ALE's C++ vector env) in its
  host mode (``send``/``recv`` through ``io_callback``) and its fused mode (``xla()``: the envs
  stepped inside the compiled rollout), at each of ``--atari-envs`` (default 8 and the
  machine's cores), alternating over ``--rounds``; ratios against the process backend.

Examples:
    python bench/train.py --seeds 5                       # everything (minutes)
    python bench/train.py --only throughput --pjx-steps 204800   # smoke test
    python bench/train.py --only cheetah --cheetah-variants cheetah_fast+recompute_advantages=false
    python bench/train.py --only atari --atari-seconds 60 --rounds 2   # process vs ale (minutes)
    python bench/train.py --only atari --atari-seconds 5 --rounds 1 --atari-envs 2  # smoke test
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

from harness import Result, Side, compare, spawn, time_calls, write_json

THRESHOLD = -200.0
EVAL_EPISODES = 10
CLEANRL_CHEETAH_SPS = 2100.0  # the figure (CleanRL ppo_continuous_action, 2 cores)


def _config(name: str, overrides: dict | None = None):
    """The shipped preset ``name`` from the registry, with ``overrides`` applied.

    ``name`` may carry boolean flags after ``+``: ``pendulum_fast+host_loop`` is the preset with
    ``host_loop=True`` (the Python-loop host driver instead of the in-graph one), and
    ``cheetah_fast+recompute_advantages=false`` switches a preset's flag off.
    """
    from batchppo.experiment.config.configs import get_preset

    name, *flags = name.split("+")
    config = get_preset(name)
    switches = {}
    for flag in flags:
        key, _, value = flag.partition("=")
        if value not in ("", "true", "false"):
            raise SystemExit(f"{flag!r} in {name!r}: a flag is KEY, KEY=true or KEY=false")
        switches[key] = value != "false"
    return dataclasses.replace(config, **{**switches, **(overrides or {})})


# --------------------------------------------------------------------------------------------
# Workers (each runs in its own process; prints one JSON line)
# --------------------------------------------------------------------------------------------


def worker_sb3(seed: int, t_launch: float, max_steps: int) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    env = make_vec_env("Pendulum-v1", n_envs=4, seed=seed)
    eval_env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed + 1000)
    result: dict = {"hit": False}

    class Eval(BaseCallback):
        def _on_rollout_start(self) -> None:
            if self.num_timesteps == 0:
                return
            mean, _ = evaluate_policy(
                self.model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True
            )
            result.update(steps=self.num_timesteps, score=float(mean))
            if mean >= THRESHOLD:
                result.update(hit=True, seconds=time.time() - t_launch)
                self.model._bench_stop = True

        def _on_step(self) -> bool:
            return not getattr(self.model, "_bench_stop", False)

    model = PPO(
        "MlpPolicy",
        env,
        n_steps=1024,
        gae_lambda=0.95,
        gamma=0.9,
        n_epochs=10,
        ent_coef=0.0,
        learning_rate=1e-3,
        clip_range=0.2,
        use_sde=True,
        sde_sample_freq=4,
        seed=seed,
        device="cpu",
        verbose=0,
    )
    model.learn(total_timesteps=max_steps, callback=Eval())
    return result


def worker_batchppo(preset: str, seed: int, t_launch: float, eval_every: int) -> dict:
    from batchppo.algorithms.ppo import Trainer
    from batchppo.algorithms.training.programs import enable_compilation_cache
    from batchppo.core.keys import host_key

    if os.environ.get("BATCHPPO_BENCH_CACHE"):
        enable_compilation_cache(os.environ["BATCHPPO_BENCH_CACHE"])
    # The preset's own step budget: its learning rate anneals over it.
    config = _config(preset, {"seed": seed})
    # As `batchppo train` runs: programs compiled side by side, keys made without eager JAX ops.
    trainer = Trainer(config)
    n = max(1, eval_every // trainer.steps_per_iteration)
    trainer.precompile(iterations=(n,), eval_episodes=EVAL_EPISODES)
    ts = trainer.init(host_key(seed, 0))
    ss = trainer.init_sim(ts, host_key(seed, 1))
    result: dict = {"hit": False}
    try:
        while int(ts.step) < config.steps:
            ts, ss, _ = trainer.iterations(ts, ss, n)
            ev = trainer.evaluate(ts, EVAL_EPISODES, host_key(seed, 2, int(ts.step)))
            result.update(steps=int(ts.step), score=ev["score"])
            if ev["score"] >= THRESHOLD:
                result.update(hit=True, seconds=time.time() - t_launch)
                break
    finally:
        trainer.close()
    return result


def worker_throughput(kind: str, total_steps: int, repeats: int) -> dict:
    import jax

    t0 = time.time()
    if kind == "purejaxrl":
        import purejaxrl_style

        train = purejaxrl_style.make_train(purejaxrl_style.Config(total_timesteps=total_steps))
    else:
        from batchppo.algorithms.ppo import PPOConfig, make_train

        config = PPOConfig(
            env="Pendulum-v1",
            backend="gymnax",
            max_length=200,
            num_agents=2048,
            rollout_length=10,
            update_epochs=4,
            num_minibatches=32,
            objective="clip",
            learning_rate=3e-4,
            anneal_lr=True,
            max_grad_norm=0.5,
            discount=0.99,
            gae_lambda=0.95,
            value_clip=0.2,
            policy_layers=(256, 256),
            value_layers=(256, 256),
            activation="tanh",
            init_std=1.0,
            steps=total_steps,
        )
        train = make_train(config)
    key = jax.random.key(0)
    lowered = jax.jit(train).lower(key)
    compiled = lowered.compile()
    compile_s = time.time() - t0
    # The best of several runs: the machine may be shared.
    runs = time_calls(lambda: jax.block_until_ready(compiled(key)), repeats).wall_s
    steps = (total_steps // 20480) * 20480
    return {
        "compile_s": compile_s,
        "run_s": runs,
        "steps": steps,
        "sps": steps / min(runs),
        "sps_median": steps / statistics.median(runs),
    }


def worker_cheetah(seconds: float, preset: str) -> dict:
    return _timed_training(_config(preset), seconds)


ATARI_SIDES = {
    "process": {},
    "ale_host": {"backend": "ale", "backend_options": {"mode": "host"}},
    "ale_fused": {"backend": "ale", "backend_options": {"mode": "fused"}},
}
"""The atari section's sides: ``breakout_atari`` with these fields changed."""


def worker_atari(seconds: float, side: str, num_envs: int) -> dict:
    config = _config("breakout_atari", {**ATARI_SIDES[side], "num_agents": num_envs})
    return _timed_training(config, seconds)


def _timed_training(config, seconds: float) -> dict:
    """Training steps/s of ``config``: iterations for ``seconds`` after the first (which
    compiles), with start-up and compilation reported apart."""
    import jax

    from batchppo.algorithms.ppo import Trainer

    t0 = time.time()
    trainer = Trainer(config)
    ts = trainer.init(jax.random.key(0))
    ss = trainer.init_sim(ts, jax.random.key(1))
    ts, ss, _ = trainer.iteration(ts, ss)  # compile + first iteration
    t_first = time.time() - t0
    t1 = time.time()
    steps0 = int(ts.step)
    while time.time() - t1 < seconds:
        ts, ss, _ = trainer.iteration(ts, ss)
    steps = int(ts.step) - steps0
    run_s = time.time() - t1
    trainer.close()
    return {
        "sps": steps / run_s,
        "sps_incl_startup": int(ts.step) / (time.time() - t0),
        "startup_s": t_first,
        "steps": steps,
    }


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def _spawn(args: list[str], timeout: float) -> dict:
    """A worker of this script in its own process, on the CPU unless ``JAX_PLATFORMS`` says
    otherwise; a result printed before a failed exit is kept (``harness.spawn``)."""
    platforms = {"JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    return spawn(__file__, ["_worker", *args], timeout, env=platforms, any_exit=True)


def _print_row(row: dict, _: Result) -> None:
    print(f"{row['side']} (round {row['round']}): {row}", flush=True)


def _best_of_rounds(
    runs: dict[str, list[str]], rounds: int, timeout: float, base: str, what: str = ""
) -> dict:
    """Each worker spec of ``runs`` once a round, in alternating order so that a drift in the
    machine's speed hits all (``harness.compare``); prints each one's best steps/s over
    ``base``'s and returns its fastest round (a spec that never reports ``sps`` left out)."""
    sides = [Side(name, lambda _, spec=spec: _spawn(spec, timeout)) for name, spec in runs.items()]
    result = compare(sides, rounds, on_row=_print_row)
    for side, ratio in result.ratios(base, "sps", how="max").items():
        print(f"ratio {side} / {base}{what} steps/s = {ratio:.3f}", flush=True)
    best = {name: result.best_row(name, "sps") for name in runs}
    return {name: row for name, row in best.items() if row is not None}


def _median_seconds(results: list[dict]) -> float:
    # A seed that never reached the threshold counts as infinitely slow.
    times = [r["seconds"] if r.get("hit") else float("inf") for r in results]
    return statistics.median(times)


PENDULUM_RUNS = {
    "sb3": ["sb3"],
    "batchppo_process": ["batchppo", "pendulum_fast"],
    "batchppo_process_loop": ["batchppo", "pendulum_fast+host_loop"],
    "batchppo_gymnax": ["batchppo", "pendulum_jax"],
}
"""The pendulum section's sides and their worker specs."""


def bench_pendulum(args: argparse.Namespace) -> dict:
    """Each side's wall-clock to the threshold, seed ``r`` in round ``r`` (the sides
    alternating); with ``--compilation-cache``, one unmeasured run of each batchppo side first
    fills JAX's persistent compilation cache."""
    names = args.pendulum_runs.split(",") if args.pendulum_runs else list(PENDULUM_RUNS)
    if args.compilation_cache:
        os.environ["BATCHPPO_BENCH_CACHE"] = args.compilation_cache

    def run(name: str, round_: int) -> dict:
        if round_ < 0:  # the warm-up: batchppo's compilations into the cache
            spec = [] if name == "sb3" else ["999", repr(time.time()), "4096"]
        else:
            extra = [str(args.max_steps)] if name == "sb3" else []
            spec = [str(round_), repr(time.time()), *extra, str(args.eval_every)]
        return _spawn([*PENDULUM_RUNS[name], *spec], args.timeout) if spec else {}

    warmup = 1 if args.compilation_cache else 0
    sides = [Side(name, lambda round_, name=name: run(name, round_)) for name in names]
    result = compare(sides, args.seeds, warmup, on_row=_print_row)
    rows = {}
    for name in names:
        runs = [r for r in result.rows if r["side"] == name]
        rows[name] = {"median_s": _median_seconds(runs), "runs": runs}
        steps = [r.get("steps") for r in runs if r.get("hit")]
        print(
            f"{name}: median wall to {THRESHOLD:.0f} = {rows[name]['median_s']:.1f} s "
            f"(steps at hit: {steps})",
            flush=True,
        )
    if "sb3" in rows:
        base = rows["sb3"]["median_s"]
        for name in rows:
            if name != "sb3":
                print(f"ratio {name} / sb3 = {rows[name]['median_s'] / base:.2f}")
    return rows


def bench_throughput(args: argparse.Namespace) -> dict:
    runs = {
        kind: ["throughput", kind, str(args.pjx_steps), str(args.repeats)]
        for kind in ("purejaxrl", "batchppo")
    }
    return _best_of_rounds(runs, args.rounds, args.timeout * 4, base="purejaxrl")


def bench_cheetah(args: argparse.Namespace) -> dict:
    # Both host drivers: in-graph HostEnv (the preset) and the Python loop around the policy.
    runs = {
        name: ["cheetah", str(args.cheetah_seconds), preset]
        for name, preset in (("in_graph", "cheetah_fast"), ("host_loop", "cheetah_fast+host_loop"))
    }
    rows = _best_of_rounds(runs, 1, args.cheetah_seconds + 300, base="host_loop")
    for name, res in rows.items():
        print(
            f"ratio batchppo {name} / CleanRL (quoted {CLEANRL_CHEETAH_SPS:.0f} steps/s) = "
            f"{res['sps'] / CLEANRL_CHEETAH_SPS:.1f}"
        )
    variants = _cheetah_variants(args) if args.cheetah_variants else {}
    return {"batchppo": rows, "variants": variants, "cleanrl_quoted_sps": CLEANRL_CHEETAH_SPS}


def bench_atari(args: argparse.Namespace) -> dict:
    """``breakout_atari`` on the process backend against the ale backend's two modes, at each
    env count, the sides alternating over rounds (each keeps its best); ratios over process."""
    sizes = [os.cpu_count() or 1 if n == "cores" else int(n) for n in args.atari_envs.split(",")]
    rows = {}
    for n in dict.fromkeys(sizes):
        runs = {side: ["atari", str(args.atari_seconds), side, str(n)] for side in ATARI_SIDES}
        timeout = args.atari_seconds + args.timeout
        rows[n] = best = _best_of_rounds(runs, args.rounds, timeout, "process", f" at {n} envs")
        rates = ", ".join(f"{side} {res['sps']:,.0f}" for side, res in best.items())
        print(f"breakout_atari, {n} envs: agent steps/s {rates}", flush=True)
    return rows


def _cheetah_variants(args: argparse.Namespace) -> dict:
    """Steps/s of preset variants (``cheetah_fast+recompute_advantages=false``) against it:
    each keeps its best round of ``--rounds`` (``_best_of_rounds``), the ratio variant /
    preset."""
    names = ["cheetah_fast", *args.cheetah_variants.split(",")]
    runs = {name: ["cheetah", str(args.cheetah_seconds), name] for name in names}
    return _best_of_rounds(runs, args.rounds, args.cheetah_seconds + 300, base=names[0])


def _worker_main(argv: list[str]) -> None:
    kind = argv[0]
    if kind == "sb3":
        seed, t_launch, max_steps, _ = argv[1:]
        out = worker_sb3(int(seed), float(t_launch), int(max_steps))
    elif kind == "batchppo":
        preset, seed, t_launch, eval_every = argv[1:]
        out = worker_batchppo(preset, int(seed), float(t_launch), int(eval_every))
    elif kind == "throughput":
        out = worker_throughput(argv[1], int(argv[2]), int(argv[3]))
    elif kind == "cheetah":
        out = worker_cheetah(float(argv[1]), argv[2])
    elif kind == "atari":
        out = worker_atari(float(argv[1]), argv[2], int(argv[3]))
    else:
        raise SystemExit(f"unknown worker {kind!r}")
    print(json.dumps(out, default=float), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        _worker_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--only", default="pendulum,throughput,cheetah", help="sections to run")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per Pendulum run")
    parser.add_argument(
        "--pendulum-runs",
        default="",
        help="subset: sb3,batchppo_process,batchppo_process_loop,batchppo_gymnax",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=300_000,
        help="SB3 gives up after this many steps (batchppo runs stop at their preset's budget)",
    )
    parser.add_argument(
        "--eval-every",
        type=int,
        default=4096,
        help="batchppo eval cadence (steps); SB3 evaluates every rollout of 4 x 1024 steps",
    )
    parser.add_argument(
        "--pjx-steps", type=int, default=2_048_000, help="steps of the throughput runs"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="throughput, cheetah variants and atari: alternating rounds",
    )
    parser.add_argument("--repeats", type=int, default=3, help="throughput: timed runs per round")
    parser.add_argument("--cheetah-seconds", type=float, default=30.0, help="timed HalfCheetah run")
    parser.add_argument(
        "--cheetah-variants",
        default="",
        help="also time these variants of cheetah_fast against it, alternating "
        "(PRESET+FLAG[=false],...; e.g. cheetah_fast+recompute_advantages=false)",
    )
    parser.add_argument("--atari-seconds", type=float, default=30.0, help="timed Atari run")
    parser.add_argument(
        "--atari-envs",
        default="8,cores",
        help="atari: env counts (cores: one per core, the envs that fill the machine)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="per-run timeout (s)")
    parser.add_argument(
        "--compilation-cache",
        default="",
        help="batchppo Pendulum runs use JAX's persistent compilation cache in this directory "
        "(warmed by one unmeasured run); default: cold, every run compiles",
    )
    parser.add_argument("--json", default="", help="also write all results to this file")
    args = parser.parse_args()
    print(
        f"batchppo bench/train.py on {os.cpu_count()} cores; timings on a shared machine are noisy"
    )
    results = {}
    sections = args.only.split(",")
    if "pendulum" in sections:
        results["pendulum"] = bench_pendulum(args)
    if "throughput" in sections:
        results["throughput"] = bench_throughput(args)
    if "cheetah" in sections:
        results["cheetah"] = bench_cheetah(args)
    if "atari" in sections:
        results["atari"] = bench_atari(args)
    if args.json:
        write_json(args.json, results)


if __name__ == "__main__":
    main()
