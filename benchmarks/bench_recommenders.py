"""Benchmark: EASE scoring + ranking throughput (users/s), blocked vs per-user reference.

Ours: ``sampling_lib.recommenders.global_ranks`` scores users in blocks (one sparse x
dense product per block), masks the training items and counts, per user, the items
scoring at least as high as the held-out item (pessimistic tie rule; O(N) per user).
Reference: the textbook per-user loop - score one user, mask its training items and
rank the held-out item with ``scipy.stats.rankdata(-scores, method="max")`` (a full
sort, same tie rule). Both run side by side on the same users; the script checks that
the ranks agree exactly and prints users/s and the ratio.

Data sets:

1. MovieLens 100K (``../shared/data/ml-100k/u.data``, skipped if absent): load +
   leave-one-out + EASE fit (lambda = 200) + global ranks of all 943 users.
2. Synthetic implicit feedback with 100K users x 20K items
   (``sampling_lib.data.synthetic_ratings``, ~30 interactions per user). The EASE fit
   needs a dense 20K x 20K Cholesky solve: on the project's shared 2-core machine that
   is ~15-20 minutes (float32) and 3-6 GB, so by default the fit is *measured* at
   ``--fit-items`` (default 4000) of the most popular items and extrapolated by N^3;
   ``--full-ease`` fits the full 20K model instead. Scoring + ranking cost does not
   depend on how the dense N x N item matrix was obtained, so without ``--full-ease``
   throughput at N = 20K is measured with a dense float32 20K x 20K item matrix built
   from normalised co-occurrences (item-KNN cosine, same shape and scoring cost as
   EASE's B), on ``--users`` (default 10000) users; the reference loop runs on
   ``--ref-users`` (default 300) of them.

3. ``--fit N,N,...``: the EASE fit alone, ours (LAPACK ``potrf`` + ``potri`` in the Gram
   matrix's own memory, :class:`sampling_lib.recommenders.EASE`) beside the textbook reference
   (``scipy.linalg.cho_factor`` + ``cho_solve`` against the identity, then the column scaling),
   side by side on the same random 0/1 matrix (20,000 users, about 30 items each) in float64.
   Each prints seconds and the peak of numpy's allocations (``tracemalloc``), and checks that the
   two B agree to 1e-8. Both run with the BLAS threads EASE uses at that N.

Usage: .venv/bin/python benchmarks/bench_recommenders.py [--quick] [--full-ease] [--fit 4000,8000]
"""
from __future__ import annotations

import argparse
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy import stats

from sampling_lib.data import leave_one_out, load_ratings, synthetic_ratings
from sampling_lib._models import _dense_gram
from sampling_lib.recommenders import EASE, Recommender, global_ranks

ML100K = Path(__file__).resolve().parents[1].parent / "shared/data/ml-100k/u.data"


def reference_ranks(model, train, test_items, users):
    """Per-user loop: score one user, mask training items, full-sort rank (method='max')."""
    out = np.empty(len(users), dtype=np.int64)
    for j, u in enumerate(users):
        s = model.score([u])[0]
        s[train[u].indices] = -np.inf
        out[j] = int(stats.rankdata(-s, method="max")[test_items[u]])
    return out


def compare(label, model, train, test_items, users, ref_users):
    sub_train = train[users]
    sub_test = test_items[users]
    # global_ranks scores rows 0..M-1 of the model; restrict the model to the chosen users
    t = time.perf_counter()
    ours = global_ranks(_RowView(model, users), sub_train, sub_test)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    ref = reference_ranks(model, train, test_items, users[:ref_users])
    t_ref = time.perf_counter() - t
    agree = np.array_equal(ours[:ref_users], ref)
    ups_ours, ups_ref = len(users) / t_ours, ref_users / t_ref
    print(f"{label}: blocked {ups_ours:,.0f} users/s ({len(users)} users, {t_ours:.2f} s) | "
          f"per-user reference {ups_ref:,.0f} users/s ({ref_users} users) | ratio {ups_ours / ups_ref:.1f}x | "
          f"ranks agree: {agree}")
    return ups_ours, ups_ref


class _RowView(Recommender):
    """A fitted model seen through a subset of its users (rows), for timing on a subset."""

    def __init__(self, model, users):
        self._m, self._u = model, np.asarray(users)
        self.n_users_, self.n_items_ = len(users), model.n_items_

    def score(self, users):
        return self._m.score(self._u[np.asarray(users)])


def bench_ml100k(ref_users):
    if not ML100K.exists():
        print("MovieLens 100K not found: skipped")
        return
    t = time.perf_counter()
    split = leave_one_out(load_ratings(ML100K))
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    model = EASE(lam=200.0).fit(split.train)
    t_fit = time.perf_counter() - t
    print(f"ml-100k: M = {split.n_users}, N = {split.n_items}; load + split {t_load:.2f} s, "
          f"EASE fit {t_fit:.2f} s")
    compare("ml-100k EASE scoring + ranking", model, split.train, split.test_items,
            np.arange(split.n_users), min(ref_users, split.n_users))


