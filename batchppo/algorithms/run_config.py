"""The run-level settings every algorithm's config has (env, backend, budget, cadences, seed)
and the network settings of the algorithms over the shared networks.

An algorithm's config is a frozen dataclass that subclasses
[`RunConfig`][batchppo.algorithms.run_config.RunConfig] and adds its hyperparameters
(``PPOConfig``, ``A2CConfig``); those over the shared networks take their network fields from
[`NetworkConfig`][batchppo.algorithms.run_config.NetworkConfig]. The experiment
layer (loop, checkpoints, resume rules, visualize, plot) reads only the run-level fields,
whatever the algorithm. Importing this module does not import JAX.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any, ClassVar

from batchppo import backends
from batchppo.algorithms.networks.torsos import get_torso

EVALS_PER_RUN = 20
"""Evaluations over a run's budget when ``eval_every`` is None."""
LOGS_PER_RUN = 100
"""Train reports over a run's budget when ``log_every`` is None."""
CHECKPOINTS_PER_RUN = 10
"""Checkpoints over a run's budget when ``checkpoint_every`` is None."""


TRACKERS = (None, "wandb")
"""The values of ``track``: None (TensorBoard and ``metrics.jsonl`` only) or a tracker."""

EVAL_ACTIONS = ("mean", "sampled")
"""How the periodic evaluations act (``eval_actions``): the policy's mean (deterministic)
action, or actions sampled from it as in training (Tianshou's benchmark protocol)."""


