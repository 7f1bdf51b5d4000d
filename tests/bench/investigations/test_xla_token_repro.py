"""bench/investigations/xla_token_repro.py: the reproduction compiles on the CPU in both forms."""

from __future__ import annotations

import pytest
from benchlib import load_bench


@pytest.mark.parametrize("ordered", [True, False])
def test_both_forms_compile_on_the_cpu(ordered, capsys):
    load_bench("investigations/xla_token_repro").main(ordered)
    form = "ordered" if ordered else "unordered"
    assert capsys.readouterr().out.startswith(f"compiled {form} on ")
