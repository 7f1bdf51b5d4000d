r"""CleanRL's PPO Atari script as published, its final model saved; that model in our evaluator.

``ppo_atari.py`` (the ``gymnasium-v1.0`` branch of vwxyzjn/cleanrl) has no ``--save-model``
flag. ``train`` runs the script unchanged as ``__main__`` (``runpy``, its own command line
after ``--``) and, once it has returned, saves the ``agent`` it trained (torch's
``state_dict``: CleanRL's own model file format, as its other scripts write with
``--save-model``)::

    python bench/cleanrl_atari.py train --model out.cleanrl_model -- \\
        /path/to/cleanrl/cleanrl/ppo_atari.py --env-id BreakoutNoFrameskip-v4 --seed 0 --no-cuda

``import`` writes such a model into a copy of one of our Atari run dirs (the
``breakout_atari`` settings: the Nature CNN shared by policy and value with linear heads,
CleanRL's network layer for layer), as its final checkpoint, so that ``batchppo evaluate``
plays it over the same games, with the same whole-game preprocessing and the same keys,
as the run's own policy::

    python bench/cleanrl_atari.py import runs_atari/cleanrl-Breakout-s0/model.cleanrl_model \\
        --like docs/runs/s0-breakout_atari-2M --out runs_atari/s0-cleanrl_breakout
    batchppo evaluate runs_atari/s0-cleanrl_breakout --episodes 30
    batchppo evaluate runs_atari/s0-cleanrl_breakout --episodes 30 --sample

The conversion is checked when it is made: the imported network's logits and value on a
batch of frames must equal torch's (to float32 rounding), else ``import`` fails. It needs
torch (the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import runpy
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

NATURE_CONVS = ("network.0", "network.2", "network.4")
"""The torch names of CleanRL's three convolutions, in order."""
NATURE_DENSE = "network.7"
"""The torch name of CleanRL's 3136 -> 512 layer."""
CHECK_ATOL = 1e-4
"""How far (absolute, on logits and values) the imported network may be from torch's."""


def train(model_path: str, script_argv: Sequence[str]) -> None:
    """Runs CleanRL's script (``script_argv[0]``, its arguments after it) as ``__main__``,
    then saves the ``agent`` it trained to ``model_path`` (torch's ``state_dict``)."""
    import torch

    script = script_argv[0]
    sys.argv = list(script_argv)
    scope = runpy.run_path(script, run_name="__main__")
    torch.save(scope["agent"].state_dict(), model_path)
    print(f"cleanrl_atari: the trained agent saved to {model_path}", flush=True)


def _dense(weight: np.ndarray, bias: np.ndarray) -> dict[str, np.ndarray]:
    """A torch ``Linear`` (out x in) as a Flax ``Dense`` (in x out)."""
    return {"kernel": weight.T.copy(), "bias": bias.copy()}


def _conv(weight: np.ndarray, bias: np.ndarray) -> dict[str, np.ndarray]:
    """A torch ``Conv2d`` (out, in, h, w) as a Flax ``Conv`` (h, w, in, out)."""
    return {"kernel": weight.transpose(2, 3, 1, 0).copy(), "bias": bias.copy()}


def _flatten_order(channels: int, height: int, width: int) -> np.ndarray:
    """For each input of a Flax dense layer after an HWC flatten, the index of the same
    feature in torch's CHW flatten."""
    return (
        np.arange(channels * height * width)
        .reshape(channels, height, width)
        .transpose(1, 2, 0)
        .reshape(-1)
    )


