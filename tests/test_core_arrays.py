"""topoplan.core.arrays: unique_inverse equals np.unique(..., return_inverse=True) on every path."""

import numpy as np
import pytest

from topoplan.core.arrays import unique_inverse


def _cases():
    rng = np.random.default_rng(7)
    n = 20_000
    rare = rng.choice([8.0, 1e6, 37504.0], n)
    rare[[5, 17_777]] = [3.5, 2e9]   # values a sample of every few-th element misses
    many = rng.choice(rng.uniform(0, 1e9, 300), n)   # more distinct values than the binary-search path takes
    return {
        "small ints": np.array([30, 10, 30, 20]),
        "empty": np.zeros(0, np.int64),
        "dense ints": rng.integers(-500, 40_000, n),
        "dense uint8": rng.integers(0, 256, n).astype(np.uint8),
        "uint64 far from zero": (np.uint64(2**63) + rng.integers(0, 1000, n).astype(np.uint64)),
        "sparse ints": rng.integers(0, 10**12, n),
        "sparse ints, few values": rng.choice(np.array([3, 10**12, 10**15]), n),
        "floats, few values": rng.choice([8.0, 1e6, 37504.0, 0.5], n),
        "floats, values the sample misses": rare,
        "floats, too many values": many,
        "floats, all distinct": rng.uniform(0, 1, n),
        "floats with NaN": np.where(rng.random(n) < 0.01, np.nan, rng.choice([1.0, 2.0], n)),
        "2-D ints": rng.integers(0, 100, (200, 100)),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_unique_inverse_equals_numpy(name):
    values = _cases()[name]
    uniq, inv = unique_inverse(values)
    want_u, want_i = np.unique(values, return_inverse=True)
    np.testing.assert_array_equal(uniq, want_u)
    assert uniq.dtype == want_u.dtype
    np.testing.assert_array_equal(inv, want_i.reshape(-1))
    np.testing.assert_array_equal(uniq[inv], np.asarray(values).reshape(-1))


def test_unique_inverse_takes_lists():
    uniq, inv = unique_inverse([2.0, 1.0, 2.0])
    assert uniq.tolist() == [1.0, 2.0] and inv.tolist() == [1, 0, 1]


@pytest.mark.parametrize("name", ["dense ints", "dense uint8", "uint64 far from zero", "sparse ints, few values",
                                  "floats, few values", "floats, values the sample misses"])
def test_unique_inverse_avoids_the_full_argsort(name, monkeypatch):
    import topoplan.core.arrays as arrays

    def argsort_path(a):
        raise AssertionError("fell back to np.unique(return_inverse=True)")

    monkeypatch.setattr(arrays, "_numpy", argsort_path)
    values = _cases()[name]
    uniq, inv = arrays.unique_inverse(values)
    np.testing.assert_array_equal(uniq[inv], values)
