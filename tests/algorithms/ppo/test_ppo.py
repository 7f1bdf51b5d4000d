"""PPO training state, one iteration, layout, schedule, vmapped seeds, host policy."""

import dataclasses
import warnings
from concurrent.futures import Future

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cold_programs import cold_jit, normal
from program_values import assert_same_values

from batchppo.algorithms.networks.networks import Network, make_network
from batchppo.algorithms.ppo import PPOConfig, Trainer, make_train
from batchppo.algorithms.ppo.ppo import (
    PPO,
    check_layout,
    num_iterations,
    resolve_unroll_update,
    rollout_length,
)
from batchppo.algorithms.training.episodes import ENDED
from batchppo.algorithms.training.evaluation import HostPolicy
from batchppo.core import normalize as norm
from batchppo.core.keys import host_key
from batchppo.core.simulation import rollout
from batchppo.testing import DictCueEnv, ImageCueEnv

# Tests of a few iterations compile the trainers' programs as the run-once ones
# (cold_training_programs) and their own jits with cold_jit, where each comparison is between
# programs compiled alike to a tolerance. Those that compare programs bit for bit, and the
# first test of one iteration, compile as the package does.
COLD = pytest.mark.usefixtures("cold_training_programs")

TINY = PPOConfig(
    env="Pendulum-v1",
    backend="gymnax",
    num_agents=4,
    rollout_length=8,
    update_epochs=2,
    num_minibatches=2,
    policy_layers=(8,),
    value_layers=(8,),
    steps=64,
    max_length=200,
)

# Clipped PPO whose every minibatch step moves the policy (learning rate 0.05), over episodes
# of 3 steps (truncations at t = 2, 5): one config for the target_kl, lr_kl_cap and
# recompute_advantages tests, which then share its compiled iteration.
FAST_CLIP = dataclasses.replace(TINY, objective="clip", learning_rate=0.05, max_length=3)

# A pixel config: the MinAtar CNN over ImageCueEnv's uint8 frames (6x6: image_encoding=auto
# would read them as a grid of codes).
IMAGE_TINY = PPOConfig(
    backend="gymnax",
    network="feed_forward",
    objective="clip",
    image_encoding="pixels",
    cnn="minatar",
    cnn_dense=8,
    shared_torso=True,
    policy_layers=(8,),
    value_layers=(8,),
    num_agents=4,
    rollout_length=8,
    update_epochs=2,
    num_minibatches=2,
    max_length=None,
)


def test_schedule_and_layout():
    # The original's schedule: update_every episodes of max_length steps over num_agents envs.
    original = PPOConfig(num_agents=30, update_every=30, max_length=200, steps=1_000_000)
    assert rollout_length(original) == 200
    assert rollout_length(dataclasses.replace(original, update_every=60)) == 400
    assert num_iterations(original) == 167  # ceil(1e6 / 6000)
    # Recurrent chunks of 50: 30 envs x 4 chunks = 120 sequences; 6 minibatches of 20.
    rec = dataclasses.replace(
        original, network="recurrent_gaussian", chunk_length=50, num_minibatches=6
    )
    assert check_layout(rec, recurrent=True) == (200, 50, 120)
    # Feed-forward clip without chunks trains on single transitions.
    clip = dataclasses.replace(original, objective="clip", num_minibatches=40)
    assert check_layout(clip, recurrent=False) == (200, 1, 6000)
    with pytest.raises(ValueError, match="chunk_length=30 must divide"):
        check_layout(dataclasses.replace(rec, chunk_length=30), recurrent=True)
    with pytest.raises(ValueError, match="num_minibatches=7 must divide the 120"):
        check_layout(dataclasses.replace(rec, num_minibatches=7), recurrent=True)


