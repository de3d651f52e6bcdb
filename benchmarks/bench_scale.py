"""Benchmark: time and peak memory of ``estimate`` as the catalogue grows, N = 10^3..10^8.

Part 1 -- scaling with N. ``estimate`` with the default method, 1,000 bootstrap
replicates, n = 100 and M = 10^5 users, for N = 10^3, ..., 10^8, each run in its own
subprocess (peak RSS = ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of that process;
"base" is the RSS after imports and data generation, before ``estimate``), side by side
with the reference: the full-N path (``sampling_lib._estimate_rows._METRIC_HEAD = False``: the
metric matrix and the weights on every rank 1..N, as before the compressed kernels) where it fits in
memory (N <= 10^7). The two paths must give the same table (max |difference| of the
estimate and interval columns is printed). Writes ``benchmarks/scaling.png``.

Part 2 (``--parquet``) -- a partitioned Parquet ranks file of 10^8 rows (columns
``rank, n_items, model``: two models, N_u = N = 10^7 for every user by default,
``--n-items-values k`` for k distinct per-user N_u in [N - 1000 (k - 1), N]; n = 100) is generated in 100 chunks of 10^6 rows with pyarrow in a temporary
directory, read through the library's counts path (:func:`sampling_lib.io.counts_table`,
dask, partition by partition -> :func:`sampling_lib.counts.counts_from_frame` ->
``estimate`` per model, 1,000 replicates), timed, its peak RSS measured
in a subprocess, and deleted. Not committed, not run in CI.

Part 3 (``--many-users``) -- ``estimate`` on the counts table of 5 x 10^7 users at N = 10^7 (one
model of the Parquet file, without the file): wall and CPU time, peak RSS.

Data: global ranks R = ceil(N x Beta(0.3, 3)) (a long-tailed rank distribution),
sampled ranks r = 1 + Binomial(n - 1, (R - 1)/(N - 1)) (sampling with replacement).

Usage: .venv/bin/python benchmarks/bench_scale.py [--quick] [--parquet] [--no-scaling]
       [--n-items-values k] [--many-users]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
N_USERS, SAMPLE, BOOT = 100_000, 100, 1000
METRICS = ["recall@10", "ndcg@10"]
COLS = ["estimate", "ci_low", "ci_high", "se", "sensitivity_low", "sensitivity_high"]


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0     # Linux: KiB


def _sampled_ranks(N, M, n, rng):
    R = np.minimum(N, np.ceil(N * rng.beta(0.3, 3.0, size=M))).astype(np.int64)
    return 1 + rng.binomial(n - 1, (R - 1) / (N - 1))


# ----------------------------------------------------------------------------
# children (one process per measurement)
# ----------------------------------------------------------------------------
def child_estimate(N, path, M, n_boot):
    from sampling_lib import _estimate_rows

    _estimate_rows._METRIC_HEAD = path == "head"
    r = _sampled_ranks(N, M, SAMPLE, np.random.default_rng(0))
    base = _rss_mb()
    t = time.perf_counter()
    tab = correct.estimate(r, N, SAMPLE, METRICS, n_boot=n_boot, rng=1)
    sec = time.perf_counter() - t
    print(json.dumps({"N": N, "path": path, "seconds": sec, "peak_mb": _rss_mb(), "base_mb": base,
                      "values": tab[COLS].to_numpy().tolist()}))


def child_generate(directory, rows, chunk, N, k):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    t = time.perf_counter()
    Nu_values = N - np.arange(k) * 1000
    for i in range(rows // chunk):
        model = np.where(rng.random(chunk) < 0.5, "A", "B")
        Nu = Nu_values[rng.integers(0, k, chunk)]
        a = np.where(model == "A", 0.3, 0.5)
        R = np.minimum(Nu, np.ceil(Nu * rng.beta(a, 3.0))).astype(np.int64)
        r = 1 + rng.binomial(SAMPLE - 1, (R - 1) / (Nu - 1))
        tbl = pa.table({"rank": pa.array(r.astype(np.int16)), "n_items": pa.array(Nu.astype(np.int32)),
                        "model": pa.array(model).dictionary_encode()})
        pq.write_table(tbl, os.path.join(directory, f"part-{i:04d}.parquet"))
    size = sum(f.stat().st_size for f in Path(directory).iterdir())
    print(json.dumps({"seconds": time.perf_counter() - t, "peak_mb": _rss_mb(), "bytes": size}))


def child_parquet(directory, n_boot):
    from sampling_lib.correct import estimate
    from sampling_lib.counts import counts_from_frame
    from sampling_lib.io import counts_table

    t = time.perf_counter()
    table = counts_table(directory)
    t_read = time.perf_counter() - t
    users = int(table["count"].sum())
    stats = counts_from_frame(table, n=SAMPLE)
    t = time.perf_counter()
    out = {}
    for m, st in stats.items():
        tab = estimate(st, metrics=METRICS, n_boot=n_boot, rng=1)
        out[m] = tab[["metric", "estimate", "ci_low", "ci_high"]].round(5).values.tolist()
    t_est = time.perf_counter() - t
    print(json.dumps({"read_seconds": t_read, "estimate_seconds": t_est, "peak_mb": _rss_mb(),
                      "users": users, "cells": int(len(table)), "tables": out}))


def _run_child(args, timeout=3600):
    res = subprocess.run([sys.executable, __file__, "--child", *map(str, args)], capture_output=True,
                         text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------
# parent
# ----------------------------------------------------------------------------
def scaling(quick):
    Ns = [10**k for k in range(3, 9)]
    full_max = 10**7
    M, n_boot = (N_USERS, BOOT) if not quick else (20_000, 200)
    if quick:
        Ns, full_max = Ns[:-2], 10**5
    print(f"== estimate, default method, {n_boot} replicates, n = {SAMPLE}, M = {M}; "
          f"reference = full-N path for N <= {full_max:.0e} ==")
    rows = []
    for N in Ns:
        head = _run_child(["estimate", N, "head", M, n_boot])
        full = _run_child(["estimate", N, "full", M, n_boot]) if N <= full_max else None
        diff = (float(np.nanmax(np.abs(np.array(head["values"]) - np.array(full["values"]))))
                if full else float("nan"))
        rows.append((N, head, full, diff))
        print(f"N = {N:.0e}: head {head['seconds']:.2f} s, {head['peak_mb']:.0f} MB peak "
              f"(base {head['base_mb']:.0f} MB)"
              + (f"; full-N {full['seconds']:.2f} s, {full['peak_mb']:.0f} MB peak; "
                 f"ratio time {full['seconds'] / head['seconds']:.2f}x, memory above base "
                 f"{(full['peak_mb'] - full['base_mb']) / max(head['peak_mb'] - head['base_mb'], 1):.1f}x; "
                 f"max |diff| {diff:.1e}" if full else "; full-N path not run (memory)"), flush=True)
    print("\n| N | time (s) | peak RSS (MB) | above base (MB) | full-N time (s) | full-N peak RSS (MB) "
          "| full-N above base (MB) | max abs diff |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for N, h, f, d in rows:
        fs = (f"{f['seconds']:.2f} | {f['peak_mb']:.0f} | {f['peak_mb'] - f['base_mb']:.0f} | {d:.1e}"
              if f else "-- | -- | -- | --")
        print(f"| 10^{int(round(np.log10(N)))} | {h['seconds']:.2f} | {h['peak_mb']:.0f} | "
              f"{h['peak_mb'] - h['base_mb']:.0f} | {fs} |")
    plot(rows, HERE / ("scaling_quick.png" if quick else "scaling.png"), M, n_boot)


def plot(rows, out, M, n_boot):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    N = [r[0] for r in rows]
    fN = [r[0] for r in rows if r[2]]
    a1.plot(N, [r[1]["seconds"] for r in rows], "o-", label="estimate (ranks 1..max K)")
    a1.plot(fN, [r[2]["seconds"] for r in rows if r[2]], "s--", label="full-N path (reference)")
    a2.plot(N, [r[1]["peak_mb"] for r in rows], "o-", label="estimate (ranks 1..max K)")
    a2.plot(fN, [r[2]["peak_mb"] for r in rows if r[2]], "s--", label="full-N path (reference)")
    a2.plot(N, [r[1]["base_mb"] for r in rows], ":", color="grey", label="before estimate (imports, data)")
    for a, lab in ((a1, "wall time (s)"), (a2, "peak RSS (MB)")):
        a.set_xscale("log")
        a.set_xlabel("catalogue size N (items)")
        a.set_ylabel(lab)
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    a2.set_yscale("log")
    fig.suptitle(f"estimate(), default method, {n_boot} bootstrap replicates, n = {SAMPLE}, M = {M} users")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def parquet(quick, k):
    rows, chunk, N = (10**8, 10**6, 10**7) if not quick else (10**6, 10**5, 10**5)
    n_boot = BOOT if not quick else 200
    d = tempfile.mkdtemp(prefix="bench_scale_parquet_")
    try:
        g = _run_child(["generate", d, rows, chunk, N, k])
        print(f"== Parquet: {rows:.0e} rows (rank, n_items, model) in {rows // chunk} files, "
              f"{g['bytes'] / 1e6:.0f} MB on disk; generated in {g['seconds']:.1f} s, "
              f"peak RSS {g['peak_mb']:.0f} MB ==")
        p = _run_child(["parquet", d, n_boot])
        print(f"counts_table (dask): {p['read_seconds']:.1f} s -> {p['cells']} cells, {p['users']} users; "
              f"estimate per model ({k} distinct N_u, {n_boot} replicates): {p['estimate_seconds']:.1f} s; "
              f"peak RSS {p['peak_mb']:.0f} MB (a 10^8-row int64 column alone is 800 MB)")
        for m, t in p["tables"].items():
            print(f"  model {m}: {t}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
        print(f"deleted {d}")


def many_users(M=5 * 10**7, N=10**7, n=100):
    """Part 3: ``estimate`` (default, 1,000 replicates) on the counts table of M users at N, the size of
    one model of the Parquet file, without the file: the sampled ranks are drawn in ten chunks and counted."""
    import numpy as np
    import pandas as pd

    import sampling_lib as sl

    rng = np.random.default_rng(0)
    cnt = np.zeros(n + 1, dtype=np.int64)
    for _ in range(10):
        R = np.minimum(N, np.ceil(N * rng.beta(0.3, 3, size=M // 10))).astype(np.int64)
        cnt += np.bincount(1 + rng.binomial(n - 1, (R - 1) / (N - 1)), minlength=n + 1)
    del R
    tab = pd.DataFrame({"rank": np.arange(1, n + 1), "count": cnt[1:], "sample_size": n})
    t, c = time.perf_counter(), time.process_time()
    out = sl.estimate(tab[tab["count"] > 0], N, n, n_boot=1000, rng=np.random.default_rng(1))
    print(f"many users: estimate on the counts of M = {M:.0e} users, N = {N:.0e}, n = {n}: "
          f"{time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU, peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(out[["metric", "estimate", "ci_low", "ci_high"]].to_string(index=False))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        kind, a = sys.argv[2], sys.argv[3:]
        if kind == "estimate":
            return child_estimate(int(a[0]), a[1], int(a[2]), int(a[3]))
        if kind == "generate":
            return child_generate(a[0], int(a[1]), int(a[2]), int(a[3]), int(a[4]))
        if kind == "parquet":
            return child_parquet(a[0], int(a[1]))
        raise SystemExit(f"unknown child {kind}")
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    ap.add_argument("--parquet", action="store_true", help="also the 10^8-row Parquet benchmark")
    ap.add_argument("--no-scaling", action="store_true", help="skip the scaling part")
    ap.add_argument("--n-items-values", type=int, default=1,
                    help="distinct per-user N_u in the Parquet file (default 1)")
    ap.add_argument("--many-users", action="store_true",
                    help="also estimate on the counts of 5 x 10^7 users at N = 10^7 (no file)")
    args = ap.parse_args()
    if not args.no_scaling:
        scaling(args.quick)
    if args.parquet:
        parquet(args.quick, args.n_items_values)
    if args.many_users:
        many_users(*((10**6, 10**5) if args.quick else ()))


if __name__ == "__main__":
    main()
