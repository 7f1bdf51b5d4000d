"""Worker-side helpers: info batching and merging, the shared-memory layout."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from batchppo.envs.infos import batch_infos, merge_info_parts
from batchppo.envs.workers.protocol import Layout


def test_batch_infos_fast_path_scalars():
    out = batch_infos([{"a": 1, "b": 0.5}, {"a": 2, "b": 1.5}])
    assert set(out) == {"a", "_a", "b", "_b"}
    np.testing.assert_array_equal(out["a"], [1, 2])
    np.testing.assert_array_equal(out["b"], [0.5, 1.5])
    np.testing.assert_array_equal(out["_a"], [True, True])
    assert batch_infos([{}, {}]) == {}


def test_batch_infos_mixed_keys_and_nested_dicts():
    out = batch_infos([{}, {"a": 3, "final_info": {"x": np.array([1.0, 2.0])}}, {"a": 4}])
    np.testing.assert_array_equal(out["a"], [0, 3, 4])
    np.testing.assert_array_equal(out["_a"], [False, True, True])
    np.testing.assert_array_equal(out["_final_info"], [False, True, False])
    np.testing.assert_array_equal(out["final_info"]["x"][1], [1.0, 2.0])
    np.testing.assert_array_equal(out["final_info"]["_x"], [False, True, False])


def test_merge_info_parts_places_ranges_and_fills_masks():
    left = batch_infos([{"a": 1}, {"a": 2}])  # envs 0, 1
    right = batch_infos([{"a": 2.5, "f": {"y": 7}}])  # env 3
    out = merge_info_parts([(0, 2, left), (3, 1, right)], 4)
    np.testing.assert_array_equal(out["a"], [1, 2, 0, 2.5])  # int promoted to float
    np.testing.assert_array_equal(out["_a"], [True, True, False, True])
    np.testing.assert_array_equal(out["f"]["y"], [0, 0, 0, 7])
    np.testing.assert_array_equal(out["f"]["_y"], [False, False, False, True])
    np.testing.assert_array_equal(out["_f"], [False, False, False, True])
    assert merge_info_parts([(0, 2, {}), (2, 2, {})], 4) == {}


def test_layout_views_do_not_overlap_and_are_aligned():
    obs_space = spaces.Dict({"a": spaces.Box(0, 1, (3,)), "b": spaces.Discrete(4)})
    layout = Layout.for_spaces(5, 2, obs_space, spaces.Box(0, 1, (2,), np.float64))
    assert layout.obs_leaves == (((3,), "<f4"), ((), "<i8"))
    buf = bytearray(layout.nbytes)
    views = layout.views(buf)
    base = np.frombuffer(buf, np.uint8).ctypes.data
    spans = []
    for name, view in views.items():
        for leaf in view if isinstance(view, list) else [view]:
            start = leaf.ctypes.data - base
            assert start % 64 == 0, name
            spans.append((start, start + leaf.nbytes))
            leaf[...] = 1
    spans.sort()
    assert len(spans) == 2 + 2 + 1 + 5
    assert all(spans[k][1] <= spans[k + 1][0] for k in range(len(spans) - 1))
    assert [v.shape for v in views["obs"]] == [(5, 3), (5,)]
    assert views["act"][0].dtype == np.float64