@pytest.mark.timeout(120)
def test_iteration_updates_state_and_normalisers():
    # Episodes of 20 steps, as in the precompile tests, which then load its compiled programs
    # from the session's cache (none ends in the first iteration's 8 steps).
    trainer = Trainer(dataclasses.replace(TINY, max_length=20))
    ts = trainer.init(jax.random.key(0))
    ss = trainer.init_sim(ts, jax.random.key(1))
    assert float(ts.beta) == 1.0 and int(ts.step) == 0
    params0 = jax.tree.map(np.asarray, ts.params)
    ts, ss, m = trainer.iteration(ts, ss)
    assert int(ts.step) == 32 and int(ts.updates) == 1
    assert float(ts.obs_norm.count) == 32 and float(ts.reward_norm.count) == 32
    for key in (
        "env_steps",
        "episodes",
        "score",
        "length",
        "policy_loss",
        "value_loss",
        "kl",
        "beta",
        "entropy",
        "grad_norm",
        "learning_rate",
        "obs_mean",
        "obs_std",
        "reward_std",
        "clip_fraction",
    ):
        assert isinstance(m[key], float), key
    assert m["env_steps"] == 32 and m["episodes"] == 0 and np.isnan(m["score"])
    # beta moved by the original's rule from the post-update KL.
    expected_beta = 1.5 if m["kl"] > 0.013 else (1 / 1.5 if m["kl"] < 0.007 else 1.0)
    assert m["beta"] == pytest.approx(expected_beta)
    changed = jax.tree.map(lambda a, b: not np.allclose(a, b), params0, ts.params)
    assert all(jax.tree.leaves(changed))
    ts, ss, ms = trainer.iterations(ts, ss, 2)
    assert len(ms) == 2 and int(ts.step) == 96 and int(ts.updates) == 3
    trainer.close()


@pytest.mark.timeout(120)
@COLD
def test_evaluate_and_host_policy():
    trainer = Trainer(dataclasses.replace(TINY, max_length=20))
    ts = trainer.init(jax.random.key(0))
    ev = trainer.evaluate(ts, 6, jax.random.key(3))
    assert ev["returns"].shape == (6,) and np.all(ev["lengths"] == 20)
    assert ev["score"] == pytest.approx(ev["returns"].mean())
    policy = trainer.policy(ts)
    obs = np.zeros((3, 3), np.float32)
    act = policy(obs)
    assert act.shape == (3, 1)
    np.testing.assert_array_equal(act, policy(obs))  # deterministic
    with pytest.raises(ValueError, match="do not match"):
        policy(np.zeros((3, 5), np.float32))


@pytest.mark.timeout(180)
@COLD
def test_evaluation_counts_and_warns_of_episodes_cut_by_eval_max_steps():
    # Episodes of 20 steps, each env may run 30: its first episode ends, its second is cut
    # at 10 steps; of the 6 episodes taken (2 per env, env by env), the last 2 are cut.
    config = dataclasses.replace(TINY, max_length=20, eval_max_steps=30)
    trainer = Trainer(config)
    ts = trainer.init(jax.random.key(0))
    with pytest.warns(RuntimeWarning, match="2 of 6 eval episodes were cut at eval_max_steps=30"):
        ev = trainer.evaluate(ts, 6, jax.random.key(3))
    assert ev["cut"] == 2 and ev["lengths"].tolist() == [20, 20, 20, 20, 10, 10]
    assert ev["score"] == pytest.approx(ev["returns"].mean())
    # Within the bound nothing is cut.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert trainer.evaluate(ts, 4, jax.random.key(3))["cut"] == 0
    trainer.close()
    with pytest.raises(ValueError, match="eval_max_steps=0: must be >= 1"):
        dataclasses.replace(config, eval_max_steps=0)


@pytest.mark.timeout(120)
def test_precompile_of_sampled_evaluations_compiles_the_sampled_programs():
    trainer = Trainer(dataclasses.replace(TINY, max_length=20))
    trainer.precompile(iterations=(1,), eval_episodes=6, eval_sample=True)
    evals = sorted(name for name in trainer.programs if name.startswith("eval"))
    assert evals == ["eval_more_sampled(4, 20)", "eval_start_sampled(4, 20)"]
    futures = [trainer.programs[name].stage for name in evals]
    assert all(isinstance(future, Future) for future in futures)
    # Waited for here, so that they compile into programs, not into the next test's time.
    assert all(isinstance(future.result(), jax.stages.Compiled) for future in futures)
    trainer.close()


