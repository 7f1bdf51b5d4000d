"""The ``ale`` backend's envs (``batchppo.backends.ale_env``): the same-step autoreset over ALE's
NEXT_STEP mode, host and fused modes step by step, the process backend's ``preprocess: atari``
matched where ALE is deterministic, the game scores, and the one-line errors."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.backends import make_env
from batchppo.backends.ale import AleOptions, ale_game
from batchppo.backends.ale_env import (
    GPU_COMPILER_OPTIONS,
    STEP_TARGET,
    AleFusedEnv,
    AleState,
    AleVectorEnv,
    _keep_games,
    _xla_functions,
    atari_stack,
    check_step_calls,
    env_seeds,
    game_flags,
    step_calls,
)
from batchppo.envs import AtariStack, make

pytestmark = pytest.mark.timeout(120)

BREAKOUT = "ALE/Breakout-v5"


def _options(**changes):
    return {**vars(AleOptions()), **changes}


def _rollout(env, key, actions, chunks=1):
    """``reset(key)`` then ``lax.scan``s of ``step`` over ``actions`` ``(T, n)`` in ``chunks``
    compiled calls: the first observations, the steps and the env state after each call."""

    def scan(state, actions):
        def body(state, action):
            res = env.step(state, action, key)
            return res.state, (res.obs, res.reward, res.terminated, res.truncated, res.final_obs)

        return jax.lax.scan(body, state, actions)

    state, obs = jax.jit(env.reset)(key)
    scan, steps, states = jax.jit(scan), [], []
    for part in jnp.array_split(actions, chunks):
        state, chunk = scan(state, part)
        steps.append(jax.device_get(chunk))
        states.append(state)
    steps = tuple(np.concatenate(leaves) for leaves in zip(*steps, strict=True))
    return jax.device_get(obs), steps, states


def test_ale_ids_map_to_rom_names_and_unknown_ones_are_one_line_errors():
    assert ale_game("ALE/Breakout-v5") == "breakout"
    assert ale_game("ALE/MsPacman-v5") == "ms_pacman"
    assert ale_game("pong") == "pong"
    with pytest.raises(ValueError, match=r"^unknown ALE game 'ALE/Breakot-v5'\. Did you mean"):
        ale_game("ALE/Breakot-v5")


def test_bad_options_and_env_kwargs_are_one_line_errors():
    with pytest.raises(ValueError, match=r"^backend_options\.mode='fast': the ale backend's "):
        AleOptions(mode="fast")
    with pytest.raises(ValueError, match=r"^backend_options\.batch_size=4: a batch size is for"):
        AleOptions(batch_size=4)
    with pytest.raises(ValueError, match=r"^backend_options\.num_threads=-1: must be >= 0"):
        AleOptions(num_threads=-1)
    with pytest.raises(ValueError, match=r"^backend_options\.batch_size=2: the learners act on"):
        AleVectorEnv(BREAKOUT, 4, AtariStack(), batch_size=2)
    with pytest.raises(ValueError, match=r"max_length=100: the ale backend ends games at"):
        atari_stack(BREAKOUT, 100, {})
    with pytest.raises(ValueError, match=r"env_kwargs \['frameskip'\]: the ale backend takes"):
        atari_stack(BREAKOUT, None, {"frameskip": 1})
    assert atari_stack(BREAKOUT, None, {}) == AtariStack()
    assert atari_stack(BREAKOUT, None, {"preprocess": "atari_game"}).clip_rewards is False


def test_xla_missing_or_failing_is_a_one_line_error_naming_host_mode(monkeypatch):
    with pytest.raises(ValueError, match=r"lacks; pip install 'ale-py>=0\.12', or set backend_"):
        _xla_functions(types.SimpleNamespace())

    def fails():
        raise RuntimeError("no FFI here\nmore")

    with pytest.raises(ValueError, match=r"^AtariVectorEnv\.xla\(\) failed \(RuntimeError: no "):
        _xla_functions(types.SimpleNamespace(xla=fails))
    import ale_py

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.delattr(ale_py._ale_py, "VectorXLAStepGPU")
    with pytest.raises(ValueError, match=r"on gpu needs ale-py's XLA targets for it.*mode=host"):
        _xla_functions(types.SimpleNamespace(xla=fails))


def test_the_game_ends_at_truncation_or_a_termination_without_a_lost_life():
    # life lost, last life lost, over with lives left, cut, nothing, life lost at the cut
    terminated = np.array([True, True, True, False, False, True])
    truncated = np.array([False, False, False, True, False, False])
    lives = np.array([2, 0, 3, 3, 2, 2])
    before = np.array([3, 1, 3, 3, 3, 3])
    steps = np.array([5, 5, 5, 9, 5, 9])
    flags = game_flags(terminated, truncated, lives, before, steps, 9)
    assert [f.tolist() for f in flags] == [
        [True, True, True, False, False, False],
        [False, False, False, True, False, True],
        [False, True, True, True, False, True],
    ]
    assert env_seeds(2**31 - 3, 4, np).tolist() == [2**31 - 3, 2**31 - 2, 0, 1]
    assert np.asarray(env_seeds(jnp.int32(2**31 - 3), 4, jnp)).tolist() == [
        2**31 - 3,
        2**31 - 2,
        0,
        1,
    ]


@pytest.mark.parametrize("max_frames", [480, 108_000], ids=["truncation", "game-over"])
def test_host_mode_matches_the_process_backends_preprocessing(max_frames):
    """Same actions, no sticky actions, no no-ops, no FIRE at reset: the newest frame, the
    rewards and the done sequences are equal. The process backend's reset after a lost life
    is one no-op step, which the ALE leaves to the agent: fed to the ALE here, it comes back
    with reward 0 and the frame the process backend's reset showed."""
    settings = {"noop_max": 0, "fire_reset": False, "max_frames": max_frames}
    stack = AtariStack(**settings)
    process = make(BREAKOUT, 1, backend="sync", preprocess={"name": "atari", **settings})
    ale = AleVectorEnv(BREAKOUT, 1, stack)
    actions = np.random.default_rng(0).integers(0, 4, 300).astype(np.int32)
    events = {"life": 0, "truncated": 0, "game": 0}
    try:
        p_obs, _ = process.reset(seed=5)
        a_obs, _ = ale.reset(seed=5)
        assert np.array_equal(p_obs[0, -1], a_obs[0, -1])
        assert not a_obs[0, :-1].any() and (p_obs[0] == p_obs[0, -1]).all()  # the padding
        lives = 5
        for action in actions:
            p_obs, p_rew, p_term, p_trunc, p_final = process.step_arrays(action[None])
            a_obs, a_rew, a_term, a_trunc, a_final = ale.step_arrays(action[None])
            assert (p_rew[0], p_term[0], p_trunc[0]) == (a_rew[0], a_term[0], a_trunc[0])
            assert np.array_equal(p_final[0, -1], a_final[0, -1])
            life_lost = a_term[0] and 0 < ale._lives[0] < lives
            lives = ale._lives[0]
            if life_lost:
                events["life"] += 1
                assert np.array_equal(a_obs, a_final)  # the game goes on: no reset
                a_obs, a_rew, a_term, a_trunc, _ = ale.step_arrays(np.zeros(1, np.int32))
                assert (a_rew[0], a_term[0], a_trunc[0]) == (0.0, False, False)
            elif a_term[0] or a_trunc[0]:
                events["game" if a_term[0] else "truncated"] += 1
                assert not a_obs[0, :-1].any() and (p_obs[0] == p_obs[0, -1]).all()
                lives = ale._lives[0]
            assert np.array_equal(p_obs[0, -1], a_obs[0, -1])
    finally:
        process.close()
        ale.close()
    if max_frames == 480:
        assert events["truncated"] >= 2 and events["life"] >= 2 and events["game"] == 0
    else:
        assert events["game"] >= 1 and events["life"] >= 4 and events["truncated"] == 0


