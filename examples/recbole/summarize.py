"""Table of the recipe's numbers: RecBole's own metrics vs the truth vs sampling-lab's correction.

Run with the sampling-lab environment (not RecBole's) on the files ``recbole_ranks.py`` wrote::

    python summarize.py ranks.csv metrics.csv --n-items 1682 [--n-boot 200] [--method NAME]

``ranks.csv`` is the recipe's OUTPUT; ``ranks_distinct.csv`` and ``ranks_truth.csv`` are read from beside it.
Columns per model and metric:

* ``recbole_full``  -- RecBole's ``full``-mode metric (its ``trainer.evaluate``);
* ``truth``         -- mean F(R_u) of the recipe's global ranks (``ranks_truth.csv``; same tie rule as the
  sampled ranks);
* ``recbole_uni``   -- RecBole's ``uniN`` metric (duplicates collapsed, its own tie order);
* ``naive``         -- the sampled metric of the written ranks (duplicates counted);
* ``est_N``         -- :func:`sampling_lib.estimate` with one N = the number of items, n = N + 1;
* ``est_N_u``       -- the same with each user's N_u (the ``n_items`` column of ``ranks.csv``, as
  ``sampling-lib estimate ranks.csv`` reads it);
* ``est_distinct``  -- on the ranks among distinct negatives (``ranks_distinct.csv``: per-user n_u, the
  hypergeometric scheme its ``scheme`` column records), with each user's N_u.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sampling_lib import estimate
from sampling_lib.io import ranks_from_table
from sampling_lib.metrics import metric_from_ranks

RB_NAME = {"recall": "hit", "ndcg": "ndcg", "mrr": "mrr"}


def sibling(path, suffix):
    """ranks.csv -> ranks<suffix>.csv (the files recbole_ranks.write_outputs writes beside OUTPUT)."""
    p = Path(path)
    return p.with_name(p.stem + suffix + p.suffix)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("ranks", help="the recipe's OUTPUT (ranks_distinct.csv and ranks_truth.csv beside it)")
    p.add_argument("metrics")
    p.add_argument("--n-items", type=int, required=True, help="number of items (MovieLens 100K: 1682)")
    p.add_argument("--metric", action="append", default=None)
    p.add_argument("--n-boot", type=int, default=200)
    p.add_argument("--method", default=None)
    p.add_argument("--mode", default="uni100")
    a = p.parse_args(argv)
    mets = a.metric or ["recall@10", "ndcg@10", "recall@50"]
    counted = ranks_from_table(a.ranks)
    distinct = ranks_from_table(sibling(a.ranks, "_distinct"))
    truth = pd.read_csv(sibling(a.ranks, "_truth"))
    rb = pd.read_csv(a.metrics).set_index(["model", "mode", "metric"])["value"]
    N = a.n_items
    rows = []
    kw = dict(metrics=mets, method=a.method, n_boot=a.n_boot, rng=0)
    for model in counted.models:
        r, s = counted.for_model(model)
        e1 = estimate(r, N, sample_sizes=s, **kw)
        e2 = estimate(r, counted.items_for_model(model), sample_sizes=s, **kw)
        rd, sd = distinct.for_model(model)
        e3 = estimate(rd, distinct.items_for_model(model), sample_sizes=sd, scheme=distinct.scheme, **kw)
        R = truth.loc[truth.model.astype(str) == model, "global_rank"].to_numpy()
        for j, m in enumerate(mets):
            name, K = m.split("@")
            key = f"{RB_NAME[name]}@{K}"
            rows.append(dict(
                model=model, metric=m,
                recbole_full=rb.get((model, "full", key), np.nan),
                truth=metric_from_ranks(R, m),
                recbole_uni=rb.get((model, a.mode, key), np.nan),
                naive=e1.naive[j],
                est_N=e1.estimate[j], ci_N=f"[{e1.ci_low[j]:.4f}, {e1.ci_high[j]:.4f}]",
                est_N_u=e2.estimate[j],
                est_distinct=e3.estimate[j],
                method=e1.method[j]))
    out = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(out.to_string(index=False, float_format=lambda x: f"{x:.4f}"))
    t = pd.read_csv(a.ranks)
    d = pd.read_csv(sibling(a.ranks, "_distinct"))
    print(f"N = {N} items; N_u from {t.n_items.min()} to {t.n_items.max()}, mean "
          f"{t.n_items.mean():.0f}; users {t.user.nunique()}; n = {t.sample_size.iloc[0]}; distinct "
          f"negatives per user {d.sample_size.mean() - 1:.1f} of {t.sample_size.iloc[0] - 1} "
          "on average", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