def _interval(explicit: int | None, steps: int, per_run: int) -> int:
    return explicit if explicit is not None else max(1, steps // per_run)


def check(ok: bool, message: str) -> None:
    """Raises ``ValueError(message)`` unless ``ok``: a config's one-line validation."""
    if not ok:
        raise ValueError(message)


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The run-level fields of a training run. Invalid values raise ``ValueError``."""

    FIELDS_ADDED: ClassVar[Mapping[str, Any]] = types.MappingProxyType({})
    """Fields added to the config after runs were stored whose default does something else
    than the code before them did: field -> the value that repeats what it did. A stored
    ``config.yaml`` that lacks such a field loads with that value
    ([`load_config`][batchppo.experiment.config.configs.load_config]), so that a resumed run goes on
    learning as it began; a field not named here takes its default."""

    # --- Environment -----------------------------------------------------------------------
    env: str = "Pendulum-v1"
    """Environment id: for host backends a Gymnasium id, ``module:EnvId`` (the module, which
    registers the id, is imported first) or ``module:factory`` (a callable of the module that
    returns a ``gymnasium.Env``, for envs that are not registered); a gymnax id for
    ``gymnax``, a Brax env name for ``brax``."""
    backend: str = "process"
    """Where envs run: ``process`` (BatchEnv workers), ``sync`` (in-process), ``ray`` (Ray actors),
    ``gymnax`` or ``brax`` (pure JAX, fused with the learner); any backend of the registry
    ``batchppo.core.backends``."""
    env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments of the env's constructor: of ``gymnasium.make`` for host backends
    (e.g. ``{include_cfrc_ext_in_observation: false}`` for Ant-v5), of
    ``brax.envs.get_environment`` for ``brax``, and ``EnvParams`` fields for ``gymnax``. Values
    are YAML scalars or lists of them. (The backend's own settings are ``backend_options``.)"""
    env_wrappers: tuple[Any, ...] = ()
    """Host backends built by ``batchppo.envs.make`` (``process``, ``sync``, ``ray``):
    Gymnasium wrappers around each env, innermost first, in every worker and in the
    evaluation and video envs, as rl-zoo's ``env_wrapper``: import paths
    (``minigrid.wrappers.ImgObsWrapper``) or one-key mappings of a path to its keyword
    arguments (``{gymnasium.wrappers.TimeAwareObservation: {flatten: true}}``);
    ``{keep_keys: [key, ...]}`` and ``{drop_keys: [key, ...]}`` pick the keys of a Dict
    observation. Each path is imported and its arguments checked when a run starts
    (``batchppo.envs.stack.env_wrappers``)."""
    eval_env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments of the evaluation env's constructor only, over ``env_kwargs``: e.g. the
    Atari presets' ``{preprocess: atari_game}`` scores whole games (all lives, unclipped rewards)
    where training sees lives as episodes and clipped rewards."""
    max_length: int | None = 200
    """Episode time limit in steps (truncation); None keeps the env's own limit."""
    normalize_ranges: bool = True
    """Rescale finite observation bounds and action bounds to [-1, 1]."""
    num_agents: int = 30
    """Number of parallel environments."""
    host_loop: bool | None = None
    """Host backends only: collect rollouts with a Python loop that steps the envs and makes one
    compiled call between env steps ([`HostLoop`][batchppo.backends.HostLoop]) instead of
    inside the compiled iteration through ``io_callback`` (``HostEnv``). Same results, at
    different speeds. None: the in-graph rollout on the CPU, the loop on an accelerator, each
    where it trains the faster (``resolve_host_loop``)."""
    devices: int | None = None
    """JAX devices the learner runs on, data-parallel (a 1-D mesh: the env batch sharded, parameters
    and normaliser statistics replicated; ``batchppo.algorithms.training.sharding``). None takes
    every device for pure-JAX backends (one device where only one exists: the unsharded program)
    and one device for host backends, which cannot shard. ``num_agents`` must be a multiple of the
    device count. It may change on resume."""
    xla_convolutions: bool | None = None
    """CPU only: the hot programs (the training iteration, the update, the host loop's policy
    step) run convolutions with XLA's own kernels (True) or hand them to the YNNPACK library
    as XLA does by default (False; the XLA option ``xla_cpu_experimental_ynn_fusion_type``).
    None: True where an observation leaf is an image (a CNN torso), whose gradient step
    YNNPACK's convolutions make several times slower (``bench/investigations/conv.py``). Results
    agree up to float rounding; it may change on resume."""
    backend_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The backend's own settings, by name: the keys and types its record declares
    (``Backend.options``; ``Backend.check_options`` parses them, once, into
    ``parsed_backend_options``). ``process``: the ``BatchEnv``'s ``WorkerOptions``, its
    workers (``num_workers``, None for one per core; ``envs_per_worker``, ``step_in_parent``),
    env restarts (``max_restarts``, 0 fails fast), ``step_timeout`` (seconds, 60 by default)
    and spin; ``sync``: ``max_restarts``; ``ray``: ``num_workers``, ``envs_per_worker``,
    ``step_timeout``, ``address``, ``num_cpus``, ``startup_timeout``;
    ``gymnax``, ``brax``, ``jumanji``: how finished envs restart (``autoreset``,
    ``reset_ratio``; Brax's physics ``backend`` too); ``ale``: ``mode``, ``batch_size``,
    ``num_threads``. Given as ``--set backend_options.num_workers=4`` (or a mapping,
    ``--set 'backend_options={address: auto}'``); the keys not given take their defaults.
    Those that only say where and how fast the envs run may change when a run resumes; those
    that change what is learned (``Backend.learned_options``: the restarts of pure-JAX envs,
    the physics) may not."""

    # --- Budget -----------------------------------------------------------------------------
    steps: int = 1_000_000
    """Training-phase env transitions, summed over agents (evaluation comes on top)."""

    # --- Evaluation, logging, checkpoints ---------------------------------------------------
    eval_episodes: int = 30
    """Episodes per evaluation phase."""
    eval_actions: str = "mean"
    """How the evaluation phases act: ``mean`` (the deterministic action) or ``sampled`` (drawn
    from the policy, as in training). Each eval report records it (``actions``)."""
    eval_max_steps: int = 100_000
    """Steps each eval env may run in one evaluation phase. Episodes that have not ended by
    then are cut there and counted with their return and length so far: the eval report's
    ``cut`` counts them and a warning names this setting. At the default only episodes
    without a time limit (``max_length`` None and none of the env's own) reach it."""
    eval_every: int | None = None
    """Training steps between evaluation phases; 0 disables evaluation; None: ``steps / 20`` (see
    [`eval_interval`][batchppo.algorithms.run_config.RunConfig.eval_interval]), so that a
    changed ``steps`` keeps 20 evaluations."""
    log_every: int | None = None
    """Training steps between log reports; None: ``steps / 100``."""
    checkpoint_every: int | None = None
    """Training steps between checkpoints; None: ``steps / 10``."""
    keep_checkpoints: int = 3
    """How many checkpoints to keep."""
    seed: int = 0
    """Seed of the run (params, env seeds, sampling)."""

    # --- Experiment tracking (docs/tracking.md) ---------------------------------------------
    track: str | None = None
    """Also send the run's config and reports to an experiment tracker: ``wandb`` (Weights &
    Biases, the ``wandb`` extra); None: TensorBoard and ``metrics.jsonl`` only."""
    wandb_project: str | None = None
    """``track=wandb``: the W&B project (None: ``batchppo``)."""
    wandb_entity: str | None = None
    """``track=wandb``: the W&B entity (user or team; None: the account's default)."""
    wandb_group: str | None = None
    """``track=wandb``: the W&B group (None: a ``--seeds`` run groups its seeds by its
    timestamp and name, a single run has none)."""

    @property
    def eval_interval(self) -> int:
        """Steps between evaluations: ``eval_every``, or 1/20 of ``steps`` when it is None."""
        return _interval(self.eval_every, self.steps, EVALS_PER_RUN)

    @property
    def log_interval(self) -> int:
        """Steps between train reports: ``log_every``, or 1/100 of ``steps`` when it is None."""
        return _interval(self.log_every, self.steps, LOGS_PER_RUN)

    @property
    def checkpoint_interval(self) -> int:
        """Steps between checkpoints: ``checkpoint_every``, or 1/10 of ``steps`` when None."""
        return _interval(self.checkpoint_every, self.steps, CHECKPOINTS_PER_RUN)

    @property
    def schedule_spans_steps(self) -> bool:
        """Whether a schedule is laid over ``steps`` (a learning rate annealed over the
        budget, say), so that raising ``steps`` would change what the run learned up to its
        budget unless the schedule is pinned first (``extend``). False here; an algorithm's
        config says when."""
        return False

    def extend(self, steps: int) -> dict[str, Any]:
        """The changes that raise this run's budget to ``steps`` (a resume's ``--set
        steps=N``) and keep what it learns up to its current budget: ``steps`` here. An
        algorithm's config whose schedule spans ``steps`` pins it to the current budget in a
        field of its own, or refuses where the schedule leaves nothing to train past it.

        Raises:
            ValueError: A schedule spans ``steps`` and this config cannot carry it past them
                (one line naming the field that decides it).
        """
        check(
            not self.schedule_spans_steps,
            f"a schedule of this {type(self).__name__} spans steps={self.steps} and cannot "
            "be carried past them",
        )
        return {"steps": steps}

    def schedule_note(self) -> str | None:
        """One line saying how a schedule runs over a budget it does not span (an annealed
        learning rate held after the steps it annealed over, once ``extend`` raised the
        budget), for a resume to print; None where every schedule spans the budget."""
        return None

    def __post_init__(self) -> None:
        self.check_run()

    @property
    def parsed_backend_options(self) -> Any:
        """The backend's options object (an instance of its ``Backend.options`` class, its
        defaults for the keys not given) that ``backend_options`` was parsed into, once, when
        this config was made: what ``make_env`` hands the backend, and the backend its batch
        env (``ProcessOptions``: the ``BatchEnv``'s ``WorkerOptions``). None for a backend
        without options."""
        return self._parsed_backend_options

    def check_run(self) -> None:
        """Validates the run-level fields.

        Raises:
            ValueError: One line naming the field, its value and the fix.
        """
        check(
            isinstance(self.env, str),
            f"env={self.env!r}: a config records an env id (a string); pass an env factory as "
            "batchppo.train(config, env=factory), or its id 'module:name'",
        )
        known = tuple(backends.BACKENDS)
        check(self.backend in known, f"backend={self.backend!r}: choose one of {known}")
        hosts = backends.prose(backends.HOST_BACKENDS)
        check(
            not self.env_wrappers or self.backend in backends.HOST_BACKENDS,
            f"env_wrappers: Gymnasium wrappers apply to the {hosts} backends' envs, not "
            f"backend={self.backend!r}'s; drop env_wrappers",
        )
        backend = backends.BACKENDS[self.backend]
        check(self.num_agents >= 1, f"num_agents={self.num_agents}: must be >= 1")
        check(self.steps >= 1, f"steps={self.steps}: must be >= 1")
        check(self.seed >= 0, f"seed={self.seed}: must be >= 0")
        check(
            self.eval_actions in EVAL_ACTIONS,
            f"eval_actions={self.eval_actions!r}: choose one of {EVAL_ACTIONS}",
        )
        for name in ("eval_every", "log_every", "checkpoint_every"):
            value = getattr(self, name)
            check(
                value is None or value >= 0,
                f"{name}={value}: must be >= 0 (0 disables), or None for a fraction of steps",
            )
        check(
            self.devices is None or self.devices >= 1,
            f"devices={self.devices}: must be >= 1, or None for every device",
        )
        check(
            self.devices in (None, 1) or backend.fused,
            f"devices={self.devices}: backend={self.backend!r} steps its envs on the host and "
            "its learner runs on one device; set devices=1 (or None), or use a pure-JAX "
            f"backend ({', '.join(backends.names(host=False))})",
        )
        check(
            self.devices is None or self.num_agents % self.devices == 0,
            f"num_agents={self.num_agents} does not split over devices={self.devices}: set "
            f"num_agents to a multiple of {self.devices}, or devices to a divisor of it",
        )
        check(
            self.xla_convolutions in (None, True, False),
            f"xla_convolutions={self.xla_convolutions!r}: must be true, false or None (true "
            "for CNN torsos)",
        )
        check(
            self.host_loop in (None, True, False),
            f"host_loop={self.host_loop!r}: must be true, false or None (the loop on an "
            "accelerator)",
        )
        check(
            not self.host_loop or backend.host,
            f"host_loop=True drives host envs; backend={self.backend!r} runs fused in JAX "
            f"(set host_loop=False, or a host backend: {', '.join(backends.names(host=True))})",
        )
        # The one parse of the backend's options: the object the backend, and through it the
        # workers, get (``parsed_backend_options``).
        own = backend.check_options(self.backend_options)
        object.__setattr__(self, "_parsed_backend_options", own)
        # The options as their types hold them (``--set backend_options.step_timeout=none``).
        given = {key: getattr(own, key) for key in self.backend_options}
        object.__setattr__(self, "backend_options", given)
        # One setting, one place: a pure-JAX backend's options configure the env its keywords
        # build (its restarts, Brax's physics), so none is also an env keyword. A host env
        # takes any keyword of its own.
        options = () if backend.host else backend.option_names()
        for name in ("env_kwargs", "eval_env_kwargs"):
            twice = [key for key in getattr(self, name) if key in options]
            check(
                not twice,
                f"{name} {twice}: backend {self.backend!r} takes them as options, not as the "
                f"env's keywords: give {', '.join(f'backend_options.{key}' for key in twice)} "
                "(--set backend_options.KEY=VALUE)",
            )
        check(
            not self.host_loop or not backend.steps_in_program(own),
            f"host_loop=True steps host envs from a Python loop; backend={self.backend!r} with "
            f"backend_options {self.backend_options} steps them inside the compiled rollout: "
            "set host_loop=false (or None)",
        )
        check(
            self.track in TRACKERS,
            f"track={self.track!r}: choose one of {TRACKERS[1:]}, or None (TensorBoard only)",
        )
        for name in ("wandb_project", "wandb_entity", "wandb_group"):
            value = getattr(self, name)
            check(
                value is None or self.track == "wandb",
                f"{name}={value!r} is for track=wandb; set track=wandb, or drop {name}",
            )
            check(value is None or value.strip() != "", f"{name}='': give a name, or None")
        check(self.eval_max_steps >= 1, f"eval_max_steps={self.eval_max_steps}: must be >= 1")
        check(
            self.max_length is None or self.max_length >= 1,
            f"max_length={self.max_length}: must be >= 1 or None",
        )


class AnnealedRate:
    """The reading of a linearly annealed learning rate, for the configs that have one (PPO's
    and A2C's): their fields ``learning_rate``, ``anneal_lr``, ``anneal_lr_end`` (the fraction
    the anneal ends at) and ``anneal_lr_steps`` (the steps it spans; None: ``steps``). Listed
    before ``RunConfig`` among a config's bases, its methods take the place of RunConfig's."""

    @property
    def schedule_spans_steps(self) -> bool:
        """True with ``anneal_lr`` and no ``anneal_lr_steps``: the learning rate anneals over
        ``steps`` (``extend`` pins it before they are raised)."""
        return self.anneal_lr and self.anneal_lr_steps is None

    def extend(self, steps: int) -> dict[str, Any]:
        """``steps``, and, where the anneal spans the current budget, ``anneal_lr_steps``
        pinned to it, so the rate anneals as before and then holds its end value.

        Raises:
            ValueError: The anneal spans ``steps`` and ends at 0 (one line naming
                ``anneal_lr``), as the run would train on at a rate of 0.
        """
        if not self.schedule_spans_steps:
            return {"steps": steps}
        check(
            self.anneal_lr_end > 0,
            f"anneal_lr anneals the learning rate to 0 over steps={self.steps} "
            "(anneal_lr_end=0), so past them it would train at a rate of 0",
        )
        return {"steps": steps, "anneal_lr_steps": self.steps}

    def schedule_note(self) -> str | None:
        """Where the anneal ends before the budget: the rates and the steps of both parts."""
        span = self.anneal_lr_steps
        if not self.anneal_lr or span is None or span >= self.steps:
            return None
        start, end = self.learning_rate, self.learning_rate * self.anneal_lr_end
        return (
            f"the learning rate anneals from {start:g} to {end:g} over the first {span:,} "
            f"steps (anneal_lr_steps) and holds {end:g} from there to steps={self.steps:,}"
        )


def check_anneal(config: Any) -> None:
    """Validates the anneal fields of a config (``AnnealedRate``).

    Raises:
        ValueError: One line naming the field, its value and the fix.
    """
    end, span = config.anneal_lr_end, config.anneal_lr_steps
    check(0.0 <= end <= 1.0, f"anneal_lr_end={end}: must be in [0, 1]")
    check(span is None or span >= 1, f"anneal_lr_steps={span}: must be >= 1, or None")
    check(
        config.anneal_lr or (end == 0.0 and span is None),
        f"anneal_lr_end={end}, anneal_lr_steps={span} shape an anneal, and anneal_lr=False: "
        "set anneal_lr=True, or leave them at 0 and None",
    )
    check(
        not config.anneal_lr or span is None or span >= config.steps or end > 0,
        f"anneal_lr_steps={span} < steps={config.steps} with anneal_lr_end=0: the learning "
        "rate would be 0 after them; set anneal_lr_end above 0, or anneal_lr_steps >= steps",
    )


NETWORKS = (
    "feed_forward",
    "recurrent",
    "feed_forward_gaussian",
    "feed_forward_categorical",
    "recurrent_gaussian",
)
"""The policies (``algorithms/networks/networks.py``): ``feed_forward`` and ``recurrent`` take
their head from the action space; the original's three names fix it (one Box action:
``*_gaussian``; one Discrete: ``feed_forward_categorical``)."""
RECURRENT = ("recurrent", "recurrent_gaussian")
"""The network names of the GRU policies."""
IMAGE_ENCODINGS = ("auto", "pixels", "codes")
"""How an integer image observation enters the network: ``pixels`` (scaled, uint8 by 1/255,
into the CNN), ``codes`` (each cell's values embedded, then flattened: MiniGrid's object,
colour and state ids) or ``auto`` (the rule of ``is_code_grid`` in ``core/spaces.py``)."""
IMAGE_LAYOUTS = ("auto", "hwc", "chw")
"""How an image observation's axes are read; ``auto`` takes the smaller of the first and last
axes as the channels (the last on a tie)."""


ACTIVATIONS = ("relu", "tanh")
"""The hidden activations of the torsos: names of Flax's functions
(``networks.ACTIVATION_FUNCTIONS``)."""

SHUFFLES = ("index", "sort")
"""How minibatch permutations are drawn (``batchppo.algorithms.training.shuffle``): ``index``
(a keyed bijection of the indices: elementwise) or ``sort`` (``jax.random.permutation``: a
sort of random keys)."""


def check_mlp(config: Any) -> None:
    """Checks a config's ``mlp``: a vector torso that builds from the config's layers.

    Args:
        config: A ``NetworkConfig``, or any object with its fields ``mlp``, ``network``,
            ``policy_layers`` and ``value_layers``.

    Raises:
        ValueError: One line naming the field, its value and the fix.
    """
    torso = get_torso(config.mlp, "vector")
    policy_layers = tuple(config.policy_layers)
    if config.network in RECURRENT:  # the GRU is the last policy layer, not the torso's
        torso.check_layers("policy_layers[:-1]", policy_layers[:-1])
    else:
        torso.check_layers("policy_layers", policy_layers)
    torso.check_layers("value_layers", tuple(config.value_layers))


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """The network fields every algorithm's config over the shared networks has, and the only
    fields ``make_network`` reads (``algorithms/networks/networks.py``).

    ``PPOConfig`` and ``A2CConfig`` inherit them, as they inherit ``RunConfig``'s: flat fields of
    a ``config.yaml`` and of ``--set``, after the run-level ones. The defaults are the original
    Batch PPO's; A2C's config gives its own for the MLPs and the policy's initialisation. The
    config's check (``check_network``) takes the network names the algorithm trains.

    ``cnn``, ``cnn_dense``, ``image_layout`` and ``image_encoding`` are read only when the
    observation has an image leaf, ``shared_torso`` only when the observation is not one
    vector ``Box``, and ``action_mask`` only for a structured observation.
    """

    network: str = "feed_forward_gaussian"
    """``feed_forward`` or ``recurrent`` (a GRU as the last policy layer; PPO only), with the
    action head chosen from the action space (Gaussian, categorical, independent categoricals,
    Bernoulli, their product for Dict/Tuple actions); or the original's
    ``feed_forward_gaussian``, ``feed_forward_categorical``, ``recurrent_gaussian`` (PPO only),
    which need one Box / one Discrete action (``algorithms/networks/networks.py``)."""
    policy_layers: tuple[int, ...] = (200, 100)
    """Hidden sizes of the policy MLP (the last one is the GRU's for recurrent policies)."""
    value_layers: tuple[int, ...] = (200, 100)
    """Hidden sizes of the value MLP."""
    activation: str = "relu"
    """Hidden activation: one of ``ACTIVATIONS`` (``relu``, ``tanh``)."""
    mlp: str = "plain"
    """The hidden layers of the policy and the value network (after the encoder, if any): a
    vector torso of the registry [`TORSOS`][batchppo.algorithms.networks.torsos.TORSOS].
    ``plain``: dense layers, each followed by the activation (the original's). ``layernorm``:
    dense, LayerNorm, activation per layer. ``simba``: SimBa's input projection, one pre-LN
    residual block per entry of ``policy_layers`` / ``value_layers`` (the entry is the
    block's width; all entries one width) and a final LayerNorm; its blocks use
    ``activation`` (the paper's: ``relu``). ``sem``: the plain layers but for the last
    entry, a dense layer whose units (a multiple of 8) LayerNorm and a softmax per group of 8
    put on a product of simplices (simplicial embeddings, Obando-Ceron et al. 2025,
    arXiv 2510.13704). For a recurrent policy the torso takes all policy layers but the
    last, the GRU's."""
    penultimate_norm: bool = False
    """Divide the features that enter the policy's head and the value network's output layer
    by their L2 norm, per sample (Bjorck et al. 2021, arXiv 2110.11222;
    ``networks.normalize_features``). It composes with every ``mlp`` and with the GRU
    policy, whose head then reads the GRU's output normalised."""
    init_std: float = 0.35
    """Initial standard deviation of the Gaussian policy (state-independent, softplus)."""
    init_mean_factor: float = 0.1
    """Scale of the policy head's initialisation (small, as in the original): the variance
    scale of its fan-in initialisation, whose weights have a standard deviation of
    ``sqrt(init_mean_factor / fan_in)``, against ``sqrt(1 / fan_in)`` for the hidden layers.
    ``1e-4`` makes them 0.01 times the hidden layers' scale, the last-layer scaling that
    Andrychowicz et al. 2021 (arXiv 2006.05990) recommend."""
    cnn: str = "nature"
    """The CNN torso of image observations (rank-3 Box leaves): a name of the torso registry
    [`TORSOS`][batchppo.algorithms.networks.torsos.TORSOS], which lists each torso with the
    smallest image it takes (``nature``, the Nature CNN, needs sides of 36 or more)."""
    cnn_dense: int = 512
    """Width of the dense layer that ends the CNN torso."""
    image_layout: str = "auto"
    """How image observations' axes are read: ``hwc``, ``chw`` or ``auto`` (the smaller of the
    first and last axes is the channels; the last on a tie)."""
    image_encoding: str = "auto"
    """Integer image observations: ``pixels`` (scaled into the CNN), ``codes`` (a grid of
    codes such as MiniGrid's object/colour/state ids: each cell's values embedded, then
    flattened into the MLPs, no CNN) or ``auto`` (codes for an integer image whose ``high``
    is below 255 or whose side is under 8, as MiniGrid's 7x7 view:
    ``is_code_grid`` in ``core/spaces.py``)."""
    action_mask: str = "auto"
    """The observation leaf that says which actions are allowed, for one ``Discrete(n)``
    action: the key of a Dict observation's leaf of shape ``(n,)`` (bool or 0/1), as
    Jumanji's and PettingZoo's ``action_mask``; ``auto`` (that leaf where the observation has
    a leaf named ``action_mask`` of that shape) or ``none``. A disallowed action's logit is
    ``MASKED_LOGIT``: it is never sampled nor the mean action, and gets no gradient. The leaf
    stays an input of the network too."""
    shared_torso: bool = False
    """Policy and value networks share one observation encoder (the CNNs, the norm for
    pixels) instead of each having its own. One vector observation has no encoder: it goes
    straight into the MLPs, so the setting changes nothing there."""

    def __post_init__(self) -> None:
        self.check_network()

    def check_network(self, networks: tuple[str, ...] = NETWORKS) -> None:
        """Validates the network fields.

        Args:
            networks: The values of ``network`` the algorithm trains.

        Raises:
            ValueError: One line naming the field, its value and the fix.
        """
        check(self.network in networks, f"network={self.network!r}: choose one of {networks}")
        get_torso(self.cnn, "image")
        check_mlp(self)
        check(self.cnn_dense >= 1, f"cnn_dense={self.cnn_dense}: must be >= 1")
        check(
            self.image_encoding in IMAGE_ENCODINGS,
            f"image_encoding={self.image_encoding!r}: choose one of {IMAGE_ENCODINGS}",
        )
        check(
            bool(self.action_mask) and isinstance(self.action_mask, str),
            f"action_mask={self.action_mask!r}: name a Dict observation key, or auto or none",
        )
        check(
            self.image_layout in IMAGE_LAYOUTS,
            f"image_layout={self.image_layout!r}: choose one of {IMAGE_LAYOUTS}",
        )
        check(
            self.activation in ACTIVATIONS,
            f"activation={self.activation!r}: choose one of {ACTIVATIONS}",
        )
        check(self.init_std > 0, f"init_std={self.init_std}: must be > 0")
