"""bench/gpu.py at tiny sizes on the CPU: every side's worker runs in its own process and the
JSON holds each side's figures and settings.

CI has no PureJaxRL checkout, so its side runs a stand-in ``ppo.py`` written here with the same
``make_train(config)`` interface and the same gymnax calls (``gymnax.make``, a 5-value ``step``
through the bench's import-time adapter); PureJaxRL's own file is run only where a checkout is
given (``--purejaxrl-dir``). Brax's side runs ``brax.training.agents.ppo.train`` itself, on
Brax's tiny ``fast`` env.
"""

from __future__ import annotations

import json
import statistics
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest
from benchlib import load_bench

ROOT = Path(__file__).resolve().parents[2]

STAND_IN = textwrap.dedent(
    """
    import gymnax
    import jax
    import jax.numpy as jnp

    def make_train(config):
        config["NUM_UPDATES"] = (
            config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]
        )
        env, env_params = gymnax.make(config["ENV_NAME"])

        def train(rng):
            keys = jax.random.split(rng, config["NUM_ENVS"])
            obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)

            def step(carry, _):
                state, rng = carry
                rng, k = jax.random.split(rng)
                ks = jax.random.split(k, config["NUM_ENVS"])
                action = jnp.zeros(config["NUM_ENVS"], jnp.int32)
                obs, state, reward, done, info = jax.vmap(
                    env.step, in_axes=(0, 0, 0, None)
                )(ks, state, action, env_params)
                return (state, rng), (reward, done, info["discount"])

            n = config["NUM_UPDATES"] * config["NUM_STEPS"]
            _, out = jax.lax.scan(step, (state, rng), None, n)
            return out

        return train
    """
)


def bench_gpu():
    return load_bench("gpu")


def test_workloads_take_one_budget_or_one_per_env_count():
    gpu = bench_gpu()
    parse = gpu.main.__globals__["workloads"]

    def args(envs, steps, brax="none"):
        import argparse

        return argparse.Namespace(
            cartpole_envs=envs, cartpole_steps=steps, brax_envs=brax, purejaxrl_dir=None,
            repeats=1,
        )  # fmt: skip

    loads = parse(args("4,2048", "1e6,5e7"))
    assert [w["sides"]["batchppo"]["settings"]["steps"] for w in loads] == [
        999_936,  # whole iterations of 4 x 128 steps
        49_807_360,
    ]
    assert parse(args("none", "1e6,5e7")) == []
    assert len(parse(args("4,64", "65536"))) == 2
    with pytest.raises(SystemExit, match="one per --cartpole-envs"):
        parse(args("4,64,128", "1e6,5e7"))


def test_variants_are_sides_of_their_own_and_get_ratios():
    """``--cartpole-lean``, ``--cartpole-sort`` and ``--brax-autoreset`` add batchppo sides
    with one setting changed; the summary gives each its ratio to the peer."""
    import argparse

    gpu = bench_gpu()
    args = argparse.Namespace(
        cartpole_envs="4", cartpole_steps="512", purejaxrl_dir="pjx", repeats=1,
        cartpole_lean=True, cartpole_sort=True, brax_envs="ant", brax_autoreset="cond,first",
        brax_steps=32768, brax_num_envs=2048, brax_unroll=16, brax_minibatches=32, brax_epochs=4,
        brax_policy_layers="8", brax_value_layers="8", skip_brax_peer=False,
    )  # fmt: skip
    cart, brax = gpu.main.__globals__["workloads"](args)
    assert list(cart["sides"]) == ["purejaxrl", "batchppo", "batchppo-lean", "batchppo-sort"]
    ours = cart["sides"]["batchppo"]["settings"]
    assert cart["sides"]["batchppo-lean"]["settings"] == {**ours, "minibatch_diagnostics": False}
    assert cart["sides"]["batchppo-sort"]["settings"] == {**ours, "minibatch_shuffle": "sort"}
    assert list(brax["sides"]) == ["brax", "batchppo", "batchppo-first"]
    assert brax["sides"]["batchppo-first"]["settings"]["backend_options"] == {"autoreset": "first"}
    assert "env_kwargs" not in brax["sides"]["batchppo"]["settings"]
    rows = [
        {"side": side, "round": 0, "sps": sps, "cpu_sps": sps, "compile_s": 1.0,
         "setup_s": 1.0, "backend_s": 0.1, "steps": 8, "device": "cpu"}
        for side, sps in (("purejaxrl", 100.0), ("batchppo", 90.0), ("batchppo-lean", 110.0))
    ]  # fmt: skip
    rows.append({"side": "batchppo-first", "round": 0, "error": "exit 1"})
    summary = gpu.summarize(rows, "purejaxrl")
    assert summary["ratio"] == pytest.approx(0.9)
    assert summary["variant_ratios"] == {"batchppo-lean": pytest.approx(1.1)}
    assert summary["ratio_rounds"] == [pytest.approx(0.9)]


