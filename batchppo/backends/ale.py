"""The ``ale`` backend: Atari games on ale-py's own vector env, ``AtariVectorEnv``.

``AtariVectorEnv`` is a C++ thread pool with the standard preprocessing; the backend runs it in
one of two modes (``backend_options.mode``):

* ``fused`` (the default): the envs are stepped inside the compiled rollout through the XLA FFI
  functions of ``AtariVectorEnv.xla()``, one dispatch per rollout
  ([`AleFusedEnv`][batchppo.backends.ale_env.AleFusedEnv]);
* ``host``: the envs are stepped from the host through ``send``/``recv``, as any host batch env
  ([`AleVectorEnv`][batchppo.backends.ale_env.AleVectorEnv] in a
  [`HostEnv`][batchppo.backends.HostEnv]).

Its envs take the Atari presets' ids and ``env_kwargs`` unchanged: an ALE id
(``ALE/Breakout-v5``, or the ROM's own name, ``breakout``) and ``{"preprocess": "atari"}`` (or
``atari_game``, or a mapping of [`AtariStack`][batchppo.envs.AtariStack] settings); the settings
become ``AtariVectorEnv``'s. ``batchppo.backends.ale_env`` documents how its envs differ from
the ``process`` backend's ``preprocess: atari`` (life losses, frame-stack padding, no-op draws).

This module is light (the record, the options and the id check): ale-py, Gymnasium and JAX are
imported when an env is built or an id checked.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from batchppo.core.backends import Backend, register
from batchppo.core.registry import lazy
from batchppo.core.wording import unknown_id_message

if TYPE_CHECKING:
    from batchppo.core.env import Env

__all__ = ["ALE_ID", "MODES", "AleOptions", "ale_game", "check_ale_id", "make_ale_env"]

MODES = ("fused", "host")
"""The ``mode`` values of the ``ale`` backend, the default first."""

_INSTALL = "pip install 'batchppo[atari]'"


@dataclasses.dataclass(frozen=True)
class AleOptions:
    """The ``backend_options`` of the ``ale`` backend.

    Attributes:
        mode: ``fused``: the envs step inside the compiled rollout (``AtariVectorEnv.xla()``;
            ale-py >= 0.12, and on a GPU a build with its CUDA targets); ``host``: from the host
            through ``send``/``recv``, wherever ale-py runs.
        batch_size: The envs ``recv`` hands back at once (host mode); None: all of them. Only
            all of them is taken: the learners act on every env at each step, and a smaller
            batch hands back a different subset of envs at each ``recv``.
        num_threads: Threads of ALE's pool; 0: one per env, up to the machine's cores.
    """

    mode: str = "fused"
    batch_size: int | None = None
    num_threads: int = 0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(
                f"backend_options.mode={self.mode!r}: the ale backend's modes are "
                f"{' and '.join(MODES)} (fused steps the envs inside the compiled rollout)"
            )
        if self.num_threads < 0:
            raise ValueError(
                f"backend_options.num_threads={self.num_threads}: must be >= 0 (0: one per "
                "env, up to the cores)"
            )
        if self.batch_size is not None and self.mode != "host":
            raise ValueError(
                f"backend_options.batch_size={self.batch_size}: a batch size is for "
                "mode=host (send/recv); fused mode steps all envs at once: drop batch_size"
            )


ALE_ID = re.compile(r"^ALE/(?P<game>[A-Za-z0-9]+)-v5$")
"""The form of Gymnasium's ALE ids (``ALE/Breakout-v5``), which ale-py registers with
Gymnasium."""


def _snake(name: str) -> str:
    """``MsPacman`` -> ``ms_pacman``: the ROM name of a Gymnasium ALE game name."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def ale_game(env_id: str) -> str:
    """The ROM name (``breakout``) of an ALE id (``ALE/Breakout-v5``) or of a ROM name.

    Raises:
        ValueError: One line: an id of another form, or a game ale-py does not ship (with
            close matches).
    """
    from ale_py import roms

    match = ALE_ID.match(env_id)
    game = _snake(match["game"]) if match else env_id
    known = roms.get_all_rom_ids()
    if game not in known:
        if match:  # the close matches in the form asked: ALE/MsPacman-v5
            known = [f"ALE/{''.join(w.capitalize() for w in rom.split('_'))}-v5" for rom in known]
        raise ValueError(
            unknown_id_message(
                "ALE game",
                env_id,
                known,
                "The ale backend takes an id ALE/<Game>-v5 (ALE/Breakout-v5) or a ROM name "
                "(breakout)",
            )
        )
    return game


def check_ale_id(env_id: str) -> None:
    """Raises a one-line ValueError when ``env_id`` names no game ale-py ships (``ale_game``),
    or ale-py is missing."""
    try:
        import ale_py  # noqa: F401
    except ImportError as error:
        raise ValueError(f"the ale backend needs ale-py ({error}): {_INSTALL}") from None
    ale_game(env_id)


def make_ale_env(
    env_id: str,
    num_envs: int,
    *,
    max_length: int | None,
    normalize_ranges: bool,
    env_kwargs: Mapping[str, Any],
    options: AleOptions,
) -> Env:
    """The ``ale`` backend's builder (``batchppo.core.backends.MakeEnv``): an
    [`AleFusedEnv`][batchppo.backends.ale_env.AleFusedEnv] (``mode=fused``) or a
    [`HostEnv`][batchppo.backends.HostEnv] over an
    [`AleVectorEnv`][batchppo.backends.ale_env.AleVectorEnv] (``mode=host``).

    Args:
        env_id: An ALE id or ROM name.
        num_envs: Batch size.
        max_length: Must be None: games end at ``max_frames`` emulator frames.
        normalize_ranges: Not read: uint8 frames and a Discrete action have nothing to map.
        env_kwargs: ``{"preprocess": ...}`` as the process backend takes it (the Atari
            preprocessing with its defaults when absent); nothing else.
        options: Its ``AleOptions``.
    """
    from batchppo.backends import ale_env

    del normalize_ranges
    stack = ale_env.atari_stack(env_id, max_length, env_kwargs)
    if options.mode == "fused":
        return ale_env.AleFusedEnv(env_id, num_envs, stack, num_threads=options.num_threads)
    return ale_env.host_env(
        env_id, num_envs, stack, batch_size=options.batch_size, num_threads=options.num_threads
    )


def _fused(options: AleOptions) -> bool:
    """The record's ``in_program``: fused mode steps the envs inside the compiled program."""
    return options.mode == "fused"


register(
    Backend(
        name="ale",
        make=make_ale_env,
        check_env_id=check_ale_id,
        # Both modes step the emulators on the host's cores and drive one device; fused mode
        # calls them from inside the compiled program (the trainer then keeps its rollout
        # there: no host loop).
        host=True,
        description="ALE's C++ vector env (AtariVectorEnv), fused or from the host",
        title="ALE",
        options=AleOptions,
        requires="ale_py",
        install=_INSTALL,
        probe=lazy("batchppo.backends.ale_env:probe"),
        in_program=_fused,
    )
)