def bench_synthetic(n_users, n_items, fit_items, users, ref_users, full_ease, seed=0):
    t = time.perf_counter()
    r = synthetic_ratings(n_users, n_items, rng=seed)
    split = leave_one_out(r)
    t_gen = time.perf_counter() - t
    print(f"synthetic: M = {split.n_users}, N = {split.n_items}, {r.n_interactions:,} interactions; "
          f"generate + split {t_gen:.1f} s")
    rng = np.random.default_rng(seed)
    sel = np.sort(rng.choice(split.n_users, size=min(users, split.n_users), replace=False))
    if full_ease:
        t = time.perf_counter()
        model = EASE(lam=200.0, dtype=np.float32).fit(split.train)
        print(f"EASE fit, N = {n_items} (float32): {time.perf_counter() - t:.1f} s")
        compare(f"synthetic {n_users}x{n_items} EASE scoring + ranking", model, split.train,
                split.test_items, sel, ref_users)
        return
    # EASE fit at fit_items most popular items, extrapolated by N^3
    pop = np.argsort(-np.asarray(split.train.sum(axis=0)).ravel(), kind="stable")[:fit_items]
    t = time.perf_counter()
    EASE(lam=200.0, dtype=np.float32).fit(split.train[:, pop])
    t_fit = time.perf_counter() - t
    print(f"EASE fit at N = {fit_items} items (float32): {t_fit:.1f} s -> extrapolated to N = {n_items}: "
          f"~{t_fit * (n_items / fit_items) ** 3:.0f} s (N^3)")
    # a dense float32 N x N item matrix with EASE's shape and scoring cost
    model = EASE(lam=200.0, dtype=np.float32)
    X = split.train.astype(np.float32)
    S = _dense_gram(X, np.float32)
    d = np.sqrt(np.diag(S).copy())
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    S *= inv[:, None]
    S *= inv[None, :]
    np.fill_diagonal(S, 0.0)
    model.B_, model._X = S, X
    model.n_users_, model.n_items_ = split.n_users, split.n_items
    compare(f"synthetic {n_users}x{n_items} scoring + ranking (dense float32 {n_items}^2 item matrix)",
            model, split.train, split.test_items, sel, ref_users)


def reference_ease_B(X, lam):
    """The textbook EASE fit: Cholesky factor, solve against the identity, scale the columns."""
    from sampling_lib._models import EASE_ONE_THREAD_ITEMS, _one_blas_thread_from

    N = X.shape[1]
    G = (X.T @ X).toarray()
    G[np.diag_indices(N)] += lam
    with _one_blas_thread_from(N, EASE_ONE_THREAD_ITEMS):
        cf = sla.cho_factor(G, lower=False, overwrite_a=True, check_finite=False)
        P = sla.cho_solve(cf, np.eye(N), overwrite_b=True, check_finite=False)
    P /= -np.diag(P).copy()[None, :]
    P[np.diag_indices(N)] = 0.0
    return np.ascontiguousarray(P)


def _timed(f):
    tracemalloc.start()
    t = time.perf_counter()
    out = f()
    dt = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, dt, peak


def bench_fit(sizes, lam=200.0, seed=0):
    for N in sizes:
        X = sp.random(20000, N, density=min(1.0, 30 / N), random_state=seed, format="csr")
        X.data[:] = 1.0
        ours, t_ours, m_ours = _timed(lambda: EASE(lam=lam).fit(X).B_)
        ref, t_ref, m_ref = _timed(lambda: reference_ease_B(X, lam))
        agree = bool(np.allclose(ours, ref, rtol=0, atol=1e-8))
        del ours, ref
        print(f"EASE fit N = {N:,} (float64; one N x N matrix is {N * N * 8 / 1e9:.2f} GB): ours {t_ours:.1f} s, "
              f"peak {m_ours / 1e9:.2f} GB | reference {t_ref:.1f} s, peak {m_ref / 1e9:.2f} GB | "
              f"time ratio {t_ref / t_ours:.2f}x, memory ratio {m_ref / m_ours:.2f}x | B agree: {agree}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="synthetic 20K users x 5K items")
    ap.add_argument("--full-ease", action="store_true", help="fit EASE on all 20K items (slow)")
    ap.add_argument("--fit-items", type=int, default=4000)
    ap.add_argument("--users", type=int, default=10000)
    ap.add_argument("--ref-users", type=int, default=300)
    ap.add_argument("--fit", default=None, metavar="N,N,...",
                    help="only the EASE fit at these item counts, ours beside the textbook solve")
    args = ap.parse_args()
    if args.fit:
        bench_fit([int(x) for x in args.fit.split(",")])
        return
    bench_ml100k(args.ref_users)
    if args.quick:
        bench_synthetic(20000, 5000, min(args.fit_items, 2000), args.users, args.ref_users, args.full_ease)
    else:
        bench_synthetic(100000, 20000, args.fit_items, args.users, args.ref_users, args.full_ease)


if __name__ == "__main__":
    main()
