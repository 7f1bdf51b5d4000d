"""Invalid-action masking: which observation leaf masks the action, and the masked policy
never takes, nor puts probability on, a disallowed action."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from batchppo.algorithms.networks.masking import MASKED_LOGIT, action_mask_leaf
from batchppo.algorithms.networks.networks import make_network
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.core import spaces
from batchppo.core.env import EnvSpec

OBS = {"action_mask": spaces.box((4,), bool, 0, 1), "board": spaces.box((3,), np.float32, -1, 1)}
SPEC = EnvSpec.from_spaces(OBS, spaces.Discrete(4))
CONFIG = PPOConfig(network="feed_forward", policy_layers=(8,), value_layers=(8,))


def test_auto_takes_a_leaf_named_action_mask_that_fits_the_action():
    assert action_mask_leaf("auto", SPEC) == 0  # tree order: action_mask, board
    assert action_mask_leaf("none", SPEC) is None
    assert action_mask_leaf("auto", EnvSpec.from_spaces(OBS, spaces.Discrete(5))) is None
    assert action_mask_leaf("auto", EnvSpec.from_spaces(OBS, spaces.MultiDiscrete([2, 2]))) is None
    nested = {"legal": spaces.MultiBinary(4), "x": {"action_mask": spaces.MultiBinary(4)}}
    assert action_mask_leaf("auto", EnvSpec.from_spaces(nested, spaces.Discrete(4))) == 1
    assert action_mask_leaf("legal", EnvSpec.from_spaces(nested, spaces.Discrete(4))) == 0


def test_a_named_mask_that_does_not_fit_is_one_line():
    with pytest.raises(spaces.UnsupportedSpaceError) as error:
        action_mask_leaf("legal", SPEC)
    assert str(error.value) == (
        "action_mask='legal': no observation leaf named 'legal' (keys: ['action_mask', "
        "'board']); name one, or set action_mask=none"
    )
    with pytest.raises(spaces.UnsupportedSpaceError, match=r"leaf Box\(\(3,\), float32\) does "):
        action_mask_leaf("board", SPEC)
    with pytest.raises(spaces.UnsupportedSpaceError, match="masks one Discrete action, not "):
        action_mask_leaf("action_mask", EnvSpec.from_spaces(OBS, spaces.MultiDiscrete([4])))


def _obs(allowed: list[list[bool]]) -> dict[str, jax.Array]:
    mask = jnp.asarray(allowed)
    return {"action_mask": mask, "board": jnp.ones((*mask.shape[:-1], 3), jnp.float32)}


def test_the_masked_policy_never_takes_a_disallowed_action():
    net = make_network(CONFIG, SPEC)
    params = net.init(jax.random.key(0))
    allowed = [[True, False, True, False], [False, False, False, True]]
    obs, first = _obs(allowed), jnp.ones(2, bool)
    dist, _ = net.policy_step(params, (), obs, first)
    logits = np.asarray(dist["logits"])
    assert (logits[~np.asarray(allowed)] == MASKED_LOGIT).all()
    assert (logits[np.asarray(allowed)] > -10).all()
    assert np.asarray(net.mode(dist)).tolist()[1] == 3
    draws = net.distribution(dist).sample(seed=jax.random.key(1), sample_shape=(2000,))
    assert np.asarray(allowed)[np.arange(2), np.asarray(draws)].all()
    probs = np.asarray(jax.nn.softmax(dist["logits"]))
    assert (probs[~np.asarray(allowed)] == 0.0).all()
    # One allowed action: a certain policy, whose entropy is 0.
    assert float(net.distribution(dist).entropy()[1]) == 0.0
    unmasked = make_network(dataclasses.replace(CONFIG, action_mask="none"), SPEC)
    plain, _ = unmasked.policy_step(params, (), obs, first)
    np.testing.assert_array_equal(logits[np.asarray(allowed)], plain["logits"][np.asarray(allowed)])


def test_sequences_and_values_are_masked_alike():
    net = make_network(CONFIG, SPEC)
    params = net.init(jax.random.key(0))
    allowed = [[[True, False, False, False], [False, True, True, False]]]  # (N=1, L=2, 4)
    obs, first = _obs(allowed), jnp.zeros((1, 2), bool)
    dist, values = net.policy_sequence_and_value(params, (), obs, first)
    assert values.shape == (1, 2)
    step0, _, _ = net.policy_step_and_value(params, (), _obs(allowed[0][:1]), jnp.ones(1, bool))
    np.testing.assert_allclose(dist["logits"][0, :1], step0["logits"], rtol=1e-5)
    sequence = net.policy_sequence(params, (), obs, first)
    np.testing.assert_array_equal(sequence["logits"], dist["logits"])
    assert (np.asarray(dist["logits"])[~np.asarray(allowed)] == MASKED_LOGIT).all()
