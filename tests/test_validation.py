import numpy as np
import pytest

from sampling_lib._validation import check_float, check_int, check_N_n, check_pmf, check_ranks


@pytest.mark.parametrize(
    "N, n, match",
    [
        (1, 1, "N must be >= 2"),
        (10, 1, "n must be >= 2"),
        (10, 11, r"n must lie in 2..N=10; got n=11"),
        (10.5, 3, "N must be an integer"),
        (True, 3, "N must be an integer"),
    ],
)
def test_check_N_n_rejects(N, n, match):
    with pytest.raises((ValueError, TypeError), match=match):
        check_N_n(N, n)


def test_check_N_n_accepts_whole_floats():
    assert check_N_n(10.0, 10) == (10, 10)


@pytest.mark.parametrize(
    "ranks, match",
    [
        ([], "must not be empty"),
        ([1, 101], r"sampled_ranks must lie in 1..n=100; got min 1 and max 101"),
        ([0, 3], r"got min 0"),
        ([1.5, 2], "non-integer value 1.5"),
        ([1, np.nan], "NaN"),
        ([[1, 2]], "one-dimensional"),
        (["a"], "must hold integers"),
    ],
)
def test_check_ranks_rejects(ranks, match):
    with pytest.raises((ValueError, TypeError), match=match):
        check_ranks(ranks, 100, name="sampled_ranks", upper_name="n")


def test_check_ranks_returns_int64():
    r = check_ranks([1.0, 2.0, 100.0], 100)
    assert r.dtype == np.int64 and r.tolist() == [1, 2, 100]


@pytest.mark.parametrize(
    "pmf, match",
    [([0.5, 0.6], "sum to 1"), ([1.5, -0.5], "nonnegative"), ([np.nan, 1], "finite"), ([], "non-empty")],
)
def test_check_pmf_rejects(pmf, match):
    with pytest.raises(ValueError, match=match):
        check_pmf(pmf)


def test_check_float_and_int_ranges():
    with pytest.raises(ValueError, match=r"confidence must lie in \(0.0, 1.0\); got 1.0"):
        check_float(1.0, "confidence", 0.0, 1.0, low_open=True, high_open=True)
    with pytest.raises(ValueError, match="K must be >= 1; got 0"):
        check_int(0, "K", low=1)
