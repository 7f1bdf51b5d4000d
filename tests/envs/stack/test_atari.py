"""The Atari preprocessing of make(preprocess="atari"): shapes, dtypes, order, episodes."""

from __future__ import annotations

import dataclasses
import importlib

import ale_py
import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import AtariPreprocessing

from batchppo.envs import AtariStack, WorkerOptions, make, make_env_fn
from batchppo.envs.stack.atari import EpisodicLife, FireReset, whole_games

pytestmark = pytest.mark.timeout(120)

FRAME = spaces.Box(0, 255, (4, 84, 84), np.uint8)


def test_make_atari_is_uint8_end_to_end_in_shared_memory():
    options = WorkerOptions(num_workers=2)
    with make("ALE/Breakout-v5", 3, seed=0, options=options, preprocess="atari") as env:
        assert env.single_observation_space == FRAME
        assert env.single_action_space == spaces.Discrete(4, dtype=np.int32)
        # The shared memory holds the frames as uint8: a quarter of float32's bytes.
        assert env.shared_layout.obs_leaves == (((4, 84, 84), "|u1"),)
        obs, _ = env.reset(seed=0)
        assert obs.dtype == np.uint8 and obs.shape == (3, 4, 84, 84)
        obs, reward, terminated, truncated, final_obs = env.step_arrays(np.ones(3, np.int32))
        assert obs.dtype == final_obs.dtype == np.uint8 and obs.shape == (3, 4, 84, 84)
        assert reward.dtype == np.float32
        assert terminated.dtype == truncated.dtype == np.bool_


def reference_frames(env_id, seed, actions, **settings):
    """The frames of Gymnasium's AtariPreprocessing alone, one per reset and step."""
    gymnasium.register_envs(ale_py)  # ALE's ids, whether or not batchppo registered them yet
    env = gymnasium.make(env_id, frameskip=1, repeat_action_probability=0.0)
    env = AtariPreprocessing(env, **settings)
    frames = [env.reset(seed=seed)[0]]
    for action in actions:
        frames.append(env.step(action)[0])
    return frames


def test_frame_stack_holds_the_last_four_frames_padded_with_the_reset_frame():
    actions = [2, 3, 2, 2, 3]
    frames = reference_frames("ALE/Breakout-v5", 3, actions)
    env = make_env_fn(
        "ALE/Breakout-v5",
        preprocess={"name": "atari", "fire_reset": False, "episodic_life": False},
    )()
    obs, _ = env.reset(seed=3)
    assert obs.dtype == np.uint8 and obs.shape == (4, 84, 84)
    np.testing.assert_array_equal(obs, np.stack([frames[0]] * 4))
    for t, action in enumerate(actions, start=1):
        obs, *_ = env.step(action)
        window = [frames[max(i, 0)] for i in range(t - 3, t + 1)]  # oldest first
        np.testing.assert_array_equal(obs, np.stack(window))
    assert len({frame.tobytes() for frame in frames}) > 1  # the frames do change


def test_the_ale_envs_own_screen_type_changes_nothing_the_stack_returns():
    # The stack asks the ALE env for grey screens (cheaper, unused); RGB gives the same steps.
    grey = AtariStack().make("ALE/Breakout-v5", None, {})
    rgb = AtariStack().make("ALE/Breakout-v5", None, {"obs_type": "rgb"})
    assert grey.unwrapped._obs_type == "grayscale" and rgb.unwrapped._obs_type == "rgb"
    actions = np.random.default_rng(0).integers(4, size=400)
    np.testing.assert_array_equal(grey.reset(seed=5)[0], rgb.reset(seed=5)[0])
    ends = 0
    for action in actions:
        a, b = grey.step(int(action)), rgb.step(int(action))
        for x, y in zip(a[:4], b[:4], strict=True):
            np.testing.assert_array_equal(x, y)
        if a[2] or a[3]:
            ends += 1
            np.testing.assert_array_equal(grey.reset()[0], rgb.reset()[0])
    assert ends > 0  # lives were lost, and the restarts agree too


def test_noop_starts_follow_the_seed():
    """AtariPreprocessing draws 1..30 no-ops from the env's generator, seeded by the reset
    seed; FIRE then takes 4 frames. Same seed, same start; the frame count shows the no-ops."""

    def start(seed):
        env = make_env_fn("ALE/Breakout-v5", preprocess="atari")()
        obs, info = env.reset(seed=seed)
        return obs, info["episode_frame_number"]

    starts = [start(seed) for seed in range(4)]
    assert [frames for _, frames in starts] == [22 + 4, 5 + 4, 19 + 4, 25 + 4]
    again = start(2)
    assert again[1] == starts[2][1]
    np.testing.assert_array_equal(again[0], starts[2][0])


