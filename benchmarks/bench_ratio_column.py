"""Benchmark: how well ``estimate``'s ``ratio`` column (precision_ratio) reads the realized precision ratio.

The column divides the interval's half-width by full ranking's half-width *estimated from the fit*
(z sqrt(Var F(R) / M), Var F(R) under the fitted prior). The realized ratio divides the same half-width by
full ranking's own interval for the same users (their true global ranks). So the two differ only in the
denominator, and their quotient printed / realized is the column's relative error.

Single-stage designs (n = 20 and 100; below resolution for K = 10 on these catalogues) and the ladder
(n -> 16 n, capped at the smallest N_u) on MovieLens 100K and Last.fm 2K, with EASE (ml-100k only), ALS,
item-KNN and popularity; 5 draws each (``studies.design_study``, 300 replicates), hypergeometric draws.

Needs ../shared/data. Usage: .venv/bin/python benchmarks/bench_ratio_column.py [--out benchmarks/results]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from sampling_lib import studies
from sampling_lib.experiments import global_ranks_from_data
from sampling_lib.sampling import Design
from sampling_lib.studies.panel_data import PANEL_DATASETS, PANEL_MODELS

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
CASES = [("ml-100k", ("ease-200", "als-64", "itemknn", "popularity")),
         ("lastfm-2k", ("als-64", "itemknn", "popularity"))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for label, models in CASES:
        spec = PANEL_DATASETS[label]
        if not all((SHARED / f).exists() for f in spec.files):
            print(f"skipped {label}: no ../shared/data")
            continue
        ranks, N, info = global_ranks_from_data(spec.ratings(SHARED), {m: PANEL_MODELS[m] for m in models}, rng=0,
                                                keep_models=False)
        Nu = info["n_candidates"]
        for m, R in ranks.items():
            for n in (20, 100):
                for kind, d in (("single", Design("single", n)),
                                ("ladder", Design("ladder", n, n_max=min(int(Nu.min()), 16 * n)))):
                    st = studies.design_study(R, Nu, d, repeats=args.repeats, n_boot=300, scheme="hypergeometric",
                                              rng=1)
                    for met, g in st.groupby("metric"):
                        rows.append({"data": label, "model": m, "n": n, "design": kind, "metric": met,
                                     "N/n": int(np.median(Nu) / n), "realized": g.ratio.mean(),
                                     "printed": g.estimated_ratio.mean(),
                                     "printed/realized": (g.estimated_ratio / g.ratio).mean()})
            print(pd.DataFrame(rows[-8:]).round(3).to_string(index=False), flush=True)
    t = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t.to_csv(out / "ratio_column.csv", index=False)
    print(t.groupby(["design", "metric"])["printed/realized"].agg(["count", "min", "mean", "max"]).round(3))


if __name__ == "__main__":
    main()