@pytest.mark.timeout(180)
def test_precompiled_programs_compute_what_the_jitted_ones_do():
    config = dataclasses.replace(TINY, max_length=20)
    pre, lazy = Trainer(config), Trainer(config)
    pre.precompile(iterations=(1, 2), eval_episodes=6)
    # init, init_sim, 1 and 2 iterations, eval start and more: compiling in the background.
    programs = pre.programs
    precompiled = ["init", "init_sim", "iterations(2)", "iterations(1)", "eval_start(4, 20)",
                   "eval_more(4, 20)"]  # fmt: skip
    assert sorted(programs) == sorted([*precompiled, "learn"])
    assert all(isinstance(programs[name].stage, Future) for name in precompiled)
    assert programs["learn"].stage is None
    results = []
    for trainer in (pre, lazy):
        ts = trainer.init(host_key(0, 0))
        ss = trainer.init_sim(ts, jax.random.key(1))  # typed and raw keys both work
        ts, ss, m1 = trainer.iteration(ts, ss)
        ts, ss, m2 = trainer.iterations(ts, ss, 2)
        ev = trainer.evaluate(ts, 6, host_key(0, 2))  # two eval chunks: start + more
        results.append((jax.tree.map(np.asarray, (ts, ss)), m1, m2, ev["returns"]))
    assert isinstance(pre.programs["iterations(2)"].stage, jax.stages.Compiled)
    lazy_programs = lazy.programs
    assert sorted(lazy_programs) == sorted([*precompiled, "learn"])
    assert not any(isinstance(p.stage, jax.stages.Compiled) for p in lazy_programs.values())
    (state_a, *rest_a), (state_b, *rest_b) = results
    jax.tree.map(np.testing.assert_array_equal, state_a, state_b)
    np.testing.assert_equal(rest_a, rest_b)  # metrics (nan where no episode ended), returns
    # Another episode count needs another eval env: its programs replace the old env's.
    ev3 = pre.evaluate(ts, 3, host_key(0, 2))
    assert ev3["returns"].shape == (3,) and np.all(ev3["lengths"] == 20)
    assert pre.eval_env.num_envs == 3
    assert [name for name in pre.programs if name.startswith("eval")] == ["eval_start(3, 20)"]
    with pytest.raises(ValueError, match="iterations=0 must be >= 1"):
        pre.precompile(iterations=(0, 2))
    # Arguments of other types than the precompiled ones fall back to the jitted program,
    # and say so: the compilation is then paid on first use.
    ts = pre.init(host_key(0, 0))
    ss = pre.init_sim(ts, host_key(0, 1))
    with pytest.warns(RuntimeWarning, match=r"'iterations\(1\)'.*does not take these"):
        ts, _, m = pre.iteration(ts.replace(beta=jnp.asarray(1, jnp.int32)), ss)
    assert isinstance(pre.programs["iterations(1)"].stage, jax.stages.Wrapped)
    assert min(abs(m["beta"] - b) for b in (1.0, 1.5, 1 / 1.5)) < 1e-6 and int(ts.updates) == 1
    pre.close()
    lazy.close()


@pytest.mark.timeout(180)
@COLD
def test_recurrent_kl_penalty_iteration_and_policy_reset():
    config = dataclasses.replace(
        TINY, network="recurrent_gaussian", chunk_length=4, num_minibatches=4, max_length=6
    )
    trainer = Trainer(config)
    ts = trainer.init(jax.random.key(0))
    ss = trainer.init_sim(ts, jax.random.key(1))
    ts, ss, m = trainer.iteration(ts, ss)
    assert m["episodes"] == 4 and m["length"] == 6  # episodes of 6 steps end at step 6
    assert np.isfinite(m["policy_loss"]) and np.isfinite(m["kl"])
    policy = trainer.policy(ts)
    obs = np.ones((2, 3), np.float32)
    a1 = policy(obs)
    a2 = policy(obs)  # state carried: differs from the first call
    policy.reset()
    np.testing.assert_allclose(policy(obs), a1, rtol=1e-6)
    assert not np.allclose(a1, a2)


