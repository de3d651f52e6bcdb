"""Score a request file of ``sampling-lib design`` with two toy models: the scorer of the design example.

A stand-in for your framework. Its two models (modelA, modelB) rank each test user's held-out item at the
global ranks that ``examples/make_ranks.py`` draws (N = 3,706 items, the Beta laws of
``sampling_lib.rankdist.synthetic_models``), so ``examples/truth.csv`` (column ``these_users``) holds the
metrics the estimate should find; every other item gets a seeded random place in the user's ranking.

Usage (the loop of README's "Evaluate a model at full-ranking precision"):

    sampling-lib design init run --held-out examples/design/held_out.csv -N 3706
    while f=$(sampling-lib design status run --pending); do
        python examples/design/score_requests.py "$f" && sampling-lib design next run; done
    sampling-lib design estimate run

It reads ``run/request-K.csv`` (user, item) and writes ``run/scores-K.csv`` (user, item, score, model)
beside it (refusing to overwrite an existing file).
"""
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sampling_lib.rankdist import draw_global_ranks, synthetic_models

HERE = Path(__file__).resolve().parent
N = 3706
LAWS = {"modelA": "beta_a0.25", "modelB": "beta_a0.35"}        # as examples/make_ranks.py


def scores(users, items, held, model, k):
    """Score = minus the item's place in the user's ranking (the held-out item at the global rank R)."""
    R = draw_global_ranks(synthetic_models(N)[LAWS[model]], len(held), rng=100 + k)    # make_ranks.py's ranks
    out = np.empty(len(users))
    for u in np.unique(users):
        sel = np.flatnonzero(users == u)
        h = held[u]
        # a seeded order of the user's other items: place 0.. for the negatives, the held-out item at R - 1
        order = np.random.default_rng([k, int(u)]).permutation(N - 1)
        place = np.empty(N - 1, np.int64)
        place[order] = np.arange(N - 1)
        it = items[sel]
        neg = np.where(it < h, it, it - 1)                     # the item's index among the other N - 1 items
        p = place[np.clip(neg, 0, N - 2)]
        p = np.where(p >= R[u] - 1, p + 1, p)                  # leave place R - 1 to the held-out item
        out[sel] = np.where(it == h, -(R[u] - 1.0), -p.astype(float))
    return out


def main(request):
    request = Path(request)
    target = request.with_name(request.name.replace("request", "scores", 1)).with_suffix(".csv")
    if target.exists():
        sys.exit(f"{target} exists: not overwritten")
    held = pd.read_csv(HERE / "held_out.csv").set_index("user")["item"].to_numpy()
    pairs = pd.read_csv(request)
    u, i = pairs.user.to_numpy(), pairs.item.to_numpy()
    out = pd.concat([pairs.assign(score=scores(u, i, held, m, k), model=m) for k, m in enumerate(LAWS)])
    out.to_csv(target, index=False)
    print(f"scored {len(pairs):,} pairs x {len(LAWS)} models -> {target}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