def torch_to_nature(state: Mapping[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """CleanRL's Atari ``Agent`` weights, by layer, in Flax's layouts: ``conv0..2``,
    ``dense`` (its inputs reordered from torch's CHW flatten to an HWC one), ``actor`` and
    ``critic``."""
    arrays = {name: np.asarray(value.detach().cpu().numpy()) for name, value in state.items()}
    layers = {
        f"conv{i}": _conv(arrays[f"{name}.weight"], arrays[f"{name}.bias"])
        for i, name in enumerate(NATURE_CONVS)
    }
    dense = _dense(arrays[f"{NATURE_DENSE}.weight"], arrays[f"{NATURE_DENSE}.bias"])
    channels = arrays[f"{NATURE_CONVS[-1]}.weight"].shape[0]
    side = round((dense["kernel"].shape[0] / channels) ** 0.5)
    dense["kernel"] = dense["kernel"][_flatten_order(channels, side, side)]
    layers["dense"] = dense
    layers["actor"] = _dense(arrays["actor.weight"], arrays["actor.bias"])
    layers["critic"] = _dense(arrays["critic.weight"], arrays["critic.bias"])
    return layers


def nature_params(layers: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, Any]:
    """``torch_to_nature``'s layers as the params of our ``cnn: nature``, ``shared_torso``
    network with linear heads (``policy_layers: []``, ``value_layers: []``)."""
    return {
        "policy": {"head": {"Dense_0": dict(layers["actor"])}},
        "torso": {
            "cnn_0": {
                **{f"Conv_{i}": dict(layers[f"conv{i}"]) for i in range(len(NATURE_CONVS))},
                "Dense_0": dict(layers["dense"]),
            }
        },
        "value": {"Dense_0": dict(layers["critic"])},
    }


def check_same_shapes(ours: Any, theirs: Any) -> None:
    """Raises SystemExit unless the two param trees have the same structure and shapes."""
    import jax

    shapes = [jax.tree_util.tree_map(np.shape, tree) for tree in (ours, theirs)]
    if shapes[0] != shapes[1]:
        raise SystemExit(
            f"import: the run's network {shapes[0]} is not CleanRL's {shapes[1]}; --like must "
            "name a run of the breakout_atari settings (Nature CNN, shared torso, linear heads)"
        )


def check_outputs(agent: Any, network: Any, params: Any, frames: np.ndarray) -> float:
    """The largest absolute difference between torch's and our logits and values on
    ``frames``; raises SystemExit if it exceeds ``CHECK_ATOL``."""
    import jax.numpy as jnp
    import torch

    with torch.no_grad():
        hidden = agent.network(torch.as_tensor(frames, dtype=torch.float32) / 255.0)
        logits, value = agent.actor(hidden).numpy(), agent.critic(hidden).numpy()[:, 0]
    first = jnp.ones(len(frames), bool)
    dist, _, ours = network.policy_step_and_value(
        params, network.initial_carry(len(frames)), (jnp.asarray(frames),), first
    )
    (our_logits,) = (leaf for leaf in _leaves(dist) if leaf.shape == logits.shape)
    gap = max(
        float(np.max(np.abs(np.asarray(our_logits) - logits))),
        float(np.max(np.abs(np.asarray(ours) - value))),
    )
    if gap > CHECK_ATOL:
        raise SystemExit(
            f"import: the converted network is {gap:.2e} from torch's (> {CHECK_ATOL})"
        )
    return gap


def _leaves(tree: Any) -> list[Any]:
    import jax

    return jax.tree_util.tree_leaves(tree)


def import_model(model_path: str, like: str, out: str, check_frames: int = 16) -> Path:
    """Writes CleanRL's trained agent at ``model_path`` into a new run dir ``out``: ``like``'s
    config, and the agent as its final checkpoint (at the config's ``steps``).

    Returns:
        The checkpoint written.
    """
    import dataclasses

    import torch

    from batchppo.core.keys import host_key
    from batchppo.experiment import trainers
    from batchppo.experiment.artifacts import checkpoint
    from batchppo.experiment.artifacts.loading import INIT_KEY, loading_config
    from batchppo.experiment.artifacts.rundir import CHECKPOINT_DIR, CONFIG_FILE, open_run_dir

    state_dict = torch.load(model_path, map_location="cpu", weights_only=True)
    params = nature_params(torch_to_nature(state_dict))
    out_dir = Path(out)
    if out_dir.exists():
        raise SystemExit(f"import: {out_dir} exists; name a new run dir")
    config, like_dir = open_run_dir(like)
    out_dir.mkdir(parents=True)
    shutil.copy2(like_dir / CONFIG_FILE, out_dir / CONFIG_FILE)
    trainer = trainers.build_trainer(None, dataclasses.replace(loading_config(config), devices=1))
    try:
        state = trainer.init(host_key(config.seed, INIT_KEY))
        check_same_shapes(state.params, params)
        params = jax_tree(params, state.params)
        agent = _torch_agent(state_dict)
        frames = np.random.default_rng(0).integers(0, 256, (check_frames, 4, 84, 84), np.uint8)
        gap = check_outputs(agent, trainer.agent.network, params, frames)
        state = state.replace(params=params)
        path = checkpoint.save_checkpoint(
            out_dir / CHECKPOINT_DIR, state, config.steps, meta={"imported": str(model_path)}
        )
    finally:
        trainer.close()
    print(f"cleanrl_atari: {model_path} -> {path} (largest gap to torch: {gap:.1e})", flush=True)
    return path


def jax_tree(params: Any, like: Any) -> Any:
    """``params`` as device arrays of ``like``'s dtypes."""
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda p, t: jnp.asarray(p, t.dtype), params, like)


def _torch_agent(state_dict: Mapping[str, Any]) -> Any:
    """CleanRL's Atari network holding ``state_dict``, in eval mode."""
    agent = cleanrl_network(state_dict["actor.weight"].shape[0])
    agent.load_state_dict(state_dict)
    return agent.eval()


def cleanrl_network(actions: int) -> Any:
    """CleanRL's Atari ``Agent`` network, its layers in its order (so its ``state_dict`` has
    the same names), with torch's default initialisation."""
    from torch import nn

    agent = nn.Module()
    agent.network = nn.Sequential(
        nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
    )  # fmt: skip
    agent.actor = nn.Linear(512, actions)
    agent.critic = nn.Linear(512, 1)
    return agent


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("train", help="run CleanRL's script, save its agent")
    run.add_argument("--model", required=True, help="where to save the trained agent")
    run.add_argument("script_argv", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...]")
    load = commands.add_parser("import", help="write a saved agent into a run dir of ours")
    load.add_argument("model", help="the agent CleanRL's run saved (train --model)")
    load.add_argument("--like", required=True, help="a run dir of the breakout_atari settings")
    load.add_argument("--out", required=True, help="the new run dir to write")
    args = parser.parse_args(argv)
    if args.command == "import":
        import_model(args.model, args.like, args.out)
    elif args.command == "train":
        script_argv = args.script_argv
        if script_argv[:1] == ["--"]:
            script_argv = script_argv[1:]
        if not script_argv:
            parser.error("train: name CleanRL's script after --")
        train(args.model, script_argv)


if __name__ == "__main__":
    main()