def test_rewards_are_clipped_and_the_raw_return_is_in_the_episode_info():
    """SpaceInvaders pays 5-30 a hit: the learner's rewards are their sign, the ``episode``
    info of the game's end their raw sum; a game cut at max_frames is a truncation."""
    settings = {"name": "atari", "episodic_life": False, "max_frames": 2000}
    runs = {}
    for clip in (True, False):
        env = make_env_fn("ALE/SpaceInvaders-v5", preprocess={**settings, "clip_rewards": clip})()
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        rewards = []
        while True:
            _, reward, terminated, truncated, info = env.step(int(rng.integers(6)))
            rewards.append(float(reward))
            if terminated or truncated:
                break
        runs[clip] = (np.array(rewards), terminated, truncated, info)
    raw, clipped = runs[False][0], runs[True][0]
    assert raw.max() > 1 and np.array_equal(clipped, np.sign(raw))
    for rewards, terminated, truncated, info in runs.values():
        assert (terminated, truncated) == (False, True)  # 2000 frames: a truncation
        assert info["episode_frame_number"] == 2000
        assert info["episode"]["r"] == raw.sum() and info["episode"]["l"] == len(rewards) + 1
    assert runs[True][0].sum() < raw.sum()


def play(env, seed, until_games=1):
    """Steps a batch env of one env with seeded random actions until ``until_games`` games
    ended; returns per step ``(terminated, truncated, lives, episode return or None, reward,
    whether the obs is one frame repeated 4 times)``.
    """
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    steps, games = [], 0
    while games < until_games:
        obs, reward, terminated, truncated, infos = env.step(
            rng.integers(4, size=1).astype(np.int32)
        )
        final = infos.get("final_info", {})
        episode = final["episode"]["r"][0] if final.get("_episode", [False])[0] else None
        lives = final["lives"][0] if "lives" in final else infos["lives"][0]
        repeated = all(np.array_equal(obs[0, 0], obs[0, k]) for k in range(1, 4))
        steps.append(
            (bool(terminated[0]), bool(truncated[0]), int(lives), episode, reward[0], repeated)
        )
        games += episode is not None
    return steps


@pytest.mark.parametrize("episodic_life", [True, False])
def test_episodic_life_is_a_setting_and_the_game_return_stays_whole(episodic_life):
    """With episodic_life, each of Breakout's 5 lives ends in ``terminated`` (the ``lives``
    info counts down) and the game continues; only the game's end carries the ``episode``
    info, with the return of all 5 lives. Without it, the game's end is the one
    termination."""
    settings = {"name": "atari", "episodic_life": episodic_life, "clip_rewards": False}
    with make("ALE/Breakout-v5", 1, backend="sync", preprocess=settings) as env:
        steps = play(env, seed=3)
    ends = [(lives, episode is not None) for te, _, lives, episode, _, _ in steps if te]
    # Same-step autoreset: the obs of an ending step is the next episode's first, its 4
    # frames the one frame after the reset (and the FIRE), life lost or game over.
    assert all(step[5] for step in steps if step[0])
    assert not all(step[5] for step in steps)
    if episodic_life:
        assert ends == [(4, False), (3, False), (2, False), (1, False), (0, True)]
    else:
        assert ends == [(0, True)]
    assert not any(step[1] for step in steps)  # no truncation
    rewards = [step[4] for step in steps]
    assert steps[-1][3] == sum(rewards) > 0


def test_a_reset_continues_the_game_only_after_a_lost_life():
    env = make_env_fn("ALE/Breakout-v5", preprocess="atari")()
    _, info = env.reset(seed=3)
    start = info["episode_frame_number"]
    for _ in range(5):
        env.step(0)
    _, info = env.reset()  # in the middle of a life: a new game (no-ops and FIRE again)
    assert info["lives"] == 5 and info["episode_frame_number"] <= 30 * 1 + 4
    rng = np.random.default_rng(3)
    while True:
        _, _, terminated, _, info = env.step(int(rng.integers(4)))
        if terminated:
            break
    frames = info["episode_frame_number"]
    assert info["lives"] == 4 and frames > start
    _, info = env.reset()  # after the lost life: the same game, one no-op and FIRE later
    assert info["lives"] == 4 and info["episode_frame_number"] == frames + 4 + 4