@pytest.mark.timeout(180)
def test_make_train_vmaps_over_seeds():
    config = dataclasses.replace(TINY, objective="clip", steps=64)
    train = cold_jit(jax.vmap(make_train(config)))
    ts, metrics = train(jax.random.split(jax.random.key(0), 2))
    assert metrics["policy_loss"].shape == (2, 2)
    np.testing.assert_array_equal(ts.step, [64, 64])
    leaf = np.asarray(jax.tree.leaves(ts.params)[0])
    assert not np.allclose(leaf[0], leaf[1])
    # Reward statistics saw every reward of each seed's run.
    np.testing.assert_array_equal(ts.reward_norm.count, [64, 64])
    first = jax.tree.map(lambda x: np.asarray(x)[0], ts.reward_norm)
    assert cold_jit(norm.std)(first).shape == ()


@pytest.mark.parametrize("objective", ["clip", "kl_penalty"])
def test_minibatch_diagnostics_off_trains_the_same_and_logs_less(objective):
    """Without the diagnostics the update is the same (steps and counts to the bit, floats to
    float32 rounding: ``assert_same_values``, as the two programs differ in structure); only
    the KL, clip fraction, approximate KL and gradient norm leave the metrics."""
    config = dataclasses.replace(TINY, objective=objective, steps=96, value_clip=0.2)
    runs = [
        jax.jit(make_train(dataclasses.replace(config, minibatch_diagnostics=on)))(
            jax.random.key(3)
        )
        for on in (True, False)
    ]
    (ts_on, m_on), (ts_off, m_off) = runs
    assert_same_values(ts_on.params, ts_off.params)
    dropped = {"clip_fraction", "grad_norm"}
    if objective == "clip":
        # The KL penalty objective's loss is made of the KL: logged either way.
        dropped |= {"kl", "approx_kl"}
    assert set(m_on) - set(m_off) == dropped and set(m_off) <= set(m_on)
    for key in m_off:
        assert_same_values(m_on[key], m_off[key], err_msg=key)
    with pytest.raises(ValueError, match="minibatch_diagnostics=False with lr_kl_cap"):
        dataclasses.replace(config, minibatch_diagnostics=False, lr_kl_cap=0.02)


def test_minibatch_shuffle_draws_other_minibatches_and_refuses_unknown_methods():
    """``index`` and ``sort`` shuffle the same batch into other minibatches: the same rollout
    (the first iteration's data metrics agree), other params after the update."""
    config = dataclasses.replace(TINY, objective="clip", steps=96, num_minibatches=2)
    (ts_i, m_i), (ts_s, m_s) = (
        cold_jit(make_train(dataclasses.replace(config, minibatch_shuffle=m)))(jax.random.key(3))
        for m in ("index", "sort")
    )
    np.testing.assert_array_equal(m_i["value_mean"][0], m_s["value_mean"][0])
    params_i, params_s = (jax.tree.leaves(jax.device_get(ts.params)) for ts in (ts_i, ts_s))
    diffs = [np.abs(a - b).max() for a, b in zip(params_i, params_s, strict=True)]
    assert max(diffs) > 0
    with pytest.raises(ValueError, match="minibatch_shuffle='riffle': choose one of"):
        dataclasses.replace(config, minibatch_shuffle="riffle")


def test_make_train_rejects_host_backends():
    with pytest.raises(ValueError, match="pure-JAX backend"):
        make_train(dataclasses.replace(TINY, backend="process"))
    _ = jnp.zeros(())