def test_thread_sides_run_both_libraries_with_that_pool_and_are_compared_in_pairs(monkeypatch):
    """``--cartpole-threads 1`` adds PureJaxRL's and batchppo's side again, each process with
    ``PJRT_NPROC=1``; ``paired_ratios`` sets batchppo's over PureJaxRL's of the same pool."""
    import argparse

    gpu = bench_gpu()
    args = argparse.Namespace(
        cartpole_envs="4", cartpole_steps="512", purejaxrl_dir="pjx", repeats=1,
        cartpole_threads="1", brax_envs="none",
    )  # fmt: skip
    (cart,) = gpu.main.__globals__["workloads"](args)
    sides = cart["sides"]
    assert list(sides) == ["purejaxrl", "batchppo", "purejaxrl-threads1", "batchppo-threads1"]
    assert sides["batchppo-threads1"] == {**sides["batchppo"], "xla_threads": 1}
    assert sides["purejaxrl-threads1"] == {**sides["purejaxrl"], "xla_threads": 1}
    rows = [
        {"side": side, "round": 0, "sps": sps, "cpu_sps": sps, "compile_s": 1.0,
         "setup_s": 1.0, "backend_s": 0.1, "steps": 8, "device": "cpu"}
        for side, sps in (("purejaxrl", 100.0), ("batchppo", 90.0),
                          ("purejaxrl-threads1", 120.0), ("batchppo-threads1", 132.0))
    ]  # fmt: skip
    summary = gpu.summarize(rows, "purejaxrl")
    assert summary["ratio"] == pytest.approx(0.9)
    assert summary["paired_ratios"] == {"threads1": pytest.approx(1.1)}
    assert summary["variant_ratios"] == {}  # not one-thread batchppo over the default peer
    with pytest.raises(SystemExit, match="thread counts must be >= 1"):
        gpu.main.__globals__["workloads"](
            argparse.Namespace(**vars(args) | {"cartpole_threads": "0"})
        )
    # The worker's process gets the pool size: spawn is called with PJRT_NPROC.
    calls = []

    def spawn(script, argv, timeout, env=None):
        calls.append(env)
        return {"error": "not run", "exit": 1}

    monkeypatch.setitem(gpu.main.__globals__, "spawn", spawn)
    gpu.main(["--purejaxrl-dir", "pjx", "--cartpole-envs", "4", "--cartpole-steps", "512",
              "--cartpole-threads", "1", "--brax-envs", "none", "--rounds", "1"])  # fmt: skip
    assert calls == [None, None, {"PJRT_NPROC": "1"}, {"PJRT_NPROC": "1"}]


