"""bench/cleanrl_atari.py: CleanRL's Atari agent, converted to our network, gives torch's
logits and values; a network of other shapes is refused."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest
import torch
from benchlib import load_bench

from batchppo.algorithms.networks.networks import make_network
from batchppo.algorithms.ppo.config import PPOConfig
from batchppo.core import spaces
from batchppo.core.env import EnvSpec

# breakout_atari's network: the Nature CNN shared by linear policy and value heads.
NATURE = PPOConfig(
    network="feed_forward", cnn="nature", shared_torso=True, policy_layers=(), value_layers=()
)
SPEC = EnvSpec.from_spaces(spaces.box((4, 84, 84), np.uint8, 0, 255), spaces.Discrete(4))


def _converted(bench, config=NATURE):
    torch.manual_seed(0)
    agent = bench.cleanrl_network(4).eval()
    network = make_network(config, SPEC)
    params = bench.nature_params(bench.torch_to_nature(agent.state_dict()))
    return agent, network, params


def test_the_converted_agent_gives_torchs_logits_and_values():
    bench = load_bench("cleanrl_atari")
    agent, network, params = _converted(bench)
    bench.check_same_shapes(jax.eval_shape(network.init, jax.random.key(0)), params)
    frames = np.random.default_rng(1).integers(0, 256, (2, 4, 84, 84), np.uint8)
    assert bench.check_outputs(agent, network, params, frames) < 1e-5
    # The flatten order matters: torch's CHW order fed to an HWC flatten is another network.
    layers = bench.torch_to_nature(agent.state_dict())
    layers["dense"]["kernel"] = agent.network[7].weight.detach().numpy().T
    with pytest.raises(SystemExit, match="from torch's"):
        bench.check_outputs(agent, network, bench.nature_params(layers), frames)


def test_a_network_of_other_shapes_is_refused():
    bench = load_bench("cleanrl_atari")
    _, _, params = _converted(bench)
    other = make_network(dataclasses.replace(NATURE, value_layers=(64,)), SPEC)
    with pytest.raises(SystemExit, match="not CleanRL's"):
        bench.check_same_shapes(jax.eval_shape(other.init, jax.random.key(0)), params)


def test_train_runs_the_script_as_main_and_saves_its_agent(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import sys, torch\n"
        "if __name__ == '__main__':\n"
        "    torch.manual_seed(int(sys.argv[1]))\n"
        "    agent = torch.nn.Linear(3, 2)\n"
    )
    model = tmp_path / "agent.cleanrl_model"
    load_bench("cleanrl_atari").main(["train", "--model", str(model), "--", str(script), "7"])
    torch.manual_seed(7)
    expected = torch.nn.Linear(3, 2).state_dict()
    saved = torch.load(model, weights_only=True)
    assert all(torch.equal(saved[name], expected[name]) for name in expected)