@pytest.mark.timeout(120)
@COLD
def test_next_values_equal_values_of_final_obs_with_truncation_mid_rollout():
    from batchppo.core.simulation import rollout

    trainer = Trainer(dataclasses.replace(TINY, max_length=3))  # truncations at t = 2, 5
    ppo = trainer.ppo
    ts = trainer.init(jax.random.key(0))
    # Non-trivial observation statistics, as after some training.
    ts = ts.replace(obs_norm=cold_jit(norm.update)(ts.obs_norm, normal(jax.random.key(2), (9, 3))))
    ss = trainer.init_sim(ts, jax.random.key(1))
    params = (ts.params, ts.obs_norm)
    _, traj, _ = cold_jit(lambda ss: rollout(ppo.env, ppo.policy_fn, params, ss, ppo.T))(ss)
    assert bool(traj.truncated[2].all()) and not bool(traj.truncated[-1].any())
    final_obs = cold_jit(ppo.normalize_obs)(ts.obs_norm, traj.final_obs)
    got = cold_jit(ppo.next_values)(ts.params, traj.extras["value"], final_obs, traj.truncated)
    full = cold_jit(ppo.network.value)(ts.params, final_obs)
    np.testing.assert_allclose(got, full, rtol=1e-5, atol=1e-5)


@pytest.mark.timeout(180)
@COLD
def test_host_loop_driver_trains_exactly_as_the_in_graph_driver():
    # Episodes of 10 steps end inside the rollouts of 8: truncation is exercised.
    config = dataclasses.replace(TINY, backend="sync", num_agents=2, max_length=10)
    graph, loop = Trainer(config), Trainer(dataclasses.replace(config, host_loop=True))
    loop.precompile(iterations=(1,), eval_episodes=2)
    states, metrics = [], []
    for trainer in (graph, loop):
        ts = trainer.init(host_key(0, 0))
        ss = trainer.init_sim(ts, host_key(0, 1))
        ts, ss, m1 = trainer.iteration(ts, ss)
        ts, ss, m2 = trainer.iterations(ts, ss, 2)
        states.append(jax.tree.map(np.asarray, ts))
        metrics.append([m1, *m2])
        trainer.close()
    assert isinstance(loop.programs["learn"].stage, jax.stages.Compiled)
    assert metrics[0][0]["episodes"] == 0 and metrics[0][1]["episodes"] == 2
    # The same computation in another order of compiled calls: equal up to float rounding.
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), *states)
    for a, b in zip(*metrics, strict=True):
        assert a.keys() == b.keys()
        ended_a, ended_b = a.pop(ENDED), b.pop(ENDED)
        np.testing.assert_allclose([a[k] for k in a], [b[k] for k in a], rtol=1e-4, atol=1e-6)
        # The same episodes, ended at the same steps; their returns up to float rounding.
        np.testing.assert_allclose(ended_a.score, ended_b.score, rtol=1e-4)
        assert ended_a == dataclasses.replace(ended_b, score=ended_a.score)


def test_host_loop_needs_a_host_backend():
    with pytest.raises(ValueError, match="host_loop=True drives host envs"):
        dataclasses.replace(TINY, host_loop=True)


@pytest.mark.timeout(120)
@COLD
def test_return_scaling_tracks_running_returns_across_iterations():
    config = dataclasses.replace(TINY, objective="clip", reward_scale="return", discount=0.5)
    trainer = Trainer(config)
    ppo = trainer.ppo
    ts = trainer.init(jax.random.key(0))
    # The first iteration's rollout by hand (same keys, same policy); the iteration donates
    # its inputs, so this runs first.
    ss0 = trainer.init_sim(ts, jax.random.key(1))
    params = (ts.params, ts.obs_norm)
    _, traj, _ = cold_jit(lambda ss: rollout(ppo.env, ppo.policy_fn, params, ss, ppo.T))(ss0)
    ts1, _, _ = trainer.iteration(ts, trainer.init_sim(ts, jax.random.key(1)))
    reward = np.asarray(traj.reward, np.float64)
    expected = np.zeros_like(reward)
    acc = np.zeros(reward.shape[1])
    for t in range(reward.shape[0]):  # Pendulum never terminates; 8 steps never truncate at 200
        acc = 0.5 * acc + reward[t]
        expected[t] = acc
    np.testing.assert_allclose(ts1.reward_return, acc, rtol=1e-5)
    np.testing.assert_allclose(norm.std(ts1.reward_norm), np.sqrt(expected.var(ddof=1) + 1e-4),
                               rtol=1e-4)  # fmt: skip
    trainer.close()


