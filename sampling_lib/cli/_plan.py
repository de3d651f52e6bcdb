"""``sampling-lib plan-users`` (how many test users) and ``plan`` (which sampled design)."""
from __future__ import annotations

import pandas as pd

from ._common import CLIError, write

__all__ = ["cmd_plan_users"]

def cmd_plan_users(args):
    from ..user_sampling import (hoeffding_sample_size, sample_size_difference,
                                sample_size_proportion)

    k = args.models
    if k < 1:
        raise CLIError(f"--models must be >= 1; got {k}")
    rows = [dict(quantity="one metric per model (Recall@K, normal approx.)",
                 users=sample_size_proportion(args.margin, args.confidence_level, args.p, n_models=k),
                 source="TORS24 eq 46, Bonferroni over models"),
            dict(quantity="one metric per model (any metric in [0,1], Hoeffding)",
                 users=hoeffding_sample_size(args.margin, 1 - args.confidence_level, n_tests=k),
                 source="Hoeffding, Bonferroni over models")]
    if k >= 2:
        rows.append(dict(quantity="difference of two models (all pairs)",
                         users=sample_size_difference(args.margin, args.confidence_level, args.p,
                                                      n_models=k),
                         source="TORS24 eq 52, Bonferroni over pairs"))
    out = pd.DataFrame(rows)
    out.insert(1, "margin", args.margin)
    out.insert(2, "confidence_level", args.confidence_level)
    out.insert(3, "models", k)
    write(out, args.format, args.output)

