"""``batchppo export``: a run's policy as one ONNX file, from env observation to env action.

The exported model is the whole path a run's policy takes from what the env itself emits to
what the env itself takes, so that a deployment needs onnxruntime and nothing of batchppo:

1. range normalisation of the observation (``normalize_ranges``: bounded dims to ``[-1, 1]``, the
   map of ``batchppo.core.ranges``);
2. the run's streaming observation normalisation (its mean and std at the checkpoint, clipped
   to ``obs_clip``), where the run normalises observations;
3. the policy network and its deterministic action (the Gaussian's mean, the categorical's argmax),
   as
   [`batchppo.experiment.artifacts.loading.load_policy`][batchppo.experiment.artifacts.loading.load_policy]
   computes it;
4. the action mapping back into the env's own action space: a ``Box`` action clipped to
   ``[-1, 1]`` and mapped to the env's bounds (``normalize_ranges``), or clipped to the env's
   bounds without it (Gymnasium's ``ClipAction``, which the env stack applies).

The model is made by converting the jitted JAX function with ``jax2onnx``. Inputs: ``obs``
(float32, ``(batch, *obs_shape)``, the env's own observation; a float64 env observation is
cast to float32 first, as the env stack's ``ConvertTo32Bit`` does) and, for a sampled
policy (``sampled=True``), ``noise``. Output: ``action`` (float32 for a Box, int32 for a
Discrete action). A recurrent policy also takes its state, ``state`` (float32,
``(batch, size)``, zeros at an episode start), and returns the next one, ``state_out``.
``jax2onnx`` 0.17.1 cannot convert ``jax.random``'s samplers (a shape built from a traced
value), so a sampled model takes its randomness as an input: standard
normal ``noise`` of the action's shape for a Gaussian (action ``mean + std * noise``), or
standard Gumbel ``noise`` of shape ``(batch, num_actions)`` for a categorical (action
``argmax(logits + noise)``, the Gumbel-max trick, which samples the same distribution).

Supported: feed-forward and recurrent (GRU) policies over one float ``Box`` observation,
with one 1-D ``Box`` action (Gaussian) or one ``Discrete`` action (categorical), trained on a
backend whose env mapping ``EXPORT_MAPPINGS`` tells (the host backends ``process``, ``sync``
and ``ray``, and ``gymnax``). Anything else raises an
[`ExportError`][batchppo.experiment.artifacts.export.ExportError] naming what is not supported.
``check_export`` runs the file in onnxruntime against ``load_policy`` (with the same env mapping
applied around it) on three calls of 256 observations.

Examples:
    A trained run's policy to ONNX, checked against ``load_policy`` on 3 x 256 observations
    (it needs a run directory and the ``onnx`` extra: the docs test skips it):

    >>> info = export_run("logdir/T-pendulum_jax", "policy.onnx")  # doctest: +SKIP
    >>> info.max_abs_diff  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from batchppo.core import spaces
from batchppo.core.ranges import RangeMap, range_map
from batchppo.core.wording import prose
from batchppo.experiment.artifacts.loading import load_run
from batchppo.experiment.errors import UserError
from batchppo.experiment.trainers import TrainerFactory

__all__ = [
    "EnvMapping",
    "ExportError",
    "ExportInfo",
    "bounds_mapping",
    "check_export",
    "export_run",
    "gymnasium_mapping",
]

OPSET = 17
"""The ONNX opset of exported models (onnxruntime 1.16 and newer run it)."""
CHECK_BATCH = 256
"""Observations per call that [`export_run`][batchppo.experiment.artifacts.export.export_run] checks
the file on."""
CHECK_STEPS = 3
"""Calls [`export_run`][batchppo.experiment.artifacts.export.export_run] checks the file on (a
recurrent state carried through them)."""
TOLERANCE = 1e-4
"""Largest difference of a Box action to ``load_policy``'s that the check accepts."""


class ExportError(UserError):
    """A run that cannot be exported, or a file that does not match the run (one line)."""


