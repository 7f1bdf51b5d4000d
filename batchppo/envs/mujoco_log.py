"""MuJoCo's warnings where batchppo builds envs: on stderr, without a log file, one known upstream
warning left out.

MuJoCo reports a warning (``mju_warning``: a model compiled from a deprecated attribute, an
unstable simulation) through its user handler, ``mujoco.set_mju_user_warning``; without one it
prints the text on stderr and appends it to ``MUJOCO_LOG.TXT`` in the working directory. Every
env of Gymnasium's MuJoCo tasks (HalfCheetah, Hopper, Ant, ...) compiles an XML file of
Gymnasium's (1.3.0) that sets the compiler attribute ``settotalmass``, which MuJoCo 4.0
deprecates: each env built printed that warning, in every worker, and left the log file behind.

``route_mujoco_warnings``, called where an env is built (``EnvSource.build``: in the batch env's
workers, in-process backends, the start-up probe and the video env), installs ``mujoco_warning``
as the handler once ``mujoco`` is imported, unless a handler is installed already (the user's,
which stays). It writes no file. A warning of ``UPSTREAM_WARNINGS`` is not printed at all: it
is about Gymnasium's files, which a user cannot change, and the model compiles as before (MuJoCo
still applies the attribute). Every other warning is printed on stderr, as
``MuJoCo warning: <text>``, each time MuJoCo reports it, as MuJoCo prints them.
"""

from __future__ import annotations

import contextlib
import sys

__all__ = ["UPSTREAM_WARNINGS", "mujoco_warning", "route_mujoco_warnings"]

UPSTREAM_WARNINGS: tuple[str, ...] = ("compiler attribute 'settotalmass' is deprecated",)
"""The starts of the MuJoCo warnings that ``mujoco_warning`` leaves out: warnings about the
model files of the envs that batchppo builds (Gymnasium's), which nothing a user does changes."""


def mujoco_warning(message: str) -> None:
    """MuJoCo's warning handler: prints ``message`` on stderr unless it is an upstream warning
    (``UPSTREAM_WARNINGS``).

    It never raises: MuJoCo calls it from C, where an exception aborts the process.
    """
    if message.startswith(UPSTREAM_WARNINGS):
        return
    # A closed or missing stderr leaves nothing to report the warning to; raising would abort.
    with contextlib.suppress(Exception):
        print(f"MuJoCo warning: {message}", file=sys.stderr, flush=True)


def route_mujoco_warnings() -> bool:
    """Installs ``mujoco_warning`` as MuJoCo's warning handler where ``mujoco`` is imported and
    has no handler yet (see the module docstring).

    Returns:
        Whether ``mujoco_warning`` is MuJoCo's handler now (False: ``mujoco`` is not imported, or
        another handler is installed).
    """
    mujoco = sys.modules.get("mujoco")
    if mujoco is None:
        return False
    current = mujoco.get_mju_user_warning()
    if current is None:
        mujoco.set_mju_user_warning(mujoco_warning)
        return True
    return current is mujoco_warning
