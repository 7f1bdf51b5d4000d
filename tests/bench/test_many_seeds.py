"""bench/many_seeds.py: seeds in one program against separate runs, with train calls whose
figures are given (no training, no timed assertion)."""

from __future__ import annotations

import types

from benchlib import load_bench

import batchppo


def _run(seed: int, sps: list[float]) -> types.SimpleNamespace:
    records = [{"phase": "train", "sps": s} for s in sps] + [{"phase": "eval", "sps": None}]
    return types.SimpleNamespace(step=1024, seed=seed, records=records)


def test_both_ways_train_every_seed_and_sum_or_average_their_steady_rates(monkeypatch):
    calls = []

    def train(preset, overrides, progress, seeds=None):
        calls.append((preset, tuple(overrides), seeds))
        if seeds:  # one program: each seed's median train rate
            return [_run(s, [100.0 * (s + 1), 300.0, 0.0, 200.0 * (s + 1)]) for s in range(seeds)]
        seed = int(overrides[-1].removeprefix("seed="))
        return _run(seed, [50.0, 70.0 + seed, 90.0])

    monkeypatch.setattr(batchppo, "train", train)
    figures = load_bench("many_seeds").bench("pendulum_jax", 2, 1024)
    base = ("steps=1024", "eval_episodes=0", "log_every=1")
    assert calls == [
        ("pendulum_jax", base, 2),
        ("pendulum_jax", (*base, "seed=0"), None),
        ("pendulum_jax", (*base, "seed=1"), None),
    ]
    # Medians of the train reports with a rate: seed 0 (100, 300, 200) 200, seed 1 300; summed.
    assert figures["together_steady"] == 500.0
    assert figures["alone_steady"] == 70.5  # the mean of 70 and 71
    assert figures["together_e2e"] > 0 and figures["alone_e2e"] > 0
    assert set(figures) == {f"{side}_{key}" for side in ("together", "alone")
                            for key in ("e2e", "steady", "s")}  # fmt: skip
