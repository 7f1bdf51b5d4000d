"""The restart modes of the pure-JAX adapters and their backend options
(``batchppo.core.autoreset``)."""

from __future__ import annotations

import pytest

from batchppo.core.autoreset import AUTORESET_MODES, RestartOptions, check_autoreset


def test_restart_options_default_to_select_and_check_their_values_in_one_line():
    assert RestartOptions() == RestartOptions(autoreset="select", reset_ratio=16)
    assert [check_autoreset(mode) for mode in AUTORESET_MODES] == list(AUTORESET_MODES)
    with pytest.raises(ValueError) as info:
        RestartOptions(autoreset="fresh")
    assert str(info.value) == (
        "backend_options.autoreset must be one of ('select', 'cond', 'first', 'optimistic'), "
        "got 'fresh'."
    )
    with pytest.raises(ValueError) as info:
        RestartOptions(reset_ratio=0)
    assert str(info.value) == (
        "backend_options.reset_ratio must be >= 1 (envs per fresh reset), got 0."
    )