@dataclasses.dataclass(frozen=True, eq=False)
class EnvMapping:
    """What the env stack does around the policy, as float32 maps.

    Attributes:
        obs_map: The observation's range map (None: observations pass unchanged).
        act_map: The action's range map, clipping to ``[-1, 1]`` first (None: no rescaling).
        act_clip: ``(low, high)`` the action is clipped to without rescaling (Gymnasium's
            ``ClipAction``); None for none (a Discrete action, or a rescaled one).
        obs_space: The env's own observation space (the model's input), a float ``Box``.
        action_space: The env's own action space (the model's output).
    """

    obs_map: RangeMap | None
    act_map: RangeMap | None
    act_clip: tuple[np.ndarray, np.ndarray] | None
    obs_space: spaces.Box
    action_space: Any

    def observation(self, obs: Any) -> Any:
        """The env's own observation as the policy sees it (``jnp`` or NumPy, float32)."""
        obs = obs.astype(np.float32)
        if self.obs_map is None:
            return obs
        return (obs - self.obs_map.low) / self.obs_map.half_span - self.obs_map.one

    def action(self, action: Any, xp: Any = jnp) -> Any:
        """The policy's action as the env itself takes it (``xp``: ``jnp`` or ``np``)."""
        if self.act_map is not None:
            m = self.act_map
            action = xp.clip(action, m.unit_low, m.unit_high)
            return m.low + (action + m.one) * m.half_span
        if self.act_clip is not None:
            return xp.clip(action, *self.act_clip)
        return action


def host_mapping(config: Any) -> EnvMapping:
    """The env stack of a host backend, read off one env of the run's id (built, then closed)."""
    import gymnasium
    from gymnasium.wrappers import ClipAction

    from batchppo.backends.host_env import from_gymnasium
    from batchppo.envs.make import StandardStack, env_source
    from batchppo.envs.stack.env_wrappers import apply_wrappers, wrapper_specs
    from batchppo.envs.stack.wrappers import RangeNormalize

    raw = env_source(config.env).build(env_kwargs=dict(config.env_kwargs or {}))
    raw = apply_wrappers(raw, wrapper_specs(config.env_wrappers))
    try:
        stack = StandardStack(config.env, config.normalize_ranges).wrap(raw)
        obs_map = act_map = act_clip = None
        layer: Any = stack
        while isinstance(layer, gymnasium.Wrapper):
            if type(layer) is RangeNormalize:
                obs_map, act_map = layer.obs_map, layer.act_map
                if act_map is not None and not layer.clip_actions:
                    raise ExportError(f"export: {config.env}: RangeNormalize without clipping")
            elif type(layer) is ClipAction:
                inner = layer.env.action_space
                act_clip = (inner.low.astype(np.float32), inner.high.astype(np.float32))
            layer = layer.env
        own_obs = from_gymnasium(raw.observation_space)
        own_act = from_gymnasium(raw.action_space)
    finally:
        raw.close()
    return EnvMapping(
        obs_map=None if obs_map is None else range_map(*_map_bounds(obs_map), np.float32),
        act_map=None if act_map is None else range_map(*_map_bounds(act_map), np.float32),
        act_clip=act_clip,
        obs_space=own_obs,
        action_space=own_act,
    )


def _map_bounds(ranges: RangeMap) -> tuple[np.ndarray, np.ndarray]:
    """The bounds a map was made from (unbounded dims as ±inf, which range_map leaves alone)."""
    low = np.where(ranges.mask, ranges.low, -np.inf)
    high = np.where(ranges.mask, ranges.low + 2 * ranges.half_span, np.inf)
    return low, high


def gymnasium_mapping(config: Any, trainer: Any) -> EnvMapping:
    """The env mapping of the host backends (``EXPORT_MAPPINGS``): the env stack that
    ``batchppo.envs.make`` builds around one env of the run's id (``host_mapping``);
    ``trainer`` is not read."""
    return host_mapping(config)