def test_fused_and_host_modes_agree_step_by_step_and_keep_the_final_obs_rule():
    kwargs = {"preprocess": {"name": "atari", "max_frames": 600, "clip_rewards": False}}
    fused = make_env(BREAKOUT, 3, "ale", env_kwargs=kwargs, options=_options())
    host = make_env(BREAKOUT, 3, "ale", env_kwargs=kwargs, options=_options(mode="host"))
    assert isinstance(fused, AleFusedEnv) and isinstance(host.vector_env, AleVectorEnv)
    actions = jnp.asarray(np.random.default_rng(1).integers(0, 4, (400, 3)), jnp.int32)
    key = jax.random.key(3)
    try:
        f_first, f_steps, f_states = _rollout(fused, key, actions, chunks=4)
        f_games = np.concatenate([fused.take_games(state) for state in f_states])
        h_first, h_steps, _ = _rollout(host, key, actions)
        h_games = host.vector_env.take_games()
        # A new reset starts a new run of games: its first take counts from the reset.
        _, again, (state,) = _rollout(fused, key, actions[:200])
        again_games = fused.take_games(state)
    finally:
        fused.close()
        host.close()
    assert np.array_equal(f_first, h_first)
    for f_leaf, h_leaf in zip(f_steps, h_steps, strict=True):
        assert np.array_equal(f_leaf, h_leaf)
    obs, reward, terminated, truncated, final_obs = f_steps
    assert not (terminated & truncated).any()
    done = terminated | truncated
    assert np.array_equal(obs[~done], final_obs[~done])  # dense final_obs: obs where none ended
    # A reset (the game ended) pads the stack with zero frames; a lost life goes on.
    reset = ~obs[:, :, 2].any(axis=(-1, -2))
    assert not (reset & ~done).any()
    rows_equal = (obs == final_obs).all(axis=(-1, -2, -3))
    assert rows_equal[done & ~reset].all() and not rows_equal[reset].any()
    assert (reset == truncated | (terminated & reset)).all()
    assert truncated.sum() >= 3 and (terminated & reset).sum() >= 1
    assert (terminated & ~reset).sum() >= 3  # lives lost
    # Every game's raw score, in the order the games ended, from the unclipped rewards.
    scores, expected = np.zeros(3), []
    for t in range(len(actions)):
        scores += reward[t]
        for i in np.flatnonzero(reset[t]):
            expected.append(scores[i])
            scores[i] = 0.0
    assert f_games.tolist() == h_games.tolist() == expected and len(expected) >= 4
    # Taken after 200 steps of the same actions from the same key: the same first games.
    assert np.array_equal(again[1], reward[:200])
    done_by = [g for g, t in zip(expected, _game_ends(reset), strict=True) if t < 200]
    assert again_games.tolist() == done_by and 0 < len(done_by) < len(expected)