def test_settings_of_the_sides_match_where_both_have_them():
    gpu = bench_gpu()
    pjx = gpu.purejaxrl_config(4, 512)
    ours = gpu.batchppo_cartpole(4, 512)
    pairs = {
        "LR": "learning_rate",
        "NUM_ENVS": "num_agents",
        "NUM_STEPS": "rollout_length",
        "UPDATE_EPOCHS": "update_epochs",
        "NUM_MINIBATCHES": "num_minibatches",
        "GAMMA": "discount",
        "GAE_LAMBDA": "gae_lambda",
        "CLIP_EPS": "clip_epsilon",
        "ENT_COEF": "entropy_coef",
        "VF_COEF": "value_coef",
        "MAX_GRAD_NORM": "max_grad_norm",
        "ANNEAL_LR": "anneal_lr",
        "TOTAL_TIMESTEPS": "steps",
    }
    for theirs, mine in pairs.items():
        assert pjx[theirs] == ours[mine], theirs
    assert ours["value_clip"] == pjx["CLIP_EPS"]


@pytest.mark.slow
def test_compile_times_counts_each_compilation_from_its_call_on():
    import jax

    jax.jit(lambda x: x - 1)(1.0)  # before: not counted
    times = bench_gpu()._compile_times()
    jax.jit(lambda x: x * 3)(2.0)
    jax.jit(lambda x: x + 7)(np.arange(5))  # a NumPy argument: nothing compiled to make it
    assert len(times) == 2 and all(t > 0 for t in times)


# The two workloads of a tiny run, each a test of its own (pytest-xdist runs them side by side):
# its sides, the steps of one timed call, and a setting of the peer's.
WORKLOADS = {
    "cartpole-2": ({"purejaxrl", "batchppo"}, "purejaxrl", 256, ("NUM_ENVS", 2)),
    "brax-fast": ({"brax", "batchppo"}, "brax", 8, ("batch_size", 2)),
}


@pytest.mark.extended  # a bench workload, run before publishing its figures
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_tiny_run_writes_every_sides_figures(workload, tmp_path, monkeypatch):
    pytest.importorskip("gymnax")
    pytest.importorskip("brax")
    monkeypatch.setenv("PJRT_NPROC", "1")  # every side's process: XLA's CPU pool of one thread
    folder = tmp_path / "purejaxrl"
    folder.mkdir()
    (folder / "ppo.py").write_text(STAND_IN)
    out = tmp_path / "gpu.json"
    cartpole = "2" if workload == "cartpole-2" else "none"
    brax = "fast" if workload == "brax-fast" else "none"
    bench_gpu().main(
        [
            "--purejaxrl-dir", str(folder),
            "--cartpole-envs", cartpole,
            "--cartpole-steps", "256",
            "--brax-envs", brax,
            "--brax-num-envs", "4",
            "--brax-unroll", "2",
            "--brax-minibatches", "2",
            "--brax-epochs", "1",
            "--brax-policy-layers", "4",
            "--brax-value-layers", "4",
            "--brax-steps", "8",
            "--rounds", "1",
            "--repeats", "2",
            "--json", str(out),
        ]
    )  # fmt: skip
    result = json.loads(out.read_text())
    assert list(result["workloads"]) == [workload]
    load = result["workloads"][workload]
    sides, peer, steps, (setting, value) = WORKLOADS[workload]
    assert set(load["sides"]) == sides
    assert load["ratio"] > 0 and load["complete"] is True
    for name, side in load["sides"].items():
        rows = [r for r in load["rows"] if r["side"] == name]
        assert side["sps_median"] > 0
        assert side["compile_s_median"] == statistics.median(r["compile_s"] for r in rows)
        if name != "brax":  # a jit's compilation, timed on its own
            assert all(r["compile_s"] > 0 for r in rows)
        assert side["backend_s_median"] > 0  # timed apart from the set-up
    assert load["sides"][peer]["steps_per_call"] == steps
    if workload == "cartpole-2":
        assert load["sides"]["batchppo"]["steps_per_call"] == 256
    assert load["settings"][peer][setting] == value
    assert result["machine"]["pjrt_nproc"] == "1"
    for row in load["rows"]:
        if row["side"] != "brax":  # Brax's own set-up is timed from its train's start
            assert (row["setup_compiles"] > 0) == (row["setup_compile_s"] > 0)
        else:
            assert "setup_compiles" not in row and "setup_compile_s" not in row