@pytest.mark.timeout(120)
@COLD
def test_target_kl_stops_the_update_and_leaves_params_after_the_stop():
    config = FAST_CLIP
    trainer = Trainer(config)
    ts = trainer.init(jax.random.key(0))
    ss = trainer.init_sim(ts, jax.random.key(1))
    _, _, free = trainer.iteration(ts, ss)
    assert free["steps_taken"] == 1.0 and free["kl"] > 1.5 * 1e-6
    stopping = Trainer(dataclasses.replace(config, target_kl=1e-6))
    ts0 = stopping.init(jax.random.key(0))
    _, _, stopped = stopping.iteration(ts0, stopping.init_sim(ts0, jax.random.key(1)))
    # The first of the 2 x 2 minibatches sees KL 0 and steps; the second sees the moved
    # policy and stops.
    assert stopped["steps_taken"] == pytest.approx(1 / 4)
    trainer.close()
    stopping.close()


@pytest.mark.timeout(120)
@COLD
def test_lr_kl_cap_scales_the_learning_rate_and_is_exact_under_the_cap():
    config = FAST_CLIP
    states, metrics = {}, {}
    for cap in (None, 1e6, 1e-6):
        trainer = Trainer(dataclasses.replace(config, lr_kl_cap=cap))
        ts = trainer.init(jax.random.key(0))
        ss = trainer.init_sim(ts, jax.random.key(1))
        metrics[cap] = []
        for _ in range(3):
            ts, ss, m = trainer.iteration(ts, ss)
            metrics[cap].append({k: float(v) for k, v in m.items() if k != ENDED})
        states[cap] = ts
        trainer.close()
    # A cap no update reaches changes nothing, bit for bit.
    jax.tree.map(np.testing.assert_array_equal, states[None], states[1e6])
    # A cap every update passes divides the scale by 1.5 per update; the logged learning
    # rate is the scheduled one times the scale the update used.
    assert float(states[1e-6].lr_scale) == pytest.approx(1.5**-3)
    lrs = [m["learning_rate"] for m in metrics[1e-6]]
    np.testing.assert_allclose(lrs, [0.05, 0.05 / 1.5, 0.05 / 1.5**2], rtol=1e-6)
    free, capped = (jax.tree.leaves(states[c].params) for c in (None, 1e-6))
    leaves = zip(free, capped, strict=True)
    assert not all(np.allclose(a, b) for a, b in leaves)


