"""Write examples/ranks.csv: the sampled ranks of two synthetic models, for trying the CLI.

Two known rank distributions over N = 3,706 items (the Beta laws of
``sampling_lib.rankdist.synthetic_models``), 1,000 test users each, every user's
held-out item ranked among itself and 99 uniformly sampled negatives (n = 100,
NCF's protocol), seeded. Columns ``user, model, rank``; ``truth.csv`` beside it
holds the global metrics the corrected estimates should approach.

Usage: .venv/bin/python examples/make_ranks.py   (rewrites examples/ranks.csv and examples/truth.csv)
"""
from pathlib import Path

import numpy as np
import pandas as pd

from sampling_lib.metrics import metric_values
from sampling_lib.rankdist import draw_global_ranks, synthetic_models
from sampling_lib.sampling import sample_ranks

N, n, USERS = 3706, 100, 1000
LAWS = {"modelA": "beta_a0.25", "modelB": "beta_a0.35"}


def main():
    here = Path(__file__).resolve().parent
    laws = synthetic_models(N)
    rows, truth = [], []
    for i, (model, law) in enumerate(LAWS.items()):
        R = draw_global_ranks(laws[law], USERS, rng=100 + i)
        rows.append(pd.DataFrame({"user": np.arange(USERS), "model": model,
                                  "rank": sample_ranks(R, N, n, rng=200 + i)}))
        truth += [{"model": model, "metric": m, "population": float(laws[law] @ metric_values(m, N)),
                   "these_users": float(metric_values(m, N)[R - 1].mean())}
                  for m in ("recall@10", "ndcg@10", "recall@50")]
    pd.concat(rows).to_csv(here / "ranks.csv", index=False)
    pd.DataFrame(truth).round(4).to_csv(here / "truth.csv", index=False)


if __name__ == "__main__":
    main()
