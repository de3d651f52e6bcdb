"""Kernel entries from a table of log k! and kernel sums on Bernstein windows (est-speed).

References of the checks: the row form of :func:`sampling_lib.kernels.log_kernel_rows`
(accumulated ratios of successive terms, normalised per row), summed or differenced by
enumeration. Tolerances: the nine table terms of log P, each of size up to N log N and within a
few ulp, leave a relative error of a few 1e-16 N log N (measured against exact rational arithmetic,
math.comb: at most 4e-10 at N = 10^5 and 5e-9 at 10^6, as the log-Beta form it replaces), so 2e-8
relative at N <= 10^6 where P > 1e-8 (the bound the log-Beta form was held to) and 5e-15 N log N
absolute (P <= 1); a window
leaves out at most 2 exp(-42) = 1.2e-18 of a row's mass (Bernstein's inequality,
kernel_windows' docstring), so sums over windows are within 1e-15 absolute of full sums
(rounding of ~n terms below 1 included).
"""
import numpy as np
import pytest

from sampling_lib import kernels
from sampling_lib.kernels import _grid
from sampling_lib.kernels import (cell_kernel, hypergeom_entries, kernel_bin_masses, kernel_windows,
                                  log_kernel_rows, window_pmf)

SCHEMES = ["binomial", "hypergeometric"]


@pytest.mark.parametrize("N", [50, 3706, 10**5, 10**6])
def test_hypergeom_entries_match_the_row_form(N):
    rng = np.random.default_rng(N)
    for _ in range(6):
        n = int(rng.integers(2, min(N, 25_000) + 1))
        R = np.r_[1, 2, N, N // 2, rng.integers(1, N + 1, size=40)]
        x = np.unique(np.r_[0, n - 1, rng.integers(0, n, size=60)])
        got = hypergeom_entries(N, n, R, x)
        ref = np.exp(log_kernel_rows(N, n, R, "hypergeometric")[:, x])
        big = ref > 1e-8
        np.testing.assert_allclose(got[big], ref[big], rtol=2e-8)
        assert np.abs(got - ref).max() < 5e-15 * N * np.log(N) + 1e-12       # P <= 1 (see the module docstring)
        assert np.all(got[ref == 0] == 0)                       # off the support: exactly 0
        out = np.full((x.size, R.size), np.nan)                 # the transposed layout of cell_kernel
        assert np.array_equal(hypergeom_entries(N, n, R, x, out=out), got) and not np.isnan(out).any()


def test_hypergeom_entries_refuses_what_its_table_does_not_hold():
    with pytest.raises(ValueError, match="LOG_FACTORIAL_MAX"):
        hypergeom_entries(kernels.LOG_FACTORIAL_MAX + 1, 10, [1], [0])
    with pytest.raises(ValueError, match="out must have shape"):
        hypergeom_entries(100, 10, [1, 2], [0], out=np.empty((2, 2)))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_cell_kernel_of_a_nested_design_is_the_row_form(scheme):
    # a ladder's cells: one N, sizes 100..6400, many ranks per size (every column from the table)
    rng = np.random.default_rng(3)
    N = 50_000
    sizes = np.repeat([100, 400, 6400], [60, 80, 300])
    ranks = np.concatenate([np.sort(rng.choice(s, k, replace=False)) + 1 for s, k in [(100, 60), (400, 80),
                                                                                         (6400, 300)]])
    R = np.unique(np.r_[1, 2, 255, N, rng.integers(1, N + 1, 200)])
    K = cell_kernel(R, np.full(ranks.size, N), sizes, ranks, scheme)
    for s in (100, 400, 6400):
        j = np.flatnonzero(sizes == s)
        ref = np.exp(log_kernel_rows(N, s, R, scheme))[:, ranks[j] - 1]
        np.testing.assert_allclose(K[:, j], ref, rtol=2e-8, atol=1e-9)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("N, n", [(60, 12), (3706, 100), (10**5, 1500), (10**5, 22_400), (10**6, 5000)])
def test_windows_hold_all_but_bernsteins_bound_of_each_row(N, n, scheme):
    rng = np.random.default_rng(n)
    R = np.unique(np.r_[1, 2, N, N // 2, rng.integers(1, N + 1, size=60)])
    rows = np.exp(log_kernel_rows(N, n, R, scheme))
    first, last = kernel_windows(N, n, R, scheme)
    inside = (np.arange(n)[None, :] >= first[:, None]) & (np.arange(n)[None, :] <= last[:, None])
    assert np.all(np.where(inside, 0.0, rows).sum(axis=1) <= 1.2e-18 + 1e-16 * n)
    W = int((last - first).max()) + 1
    P = window_pmf(N, n, R, first, W, scheme)
    want = np.take_along_axis(np.c_[rows, np.zeros((R.size, W))], first[:, None] + np.arange(W)[None, :],
                              axis=1)
    want[np.arange(W)[None, :] > (last - first)[:, None]] = P[np.arange(W)[None, :] > (last - first)[:, None]]
    np.testing.assert_allclose(P, want, rtol=2e-8, atol=1e-9)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("N, n", [(200, 40), (3706, 100), (10**5, 4096), (10**5, 22_400)])
def test_kernel_bin_masses_are_the_kernel_summed_over_each_bin(N, n, scheme):
    rng = np.random.default_rng(7)
    R = np.unique(np.r_[1, 2, N, N // 3, rng.integers(1, N + 1, size=50)])
    edges = np.unique(np.r_[1, rng.integers(2, n + 1, size=25), n + 1])
    lo, hi = edges[:-1], edges[1:] - 1
    rows = np.exp(log_kernel_rows(N, n, R, scheme))
    want = np.stack([rows[:, a - 1:b].sum(axis=1) for a, b in zip(lo, hi)], axis=1)
    got = kernel_bin_masses(N, n, R, lo, hi, scheme)
    np.testing.assert_allclose(got, want, rtol=2e-8, atol=1e-15 if n >= kernels.WINDOW_MIN_N else 1e-300)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-9)          # the bins partition 1..n
    with pytest.raises(ValueError, match="lo and hi"):
        kernel_bin_masses(N, n, R, [2], [1], scheme)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("N, n", [(10**5, 1024), (10**5, 4096), (3 * 10**5, 20_000)])
def test_grid_bounds_on_windows_equal_those_of_whole_rows(N, n, scheme):
    # rank_grid's TV bounds for n >= WINDOW_MIN_N sum the union of the two rows' windows only
    rng = np.random.default_rng(1)
    A = np.r_[1, 2, N, rng.integers(1, N + 1, 150)]
    B = np.clip(A + rng.integers(-N // 40, N // 40 + 1, A.size), 1, N)
    full = np.empty(A.size)
    for i in range(A.size):
        ka, kb = np.exp(log_kernel_rows(N, n, A[i:i + 1], scheme)), np.exp(log_kernel_rows(N, n, B[i:i + 1], scheme))
        full[i] = 0.5 * np.abs(ka - kb).sum()
    np.testing.assert_allclose(_grid._tv_rows(N, n, A, B, scheme), full, rtol=1e-8, atol=1e-9)