def test_envs_whose_games_end_at_one_step_are_reset_together_as_in_host_mode():
    # No no-ops: the games start alike and are cut together every 50 agent steps.
    stack = {"name": "atari", "max_frames": 200, "noop_max": 0, "clip_rewards": False}
    kwargs = {"preprocess": stack}
    fused = make_env(BREAKOUT, 3, "ale", env_kwargs=kwargs, options=_options())
    host = make_env(BREAKOUT, 3, "ale", env_kwargs=kwargs, options=_options(mode="host"))
    actions = jnp.asarray(np.random.default_rng(2).integers(0, 4, (120, 3)), jnp.int32)
    key = jax.random.key(4)
    try:
        f_first, f_steps, (state,) = _rollout(fused, key, actions)
        h_first, h_steps, _ = _rollout(host, key, actions)
        f_games, h_games = fused.take_games(state), host.vector_env.take_games()
    finally:
        fused.close()
        host.close()
    assert np.array_equal(f_first, h_first)
    for f_leaf, h_leaf in zip(f_steps, h_steps, strict=True):
        assert np.array_equal(f_leaf, h_leaf)
    truncated = f_steps[3]
    assert np.flatnonzero(truncated.all(axis=1)).tolist() == [49, 99]
    assert f_games.tolist() == h_games.tolist() and len(f_games) == 6


@pytest.mark.parametrize("preprocess", ["atari", "atari_game"])
def test_the_step_after_a_lost_life_presses_fire_so_a_policy_that_never_fires_ends_its_game(
    preprocess,
):
    # Breakout waits for FIRE after each life. Always NOOP: FIRE at the reset and after each
    # lost life launches the ball, the paddle never moves, and the game ends in well under a
    # game's frame cap (27,000 agent steps), in training and in the whole-game evaluation
    # alike, host and fused in step; without fire_reset the ball never leaves. 300 steps hold
    # two such games an env.
    kwargs = {"preprocess": {"name": preprocess, "noop_max": 0}}
    noop = jnp.zeros((300, 2), jnp.int32)
    key = jax.random.key(0)
    runs = {}
    for mode in ("fused", "host"):
        env = make_env(BREAKOUT, 2, "ale", env_kwargs=kwargs, options=_options(mode=mode))
        try:
            _, steps, (state,) = _rollout(env, key, noop)
            games = env.take_games(state) if mode == "fused" else env.vector_env.take_games()
        finally:
            env.close()
        runs[mode] = steps, games
    (f_steps, f_games), (h_steps, h_games) = runs["fused"], runs["host"]
    for f_leaf, h_leaf in zip(f_steps, h_steps, strict=True):
        assert np.array_equal(f_leaf, h_leaf)
    assert f_games.tolist() == h_games.tolist() and len(f_games) >= 2
    terminated = f_steps[2]
    lives_lost = 5 if preprocess == "atari" else 1  # a step flags each life, or the game
    assert terminated.sum(axis=0).min() >= lives_lost
    stalled = {"preprocess": {"name": preprocess, "noop_max": 0, "fire_reset": False}}
    env = make_env(BREAKOUT, 2, "ale", env_kwargs=stalled, options=_options(mode="host"))
    try:
        _, steps, _ = _rollout(env, key, noop)
    finally:
        env.close()
    assert not (steps[2] | steps[3]).any() and not steps[1].any()  # nothing happens


