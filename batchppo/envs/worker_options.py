"""``BatchEnv``'s refusal of the keywords that moved into its
[`WorkerOptions`][batchppo.envs.WorkerOptions] (``batchppo.core.worker_options``)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from batchppo.core.worker_options import WorkerOptions

__all__ = ["refuses_moved_keywords"]


MOVED_KEYWORDS = frozenset(field.name for field in dataclasses.fields(WorkerOptions))
"""``BatchEnv``'s keyword arguments that moved into ``WorkerOptions``."""


def refuses_moved_keywords(init: Callable[..., None]) -> Callable[..., None]:
    """Wraps ``BatchEnv.__init__`` so that a keyword argument it no longer takes raises a
    one-line ``TypeError`` naming the spelling that replaces it: ``worker_options=WorkerOptions(
    ...)`` for the settings that moved there, ``context`` for ``start_method``. Any other
    keyword meets Python's own error; the signature shown is ``init``'s."""

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        moved = {name: value for name, value in kwargs.items() if name in MOVED_KEYWORDS}
        if moved:
            given = ", ".join(f"{name}={value!r}" for name, value in moved.items())
            raise TypeError(
                f"BatchEnv() takes {', '.join(moved)} in its worker options: pass "
                f"worker_options=WorkerOptions({given}) (from batchppo.envs)."
            )
        if "start_method" in kwargs:
            raise TypeError(
                "BatchEnv() names the workers' start method context, as AsyncVectorEnv does: "
                f"pass context={kwargs['start_method']!r}."
            )
        init(self, *args, **kwargs)

    return checked