def bounds_mapping(config: Any, trainer: Any) -> EnvMapping:
    """The env mapping of a pure-JAX backend whose env maps ranges itself and tells its raw
    bounds, ``raw_bounds`` as [`GymnaxEnv`][batchppo.backends.GymnaxEnv]'s (``gymnax``'s in
    ``EXPORT_MAPPINGS``): the range maps of ``trainer.env`` (``config`` is not read).

    Raises:
        ExportError: An env without ``raw_bounds``.
    """
    env = trainer.env
    if not hasattr(env, "raw_bounds"):
        raise ExportError(
            f"export: backend {config.backend!r}'s env {type(env).__name__} has no raw_bounds, "
            "which its env mapping reads"
        )
    obs_space, action_space = trainer.spec.obs_space, trainer.spec.action_space
    obs_bounds, act_bounds = env.raw_bounds
    obs_map = None if obs_bounds is None else range_map(*obs_bounds, np.float32)
    act_map = None if act_bounds is None else range_map(*act_bounds, np.float32)
    own_obs = obs_space
    if obs_bounds is not None:
        own_obs = spaces.box(obs_space.shape, np.float32, *obs_bounds)
    own_act = action_space
    if act_bounds is not None:
        own_act = spaces.box(action_space.shape, np.float32, *act_bounds)
    return EnvMapping(
        obs_map=obs_map if obs_map is not None and obs_map.any else None,
        act_map=act_map if act_map is not None and act_map.any else None,
        act_clip=None,
        obs_space=own_obs,
        action_space=own_act,
    )


EXPORT_MAPPINGS: dict[str, Callable[[Any, Any], EnvMapping]] = {
    "process": gymnasium_mapping,
    "sync": gymnasium_mapping,
    "ray": gymnasium_mapping,
    "gymnax": bounds_mapping,
}
"""What the env stack does around a run's policy, by backend name: ``mapping(config, trainer)``,
the ``EnvMapping`` that ``batchppo export`` folds into its ONNX model. ``gymnasium_mapping`` for
the Gymnasium envs that ``batchppo.envs.make`` builds, ``bounds_mapping`` for an env that tells its
``raw_bounds``. A backend of a plug-in whose runs export adds its entry; a backend without one
does not export (``brax``, ``jumanji``, ``ale``)."""


def env_mapping(config: Any, trainer: Any) -> EnvMapping:
    """The env stack around a run's policy (what
    [`export_run`][batchppo.experiment.artifacts.export.export_run] folds into the model), as
    ``EXPORT_MAPPINGS`` gives it for the run's backend.

    Raises:
        ExportError: A backend without an entry (one line).
    """
    mapping = EXPORT_MAPPINGS.get(config.backend)
    if mapping is None:
        exporting = prose(EXPORT_MAPPINGS)
        raise ExportError(
            f"export: backend {config.backend!r} is not supported (its env's action mapping is "
            f"not known to the export); runs of the {exporting} backends export"
        )
    return mapping(config, trainer)


def check_supported(config: Any, trainer: Any) -> tuple[spaces.Box, Any]:
    """The observation and action leaves of an exportable policy; else one-line ExportError."""
    agent = trainer.agent
    obs_space, action_space = trainer.spec.obs_space, trainer.spec.action_space
    if getattr(agent, "network", None) is None or not hasattr(agent, "normalize_obs"):
        raise ExportError(f"export: algorithm {type(agent).__name__} has no exportable policy")
    if agent.network.recurrent:
        carry = agent.initial_carry(1)
        if not (isinstance(carry, jax.Array) and carry.ndim == 2):
            raise ExportError(
                f"export: network {config.network!r} keeps a recurrent state that is not one "
                "(batch, size) array; only such states export"
            )
    obs_leaf = spaces.single(obs_space)
    if obs_leaf is None or not isinstance(obs_leaf, spaces.Box) or not obs_leaf.is_float:
        raise ExportError(
            f"export: observation space {spaces.describe(obs_space)} is not supported; only one "
            "float Box observation exports"
        )
    act_leaf = spaces.single(action_space)
    ok = isinstance(act_leaf, spaces.Discrete) or (
        isinstance(act_leaf, spaces.Box) and len(act_leaf.shape) == 1
    )
    if not ok:
        raise ExportError(
            f"export: action space {spaces.describe(action_space)} is not supported; one 1-D "
            "Box (Gaussian) or one Discrete (categorical) action exports"
        )
    return obs_leaf, act_leaf