def _game_ends(reset):
    """The steps at which games ended, in the order of the scores (step, then env)."""
    return [t for t in range(len(reset)) for _ in np.flatnonzero(reset[t])]


def test_the_fused_state_keeps_the_games_in_a_ring_and_take_games_reads_each_once():
    ring, games = jnp.zeros(4), jnp.int32(3)
    ended = jnp.array([True, False, True])
    ring, games = _keep_games(ring, games, ended, jnp.array([7.0, 8.0, 9.0]))
    # Games 3 and 4 (env order) at slots 3 and 0; env 1 writes nothing.
    assert ring.tolist() == [9.0, 0.0, 0.0, 7.0] and int(games) == 5
    env = AleFusedEnv(BREAKOUT, 1, AtariStack(), num_threads=1)
    try:
        state = AleState(*[jnp.zeros(1)] * 5, jnp.arange(4.0), jnp.int32(3), jnp.int32(1))
        assert env.take_games(state).tolist() == [0.0, 1.0, 2.0]
        state = state.replace(games=jnp.int32(6))  # games 3, 4 and 5: slots 3, 0 and 1
        assert env.take_games(state).tolist() == [3.0, 0.0, 1.0]
        assert env.take_games(state).tolist() == []
        state = state.replace(games=jnp.int32(11))
        with pytest.raises(ValueError, match=r"^5 games ended since the last take_games, more "):
            env.take_games(state)
        state = state.replace(run=jnp.int32(2), games=jnp.int32(2))  # another reset's run
        assert env.take_games(state).tolist() == [0.0, 1.0]
    finally:
        env.close()


def _hlo(calls):
    """HLO text of a loop body with ``calls`` ALE step calls and one reset call."""
    call = (
        f'  %s = (u8[8], u8[2,4,84,84]) custom-call(%h, %a), custom_call_target="{STEP_TARGET}"\n'
    )
    reset = '  %r = u8[8] custom-call(%s), custom_call_target="atari_vector_xla_reset"\n'
    return "%body (p: (u8[8], s32[2])) -> u8[8] {\n" + call * calls + reset + "}\n"


def test_a_compiled_program_with_more_step_calls_than_its_trace_is_refused():
    assert [step_calls(_hlo(n)) for n in (0, 1, 2)] == [0, 1, 2]
    check_step_calls("iterations(1)", _hlo(1), _hlo(1))
    check_step_calls("two rollouts", _hlo(2), _hlo(2))
    message = (
        "^the compiled program 'iterations\\(1\\)' calls ALE's step \\(atari_vector_xla_step\\) 2 "
        "times where its trace calls it 1: XLA duplicated the call, so the emulators would "
        "advance several steps per agent step; set backend_options={mode: host}, or compile "
        "with XLA_FLAGS=--xla_gpu_enable_dynamic_slice_fusion=false$"
    )
    with pytest.raises(RuntimeError, match=message):
        check_step_calls("iterations(1)", _hlo(1), _hlo(2))


def test_the_compiled_cpu_rollout_holds_one_step_call_and_passes_the_guard(monkeypatch):
    env = AleFusedEnv(BREAKOUT, 2, AtariStack(), num_threads=1)
    key = jax.random.key(0)

    def scan(state, actions):  # the steps' observations stacked, as a rollout stacks them
        def body(state, action):
            res = env.step(state, action, key)
            return res.state, (res.obs, res.final_obs, res.reward)

        return jax.lax.scan(body, state, actions)

    try:
        state, _ = jax.jit(env.reset)(key)
        lowered = jax.jit(scan).lower(state, jnp.zeros((8, 2), jnp.int32))
        compiled = lowered.compile().as_text()
        assert step_calls(lowered.as_text(dialect="hlo")) == step_calls(compiled) == 1
        env.check_compiled("scan", lowered.as_text(dialect="hlo"), compiled)
        assert env.compiler_options == {}  # the CPU's XLA has no dynamic-slice fusion
        monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
        assert env.compiler_options == GPU_COMPILER_OPTIONS
    finally:
        env.close()