def test_wrapper_order_and_fire_reset():
    env = make_env_fn("ALE/Breakout-v5", preprocess="atari")()
    chain = []
    layer = env
    while isinstance(layer, gymnasium.Wrapper):
        chain.append(type(layer).__name__)
        layer = layer.env
    # Outermost first: make()'s stack, then the preprocessing's, then gymnasium.make's.
    # RangeNormalize maps nothing here (uint8 frames, Discrete actions).
    assert chain[:10] == [
        "ConvertTo32Bit",
        "RangeNormalize",
        "FrameStackObservation",
        "ClipReward",
        "FireReset",
        "EpisodicLife",
        "GameScoreLog",
        "RecordEpisodeStatistics",
        "AtariPreprocessing",
        "OrderEnforcing",
    ]
    assert env.unwrapped._frameskip == 1
    # Pong's action 1 is FIRE too; a game whose action 1 is not gets no FireReset.
    pong = make_env_fn("ALE/Pong-v5", preprocess="atari")()
    assert any(isinstance(w, FireReset) for w in _layers(pong))
    no_fire = make_env_fn("ALE/Freeway-v5", preprocess="atari")()
    assert not any(isinstance(w, FireReset) for w in _layers(no_fire))
    assert any(isinstance(w, EpisodicLife) for w in _layers(no_fire))


def _layers(env):
    out = []
    while isinstance(env, gymnasium.Wrapper):
        out.append(env)
        env = env.env
    return out


def test_sticky_actions_are_a_setting():
    assert AtariStack().repeat_action_probability == 0.0
    for preprocess in (
        {"name": "atari", "repeat_action_probability": 0.25},
        AtariStack(repeat_action_probability=0.25),
    ):
        env = make_env_fn("ALE/Breakout-v5", preprocess=preprocess)()
        assert env.unwrapped.ale.getFloat("repeat_action_probability") == 0.25


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match=r"^ALE/Breakout-v5: a step limit \(max_length=100, "):
        make_env_fn("ALE/Breakout-v5", max_length=100, preprocess="atari")
    with pytest.raises(
        ValueError,
        match=r"^ALE/Breakout-v5: frameskip is set by the Atari preprocessing; set "
        r"AtariStack.frame_skip instead of passing frameskip=\.$",
    ):
        make_env_fn("ALE/Breakout-v5", preprocess="atari", frameskip=4)
    with pytest.raises(ValueError, match=r"^preprocess='atari' needs an ALE env id"):
        make_env_fn("CartPole-v1", preprocess="atari")
    with pytest.raises(
        ValueError, match=r"^preprocess must be None, one of \['atari', 'atari_game'\]"
    ):
        make_env_fn("ALE/Breakout-v5", preprocess="atrai")
    with pytest.raises(ValueError, match=r"; got \{'stack': 2\}\.$"):
        make_env_fn("ALE/Breakout-v5", preprocess={"stack": 2})
    with pytest.raises(ValueError, match=r"^AtariStack.stack must be >= 1, got 0\.$"):
        make_env_fn("ALE/Breakout-v5", preprocess={"name": "atari", "stack": 0})
    with pytest.raises(ValueError, match=r"^preprocess='atari': .*'frames'"):
        make_env_fn("ALE/Breakout-v5", preprocess={"name": "atari", "frames": 4})
    with pytest.raises(ValueError, match=r"^FireReset: action 1 of ALE/Freeway-v5 is 'UP'"):
        FireReset(gymnasium.make("ALE/Freeway-v5"))