@pytest.mark.timeout(120)
@COLD
def test_advantages_under_given_params_are_gae_of_their_values():
    from batchppo.core import returns

    trainer = Trainer(dataclasses.replace(TINY, max_length=3))  # truncations at t = 2, 5
    ppo = trainer.ppo
    ts = trainer.init(jax.random.key(0))
    ss = trainer.init_sim(ts, jax.random.key(1))
    params = (ts.params, ts.obs_norm)
    _, traj, _ = cold_jit(lambda ss: rollout(ppo.env, ppo.policy_fn, params, ss, ppo.T))(ss)
    _, inputs, _, _ = cold_jit(ppo.make_batch)(ts, traj)
    other = cold_jit(ppo.init)(jax.random.key(7)).params
    advantages, targets = cold_jit(ppo.advantages)(other, inputs)
    value = cold_jit(ppo.network.value)
    values, next_values = value(other, inputs.obs), value(other, inputs.final_obs)
    expected = cold_jit(returns.gae, static_argnums=(5, 6))(
        inputs.reward,
        values,
        next_values,
        inputs.terminated,
        inputs.truncated,
        ppo.config.discount,
        ppo.config.gae_lambda,
    )
    np.testing.assert_allclose(advantages, expected[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, expected[1], rtol=1e-5, atol=1e-5)
    trainer.close()


@pytest.mark.timeout(180)
@COLD
def test_recompute_advantages_changes_only_the_epochs_after_the_first():
    config = FAST_CLIP

    def one_iteration(**changes):
        trainer = Trainer(dataclasses.replace(config, **changes))
        ts = trainer.init(jax.random.key(0))
        ts, _, _ = trainer.iteration(ts, trainer.init_sim(ts, jax.random.key(1)))
        trainer.close()
        return jax.tree.leaves(ts.params)

    # The first epoch starts from the rollout's params: its advantages are the rollout's.
    for a, b in zip(
        one_iteration(update_epochs=1),
        one_iteration(update_epochs=1, recompute_advantages=True),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # Later epochs take them from the value network the previous epochs trained.
    once = one_iteration()  # FAST_CLIP's 2 epochs
    again = one_iteration(recompute_advantages=True)
    pairs = zip(once, again, strict=True)
    assert not all(np.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in pairs)


def test_recompute_advantages_needs_a_feed_forward_network():
    with pytest.raises(ValueError, match="recompute_advantages=True with network='recurrent'"):
        dataclasses.replace(TINY, network="recurrent", recompute_advantages=True)


def test_lr_kl_cap_must_be_positive():
    with pytest.raises(ValueError, match="lr_kl_cap=0"):
        dataclasses.replace(TINY, lr_kl_cap=0)


def test_uint8_frames_reach_the_network_as_uint8():
    # A pure-JAX env with uint8 image observations: the frames stay uint8 in the rollout's
    # Transition, the training batch and every network call (scaled to [0, 1] only inside).
    env = ImageCueEnv(4)
    config = dataclasses.replace(IMAGE_TINY, update_epochs=1)
    network = make_network(config, env.spec)
    seen = []

    def record(fn):
        def wrapped(params, *args):
            obs = args[1] if len(args) == 3 else args[0]
            seen.append((fn.__name__, obs.dtype, obs.shape))
            return fn(params, *args)

        wrapped.__name__ = fn.__name__
        return wrapped

    recorded = (
        "policy_step",
        "policy_sequence",
        "value",
        "policy_step_and_value",
        "policy_sequence_and_value",
    )
    # The same network with the recorded functions wrapped (its fields in declaration order).
    fields = zip(Network.__annotations__, network, strict=True)
    network = Network(*(record(fn) if name in recorded else fn for name, fn in fields))
    ppo = PPO(config, env, network)
    ts = cold_jit(ppo.init)(jax.random.key(0))
    ss = cold_jit(ppo.init_sim)(jax.random.key(1))
    assert ts.obs_norm == (None,)  # images are not normalised
    _, traj, _ = cold_jit(
        lambda ts, ss: rollout(env, ppo.policy_fn, (ts.params, ts.obs_norm), ss, 8)
    )(ts, ss)
    assert traj.obs.dtype == jnp.uint8 and traj.obs.shape == (8, 4, 6, 6, 2)
    assert traj.final_obs.dtype == jnp.uint8
    batch, _, _, _ = cold_jit(ppo.make_batch)(ts, traj)
    assert batch.obs.dtype == jnp.uint8 and batch.obs.shape == (32, 1, 6, 6, 2)
    seen.clear()
    new_ts, _, metrics = cold_jit(ppo.iteration)(ts, ss)
    names = {name for name, _, _ in seen}
    # Acting and the loss run the shared torso once for the policy and the value; the
    # bootstrap value of the rollout's last step is a value call of its own.
    assert names == {"policy_step_and_value", "policy_sequence_and_value", "value"}
    assert {dtype for _, dtype, _ in seen} == {jnp.dtype(jnp.uint8)}
    minibatch = ("policy_sequence_and_value", jnp.dtype(jnp.uint8), (16, 1, 6, 6, 2))
    assert minibatch in seen
    assert np.isfinite(float(metrics["loss"])) and int(new_ts.step) == 32


@pytest.mark.parametrize("env_class", [ImageCueEnv, DictCueEnv])
def test_host_policy_takes_observations_in_their_spaces_dtypes(env_class):
    env = env_class(3)
    config = PPOConfig(
        backend="gymnax",
        network="feed_forward",
        cnn="minatar",
        cnn_dense=8,
        rollout_length=8,
        image_encoding="pixels",
    )
    ppo = PPO(config, env)
    ts = cold_jit(ppo.init)(jax.random.key(0))
    _, obs = cold_jit(env.reset)(jax.random.key(1))
    policy = HostPolicy(
        ppo.mode_fn, ppo.acting_params(ts), ppo.initial_carry, env.spec.obs_space, 0
    )
    host_obs = jax.tree.map(lambda x: np.asarray(x).tolist(), obs)  # plain lists, no dtype
    action = policy(host_obs)
    mode = cold_jit(ppo.mode_fn)
    want, _, _ = mode(ppo.acting_params(ts), (), obs, np.ones(3, bool), None)
    assert action.dtype == np.int32 and action.shape == (3,)
    np.testing.assert_array_equal(action, want)


def test_unroll_update_is_on_for_image_observations_on_the_cpu_and_set_explicitly():
    image, vector = ImageCueEnv(4).spec, DictCueEnv(4).spec
    assert jax.default_backend() == "cpu"  # the tests' platform (JAX_PLATFORMS=cpu in CI)
    assert resolve_unroll_update(None, image, "pixels") is True
    assert resolve_unroll_update(None, image) is False  # 6x6 uint8: a grid of codes, no CNN
    assert resolve_unroll_update(None, vector) is False
    assert resolve_unroll_update(True, vector) is True
    assert resolve_unroll_update(False, image, "pixels") is False


@pytest.mark.timeout(300)
@COLD
def test_xla_convolutions_compute_what_ynnpacks_do():
    states = {}
    for xla_convolutions in (False, True):
        config = dataclasses.replace(IMAGE_TINY, xla_convolutions=xla_convolutions)
        trainer = Trainer(config, ImageCueEnv(4))
        assert trainer.xla_convolutions is xla_convolutions
        ts = trainer.init(jax.random.key(0))
        ss = trainer.init_sim(ts, jax.random.key(1))
        ts, ss, _ = trainer.iterations(ts, ss, 2)
        assert int(ts.step) == 64 and int(ts.updates) == 2
        states[xla_convolutions] = jax.tree.map(np.asarray, ts.params)
    assert Trainer(IMAGE_TINY, ImageCueEnv(4)).xla_convolutions is True  # None: a CNN torso
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
        states[False],
        states[True],
    )


@pytest.mark.timeout(300)
@COLD
def test_an_unrolled_update_computes_what_the_looped_one_does():
    states = {}
    for unroll in (False, True):
        trainer = Trainer(dataclasses.replace(IMAGE_TINY, unroll_update=unroll), ImageCueEnv(4))
        assert trainer.ppo.unroll_update is unroll
        ts = trainer.init(jax.random.key(0))
        ss = trainer.init_sim(ts, jax.random.key(1))
        ts, ss, _ = trainer.iteration(ts, ss)
        ts, ss, metrics = trainer.iterations(ts, ss, 2)  # unrolled: two calls, not a scan
        assert len(metrics) == 2 and int(ts.step) == 96 and int(ts.updates) == 3
        states[unroll] = jax.tree.map(np.asarray, ts.params)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
        states[False],
        states[True],
    )
