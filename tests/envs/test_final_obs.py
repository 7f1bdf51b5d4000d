"""The dense ``final_obs`` rule (``batchppo.envs.final_obs``) on exact arrays."""

from __future__ import annotations

import numpy as np

from batchppo.envs.final_obs import dense_final_obs, fill_final_obs, final_obs_from_infos

OBS = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
ENDED = np.array([[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0]], np.float32)
DONE = np.array([False, True, False])
EXPECTED = np.array([[1.0, 2.0], [-3.0, -4.0], [5.0, 6.0]], np.float32)


def test_dense_final_obs_takes_final_where_done_and_obs_elsewhere() -> None:
    out = dense_final_obs(OBS, ENDED, DONE)
    np.testing.assert_array_equal(out, EXPECTED)
    assert out.dtype == np.float32
    assert out is not ENDED and out is not OBS
    np.testing.assert_array_equal(ENDED[0], [-1.0, -2.0])  # inputs untouched


def test_dense_final_obs_over_rows_of_higher_rank() -> None:
    obs = np.arange(12).reshape(3, 2, 2)
    final = -obs
    out = dense_final_obs(obs, final, np.array([True, False, True]))
    np.testing.assert_array_equal(
        out, [[[0, -1], [-2, -3]], [[4, 5], [6, 7]], [[-8, -9], [-10, -11]]]
    )


def test_fill_final_obs_in_place_per_leaf_with_scratch() -> None:
    final = [ENDED.copy(), np.array([10, 20, 30], np.int64)]
    obs = [OBS, np.array([1, 2, 3], np.int64)]
    scratch = np.ones((3, 1), bool)
    fill_final_obs(final, obs, DONE, scratch)
    np.testing.assert_array_equal(final[0], EXPECTED)
    np.testing.assert_array_equal(final[1], [1, 20, 3])
    np.testing.assert_array_equal(scratch[:, 0], [True, False, True])


def test_fill_final_obs_copies_large_rows_by_index_and_small_ones_by_mask() -> None:
    # A frame-stack leaf (rows of 4 x 84 x 84 bytes) beside a small one, done given as (n, 1).
    frames = np.arange(3 * 4 * 84 * 84, dtype=np.int64).reshape(3, 4, 84, 84).astype(np.uint8)
    final = [np.full_like(frames, 7), ENDED.copy()]
    scratch = np.ones((3, 1), bool)
    fill_final_obs(final, [frames, OBS], DONE.reshape(3, 1), scratch)
    np.testing.assert_array_equal(final[0][[0, 2]], frames[[0, 2]])
    assert (final[0][1] == 7).all()  # the ended row keeps its final obs
    np.testing.assert_array_equal(final[1], EXPECTED)


def test_fill_final_obs_nothing_done_copies_obs() -> None:
    final = ENDED.copy()
    fill_final_obs([final], [OBS], np.zeros(3, bool))
    np.testing.assert_array_equal(final, OBS)


def test_final_obs_from_infos_sparse_to_dense() -> None:
    infos = {
        "final_obs": np.array([None, np.array([-3.0, -4.0]), None], dtype=object),
        "_final_obs": DONE,
    }
    out = final_obs_from_infos(OBS.astype(np.float64), infos, np.float32)
    np.testing.assert_array_equal(out, EXPECTED)
    assert out.dtype == np.float32


def test_final_obs_from_infos_returns_obs_when_nothing_ended() -> None:
    assert final_obs_from_infos(OBS, {}) is OBS
    assert final_obs_from_infos(OBS, {"_final_obs": np.zeros(3, bool)}) is OBS