def test_ale_ids_import_ale_py_and_say_how_to_install_it(monkeypatch):
    with pytest.raises(
        ValueError,
        match=r"^unknown Gymnasium env id 'ALE/Breakot-v5'\. Did you mean 'ALE/Breakout-v5'\?",
    ):
        make_env_fn("ALE/Breakot-v5", preprocess="atari")
    atari_module = importlib.import_module("batchppo.envs.stack.atari")

    def no_ale(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(atari_module.importlib, "import_module", no_ale)
    with pytest.raises(
        ValueError,
        match=r"^Atari envs need ale-py \(No module named 'ale_py'\); install it with pip "
        r"install 'batchppo\[atari\]'\.$",
    ):
        make_env_fn("ALE/Breakot-v5")


def test_whole_games_score_every_life_with_raw_rewards():
    """``preprocess="atari_game"`` (the Atari presets' eval env): one episode is one game,
    FIRE is pressed after each lost life, and the return is the raw score that
    RecordEpisodeStatistics reports; its steps are the agent's plus one FIRE per life."""
    env = make_env_fn("ALE/Breakout-v5", normalize_ranges=False, preprocess="atari_game")()
    assert AtariStack().episodic_life and not whole_games().episodic_life
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    total, steps, lives = 0.0, 0, []
    while True:
        action = int(rng.integers(0, 4)) if rng.random() < 0.5 else 0
        _, reward, terminated, truncated, info = env.step(action)
        total, steps = total + float(reward), steps + 1
        lives.append(env.unwrapped.ale.lives())
        if terminated or truncated:
            break
    assert (terminated, truncated) == (True, False)
    assert sorted(set(lives)) == [0, 1, 2, 3, 4, 5]  # every life in one episode
    assert total == info["episode"]["r"] == 2.0
    assert info["episode"]["l"] == steps + 5  # FIRE after the reset and after 4 lost lives
    env.close()


def test_the_atari_presets_evaluate_whole_games():
    from batchppo.experiment.config.configs import get_preset

    for name, game in (("breakout_atari", "Breakout"), ("pong_atari", "Pong")):
        config = get_preset(name)
        assert (config.env, config.backend, config.max_length) == (
            f"ALE/{game}-v5",
            "process",
            None,
        )
        assert config.env_kwargs == {"preprocess": "atari"}
        assert config.eval_env_kwargs == {"preprocess": "atari_game"}
        assert (config.num_agents, config.rollout_length, config.update_epochs) == (8, 128, 4)
        assert (config.num_minibatches, config.clip_epsilon, config.value_clip) == (4, 0.1, 0.1)
        assert (config.learning_rate, config.anneal_lr, config.entropy_coef) == (2.5e-4, True, 0.01)
        assert (config.cnn, config.shared_torso, config.policy_layers) == ("nature", True, ())
        assert not config.normalize_observations and not config.normalize_rewards


def test_the_eval_env_takes_eval_env_kwargs_over_env_kwargs(monkeypatch):
    from batchppo.algorithms.training import trainer
    from batchppo.experiment.config.configs import get_preset

    built = []
    monkeypatch.setattr(trainer, "make_run_env", lambda c, n, kw: built.append((c, n, kw)))
    config = dataclasses.replace(
        get_preset("breakout_atari"), env_kwargs={"preprocess": "atari", "mode": 0}
    )
    no_eval_kwargs = dataclasses.replace(config, eval_env_kwargs={})
    trainer.make_run_eval_env(config, 2)
    trainer.make_run_eval_env(no_eval_kwargs, 3)
    assert built == [
        (config, 2, {"preprocess": "atari_game", "mode": 0}),
        (no_eval_kwargs, 3, {"preprocess": "atari", "mode": 0}),
    ]
    # The eval env is built from the run's config itself: its parsed backend options too.
    assert built[0][0] is config


def test_the_start_up_probe_builds_a_preprocessed_env():
    from batchppo.envs.make import probe_env

    probe = probe_env("ALE/Pong-v5", normalize_ranges=False, env_kwargs={"preprocess": "atari"})
    assert probe.observation_space == spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert probe.action_space == spaces.Discrete(6, dtype=np.int32)
    assert probe.time_limit is None
    with pytest.raises(ValueError, match=r"^ALE/Pong-v5: frameskip is set by the Atari"):
        probe_env("ALE/Pong-v5", env_kwargs={"preprocess": "atari", "frameskip": 2})


def test_the_process_backends_env_reports_each_games_raw_score_once():
    """Under the training preprocessing (lives as episodes, clipped rewards) the host env
    takes from the workers the raw score of every game that ended: the ``episode`` returns."""
    from batchppo.backends import make_env

    env = make_env(
        "ALE/Breakout-v5",
        2,
        "process",
        env_kwargs={"preprocess": "atari"},
        options={"num_workers": 2},
    )
    other = make_env("CartPole-v1", 1, "sync")
    try:
        assert env.reports_games and not other.reports_games
        assert other.take_games().tolist() == []
        env.host_reset(0)
        recorder = EpisodeReturns(env)
        rng = np.random.default_rng(0)
        while len(recorder.games) < 3:
            env.host_step(rng.integers(0, 4, 2).astype(np.int32))
        assert sorted(env.take_games().tolist()) == sorted(recorder.games)
        assert env.take_games().tolist() == []
    finally:
        env.close()
        other.close()


class EpisodeReturns:
    """The ``episode`` returns of a HostEnv's games, read off its infos (``record_infos``)."""

    def __init__(self, env):
        self.games = []
        env.record_infos(self)

    def reset(self, infos):
        pass

    def step(self, infos, terminated, truncated):
        final = infos.get("final_info", {})
        for i in np.flatnonzero(final.get("_episode", [])):
            self.games.append(float(final["episode"]["r"][i]))