def policy_function(
    trainer: Any, state: Any, mapping: EnvMapping, sampled: bool = False
) -> Callable[..., Any]:
    """The exported function, from the env's own observation to the env's own action (see
    the module docstring): ``(obs[, state][, noise]) -> action`` or, for a recurrent policy,
    ``-> (action, state_out)``; ``state`` is the recurrent state (zeros at an episode start)."""
    agent = trainer.agent
    net_params, obs_norm = agent.acting_params(state)
    act_leaf = spaces.single(trainer.spec.action_space)
    discrete = isinstance(act_leaf, spaces.Discrete)
    recurrent = agent.network.recurrent

    def finish(action: jax.Array) -> jax.Array:
        if discrete:
            return action.astype(jnp.int32)
        return mapping.action(action.astype(jnp.float32))

    def act(obs: jax.Array, carry: Any, noise: jax.Array | None) -> tuple[jax.Array, Any]:
        nobs = agent.normalize_obs(obs_norm, mapping.observation(obs))
        # A zero state is an episode start: the network's own reset is to zeros.
        first = jnp.zeros(obs.shape[:1], bool)
        p, new_carry = agent.network.policy_step(net_params, carry, nobs, first)
        if noise is None:
            return finish(agent.network.mode(p)), new_carry
        if discrete:
            return finish(jnp.argmax(p["logits"] + noise, axis=-1)), new_carry
        return finish(p["mean"] + p["std"] * noise), new_carry

    if recurrent and sampled:
        return lambda obs, carry, noise: act(obs, carry, noise)
    if recurrent:
        return lambda obs, carry: act(obs, carry, None)
    if sampled:
        return lambda obs, noise: act(obs, (), noise)[0]
    return lambda obs: act(obs, (), None)[0]


def state_shape(trainer: Any) -> tuple[int, ...] | None:
    """Shape of one observation's recurrent ``state`` (None for a feed-forward policy)."""
    if not trainer.agent.network.recurrent:
        return None
    return tuple(trainer.agent.initial_carry(1).shape[1:])


def noise_shape(trainer: Any) -> tuple[int, ...]:
    """Shape of one observation's ``noise`` input of a sampled model."""
    leaf = spaces.single(trainer.spec.action_space)
    return (int(leaf.n),) if isinstance(leaf, spaces.Discrete) else tuple(leaf.shape)


@dataclasses.dataclass(frozen=True)
class ExportInfo:
    """What [`export_run`][batchppo.experiment.artifacts.export.export_run] wrote.

    Attributes:
        path: The ONNX file.
        step: The checkpoint's env step.
        sampled: Whether the model samples (takes ``noise``).
        inputs: ``name: shape dtype`` of each input.
        outputs: ``name: shape dtype`` of each output (``action``, and ``state_out`` for a
            recurrent policy).
        max_abs_diff: Largest difference to ``load_policy`` on the check batch.
    """

    path: Path
    step: int
    sampled: bool
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    max_abs_diff: float


def _import_jax2onnx() -> Any:
    try:
        import jax2onnx
    except ImportError:
        raise ExportError(
            "export needs jax2onnx and onnxruntime: pip install 'batchppo[onnx]'"
        ) from None
    return jax2onnx


def _session(path: Path) -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise ExportError(
            "export needs jax2onnx and onnxruntime: pip install 'batchppo[onnx]'"
        ) from None
    return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def check_observations(mapping: EnvMapping, batch: int, seed: int = 0) -> np.ndarray:
    """Observations to check a model on: uniform within the env's finite bounds, standard
    normal (times 3) on unbounded dims."""
    space = mapping.obs_space
    rng = np.random.default_rng(seed)
    low = np.broadcast_to(space.low, space.shape).astype(np.float64)
    high = np.broadcast_to(space.high, space.shape).astype(np.float64)
    finite = np.isfinite(low) & np.isfinite(high) & (high - low < 1e30)
    u = rng.uniform(size=(batch, *space.shape))
    bounded = np.where(finite, low + u * np.where(finite, high - low, 0), 0)
    free = 3 * rng.standard_normal((batch, *space.shape))
    return np.where(finite, bounded, free).astype(np.float32)