SETUP_COMPILES = textwrap.dedent(
    """
    import jax

    def make_train(config):
        config["NUM_UPDATES"] = 1
        jax.jit(lambda x: x * 5.0)(1.0)  # two programs run eagerly while building
        jax.jit(lambda x: x - 5.0)(1.0)

        def train(rng):
            return jax.random.uniform(rng)

        return train
    """
)


@pytest.mark.slow
def test_setup_compiles_counts_the_set_up_s_compilations_and_not_the_programs(tmp_path):
    """A side whose set-up runs exactly two fresh programs: ``setup_compiles`` is 2, its
    seconds their sum; the timed program's own compilation (``compile_s``) is not among them."""
    pytest.importorskip("gymnax")
    import jax

    jax.random.PRNGKey(30)  # the side's key, made before: its compilation is not the set-up's
    (tmp_path / "ppo.py").write_text(SETUP_COMPILES)
    config = {"NUM_STEPS": 4, "NUM_ENVS": 2}
    spec = {"side": "purejaxrl", "repeats": 2, "settings": config, "purejaxrl_dir": tmp_path}
    out = bench_gpu().worker(spec)
    assert out["setup_compiles"] == 2 and out["setup_compile_s"] > 0
    assert out["steps"] == 8 and len(out["run_s"]) == 2 and out["compile_s"] > 0


@pytest.mark.extended  # a bench workload, run before publishing its figures
def test_each_variant_side_writes_its_own_trace(tmp_path):
    """Variants run batchppo's worker (``side`` batchppo) under their own names: their traces
    go to folders of their own, not over the default side's."""
    pytest.importorskip("gymnax")
    gpu = bench_gpu()
    settings = {"config": gpu.batchppo_cartpole(2, 256, minibatch_diagnostics=False)}
    spec = {"profile": str(tmp_path), "profile_iterations": 1, "workload": "cartpole-2"}
    lean = gpu._profile("batchppo", settings, {**spec, "name": "batchppo-lean"})
    assert lean["profile_dir"] == str(tmp_path / "batchppo-lean-cartpole-2")
    assert lean["profile_steps"] == 256
    assert list((tmp_path / "batchppo-lean-cartpole-2").rglob("perfetto_trace.json.gz"))


def test_a_workload_cut_short_keeps_the_sides_that_ran(tmp_path):
    gpu = bench_gpu()
    out = tmp_path / "gpu.json"
    results = {"workloads": {}}
    load = {
        "name": "brax-ant",
        "peer": "brax",
        "sides": {n: {"settings": {"n": n}} for n in ("brax", "batchppo", "batchppo-first")},
        "differences": [],
    }
    row = {"round": 0, "cpu_sps": 1.0, "compile_s": 1.0, "setup_s": 1.0, "backend_s": 0.1}
    row |= {"steps": 8, "device": "cpu"}
    rows = [{**row, "side": "brax", "sps": 100.0}, {**row, "side": "batchppo", "sps": 120.0}]
    gpu._record(results, load, rows, complete=False, path=str(out))
    written = json.loads(out.read_text())["workloads"]["brax-ant"]
    assert written["complete"] is False and set(written["sides"]) == {"brax", "batchppo"}
    assert written["ratio"] == 1.2 and written["settings"]["batchppo-first"] == {
        "n": "batchppo-first"
    }


def test_an_unknown_restart_mode_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit):
        bench_gpu().main(["--cartpole-envs", "none", "--brax-autoreset", "cond,fresh"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(
        "--brax-autoreset: unknown modes ['fresh']; choose from select, cond, first, optimistic"
    )


def test_a_stubbed_module_answers_no_dunder():
    bench = load_bench("gpu")
    assert isinstance(bench._stub_attribute("VecEnv"), types.SimpleNamespace)
    with pytest.raises(AttributeError):
        bench._stub_attribute("__file__")
