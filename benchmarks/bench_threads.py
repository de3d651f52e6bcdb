"""Benchmark: the CLI with one BLAS thread (the default now) against BLAS on every core, idle and loaded.

``sampling-lib estimate`` and ``compare`` (default method,
1,000 bootstrap replicates) on 2 models x 2,000 users (N = 3,706, n = 100,
synthetic ranks written to a temporary folder), each run as its own process:

* ``pinned``: no thread variable in the environment, so the CLI limits BLAS to
  one thread (``sampling_lib._threads``) -- what a user gets by default;
* ``unpinned``: ``OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = cores``, a user's
  explicit setting, which the CLI leaves alone -- what every run got before.

Both idle and *loaded*: while loaded, one busy-looping process per core runs
beside the command (another job on the machine). Each cell is the median of
``--repeats`` runs (runs alternate between the two settings, so that drifting
load from elsewhere hits both alike); the ratio unpinned / pinned is printed per
command and load.

Usage: .venv/bin/python benchmarks/bench_threads.py [--repeats 3] [--quick]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sampling_lib._threads import USER_THREAD_VARIABLES
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import sample_ranks

CLI = [sys.executable, "-m", "sampling_lib"]


def ranks_file(folder, users, N=3706, n=100):
    rows = []
    for i, (model, law) in enumerate((("bpr", "beta_a0.35"), ("neumf", "beta_a0.25"))):
        R = draw_global_ranks(synthetic_models(N)[law], users, rng=i)
        rows.append(pd.DataFrame({"user": np.arange(users), "model": model,
                                  "rank": sample_ranks(R, N, n, rng=10 + i)}))
    path = Path(folder) / "ranks.csv"
    pd.concat(rows).to_csv(path, index=False)
    return path


def environment(setting, cores):
    env = {k: v for k, v in os.environ.items() if k not in USER_THREAD_VARIABLES}
    if setting == "unpinned":
        env.update(OPENBLAS_NUM_THREADS=str(cores), OMP_NUM_THREADS=str(cores))
    return env


def one_run(command, path, setting, cores):
    args = [*CLI, command, str(path), "-N", "3706", "-n", "100", "--metric", "recall@10", "--metric",
            "ndcg@10", "--quiet", "--output", os.devnull]
    t = time.perf_counter()
    subprocess.run(args, env=environment(setting, cores), check=True, capture_output=True)
    return time.perf_counter() - t


class Load:
    """One busy-looping process per core (started and stopped by this script, by pid)."""

    def __init__(self, cores):
        self.cores, self.procs = cores, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.cores)]
        time.sleep(1.0)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="estimate only, 1 repeat, 500 users")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    repeats = 1 if a.quick else a.repeats
    commands = ["estimate"] if a.quick else ["estimate", "compare"]
    print(f"{cores} cores; load average before: {os.getloadavg()[0]:.2f}; median of {repeats} runs per cell")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = ranks_file(tmp, 500 if a.quick else 2000)
        for load in ("idle", "loaded"):
            ctx = Load(cores) if load == "loaded" else None
            if ctx:
                ctx.__enter__()
            try:
                for command in commands:
                    times = {"pinned": [], "unpinned": []}
                    for _ in range(repeats):
                        for setting in ("unpinned", "pinned"):
                            times[setting].append(one_run(command, path, setting, cores))
                    med = {s: statistics.median(v) for s, v in times.items()}
                    rows.append({"command": command, "load": load,
                                 "pinned s": round(med["pinned"], 2), "unpinned s": round(med["unpinned"], 2),
                                 "ratio": round(med["unpinned"] / med["pinned"], 2),
                                 "pinned runs": " ".join(f"{x:.1f}" for x in times["pinned"]),
                                 "unpinned runs": " ".join(f"{x:.1f}" for x in times["unpinned"])})
                    print(rows[-1], flush=True)
            finally:
                if ctx:
                    ctx.__exit__(None, None, None)
    print()
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