def check_export(
    path: str | Path,
    policy: Callable[[np.ndarray], np.ndarray],
    mapping: EnvMapping,
    batch: int = CHECK_BATCH,
    steps: int = CHECK_STEPS,
) -> float:
    """Runs the model at ``path`` in onnxruntime against ``load_policy``, ``steps`` calls of
    ``batch`` observations each (a recurrent model's ``state`` carried from zeros, as the
    policy carries its own); a sampled model gets zero ``noise`` (its mean action).

    Args:
        path: The ONNX file.
        policy: A fresh ``load_policy`` (agent observations to agent actions).
        mapping: The env mapping the model folds in; applied around ``policy`` here.
        batch: Observations per call.
        steps: Calls.

    Returns:
        The largest absolute difference of the actions (0 for identical Discrete actions).

    Raises:
        ExportError: A Discrete action differs, or a Box action by more than ``TOLERANCE``.
    """
    session = _session(Path(path))
    inputs = {i.name: i for i in session.get_inputs()}
    carry = None
    if "state" in inputs:
        carry = np.zeros((batch, *inputs["state"].shape[1:]), np.float32)
    worst = 0.0
    for step in range(steps):
        obs = check_observations(mapping, batch, seed=step)
        feed = {"obs": obs}
        if carry is not None:
            feed["state"] = carry
        if "noise" in inputs:
            feed["noise"] = np.zeros((batch, *inputs["noise"].shape[1:]), np.float32)
        got, *rest = session.run(None, feed)
        if carry is not None:
            (carry,) = rest
        want = mapping.action(np.asarray(policy(np.asarray(mapping.observation(obs)))), xp=np)
        if got.shape != want.shape:
            raise ExportError(f"export check: ONNX actions {got.shape}, load_policy's {want.shape}")
        diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        if np.issubdtype(want.dtype, np.integer) and diff != 0:
            raise ExportError(
                f"export check: {int((got != want).sum())} of {batch} discrete actions differ "
                f"from load_policy's at call {step + 1}"
            )
        if diff > TOLERANCE:
            raise ExportError(
                f"export check: actions differ from load_policy's by {diff:.3g} at call {step + 1}"
            )
        worst = max(worst, diff)
    return worst


def export_run(
    run_dir: str | Path,
    out: str | Path | None = None,
    *,
    checkpoint: int | None = None,
    sampled: bool = False,
    trainer_factory: TrainerFactory | None = None,
) -> ExportInfo:
    """Exports a run's policy to ONNX and checks the file against ``load_policy``.

    Args:
        run_dir: A run directory written by ``batchppo train``.
        out: The ONNX file to write; None: ``<run_dir>/policy.onnx`` (``policy-sampled.onnx``
            with ``sampled``).
        checkpoint: Env step of the checkpoint; None: the newest.
        sampled: Export the sampling policy (a ``noise`` input) instead of the deterministic
            one. The check gives a sampled file zero noise: its mean action.
        trainer_factory: Builds the trainer (default: the config's algorithm's).

    Returns:
        What was written ([`ExportInfo`][batchppo.experiment.artifacts.export.ExportInfo]).

    Raises:
        RunDirError, ConfigError, CheckpointError: Missing or corrupt run dir or checkpoint.
        ExportError: A policy the export does not support, or a file that fails the check.
    """
    jax2onnx = _import_jax2onnx()
    config, trainer, state, step = load_run(run_dir, checkpoint, trainer_factory)
    try:
        obs_leaf, _ = check_supported(config, trainer)
        mapping = env_mapping(config, trainer)
        fn = policy_function(trainer, state, mapping, sampled)
        name = "policy-sampled.onnx" if sampled else "policy.onnx"
        path = Path(out) if out is not None else Path(run_dir) / name
        specs: list[Any] = [("B", *obs_leaf.shape)]
        names, outputs = ["obs"], ["action"]
        carry_shape = state_shape(trainer)
        if carry_shape is not None:
            specs.append(("B", *carry_shape))
            names.append("state")
            outputs.append("state_out")
        if sampled:
            specs.append(("B", *noise_shape(trainer)))
            names.append("noise")
        model = jax2onnx.to_onnx(
            fn, specs, model_name="batchppo_policy", opset=OPSET,
            input_names=names, output_names=outputs,
        )  # fmt: skip
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(model.SerializeToString())
        diff = check_export(path, trainer.policy(state, deterministic=True), mapping)
        session = _session(path)
        described = tuple(f"{i.name}: {_shape(i.shape)} {i.type}" for i in session.get_inputs())
        produced = tuple(f"{o.name}: {_shape(o.shape)} {o.type}" for o in session.get_outputs())
        return ExportInfo(path, step, sampled, described, produced, diff)
    finally:
        trainer.close()


def _shape(shape: list[Any]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"
