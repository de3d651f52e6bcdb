"""AP@k under random rankings: formulas, enumeration, Monte Carlo (AP25; notebook 07).

Re-exported by :mod:`sampling_lib.studies`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = [
    "ap_enumeration_check",
    "ap_monte_carlo",
    "ap_scenarios",
]


# ----------------------------------------------------------------------------
# AP@k under random rankings (AP25, notebook 07)
# ----------------------------------------------------------------------------
def ap_enumeration_check(N_max, k_max_wr, p_values):
    """The AP25 formulas next to exhaustive enumeration, on every small case.

    WOR (offline): every N <= ``N_max``, m in 0..N, k in 1..N: E and Var of
    AP@k from :mod:`sampling_lib.random_baseline` and from
    :func:`sampling_lib.testing.enumerate_ap_wor`, plus the literal printed Thm
    4.4 (N >= 4). WR (online): every p in ``p_values`` and k <= ``k_max_wr``
    against :func:`sampling_lib.testing.enumerate_ap_wr` (all 2^k patterns).

    Returns
    -------
    wor, wr : pandas.DataFrame
        Columns ``N, m, k, E formula, E enum, Var formula, Var enum, Var printed
        Thm 4.4`` and ``p, k, E formula, E enum, Var formula, Var enum``.

    References
    ----------
    AP25 Thms 4.2, 4.4, 5.1, 5.2.

    Examples
    --------
    >>> wor, wr = ap_enumeration_check(4, 3, [0.5])
    >>> bool(np.allclose(wor["Var formula"], wor["Var enum"])), len(wr)
    (True, 3)
    """
    from .. import random_baseline as rb
    from .. import testing

    rows = []
    for N in range(1, N_max + 1):
        ks = np.arange(1, N + 1)
        for m in range(N + 1):
            ex = testing.enumerate_ap_wor(N, m, ks)
            rows.append(pd.DataFrame({"N": N, "m": m, "k": ks, "E formula": rb.expected_ap_wor(N, m, ks),
                                      "E enum": ex.mean, "Var formula": rb.var_ap_wor(N, m, ks), "Var enum": ex.var,
                                      "Var printed Thm 4.4": testing.var_ap_wor_paper(N, m, ks) if N >= 4
                                      else np.full(ks.size, np.nan)}))
    ks = np.arange(1, k_max_wr + 1)
    wr = [pd.DataFrame({"p": p, "k": ks, "E formula": rb.expected_ap_wr(p, ks), "E enum": ex.mean,
                        "Var formula": rb.var_ap_wr(p, ks), "Var enum": ex.var})
          for p in p_values for ex in [testing.enumerate_ap_wr(p, ks)]]
    return pd.concat(rows, ignore_index=True), pd.concat(wr, ignore_index=True)


def ap_monte_carlo(grid_wor, grid_wr, n_sims, *, rng=None):
    """E and Var of AP@k by Monte Carlo next to the AP25 formulas, with z-scores.

    ``grid_wor``: (N, m, cutoffs) cells of the offline model; ``grid_wr``:
    (p, cutoffs) cells of the online one; ``n_sims`` draws per cell
    (:func:`sampling_lib.random_baseline.simulate_ap_summary`).

    Returns
    -------
    pandas.DataFrame
        Columns ``model, N, m, p, k, E formula, E MC, SE(E), Var formula, Var MC,
        SE(Var), z(E), z(Var)``.

    References
    ----------
    AP25 Thms 4.2, 4.4, 5.1, 5.2.
    """
    from .. import random_baseline as rb

    rows = []
    for N, m, ks in grid_wor:
        s = rb.simulate_ap_summary("wor", ks, n_sims, N=N, m=m, rng=rng)
        rows.append(pd.DataFrame({"model": "WOR", "N": N, "m": m, "p": m / N, "k": ks,
                                  "E formula": rb.expected_ap_wor(N, m, ks), "E MC": s.mean, "SE(E)": s.se_mean,
                                  "Var formula": rb.var_ap_wor(N, m, ks), "Var MC": s.var, "SE(Var)": s.se_var}))
    for p, ks in grid_wr:
        s = rb.simulate_ap_summary("wr", ks, n_sims, p=p, rng=rng)
        rows.append(pd.DataFrame({"model": "WR", "N": np.nan, "m": np.nan, "p": p, "k": ks,
                                  "E formula": rb.expected_ap_wr(p, ks), "E MC": s.mean, "SE(E)": s.se_mean,
                                  "Var formula": rb.var_ap_wr(p, ks), "Var MC": s.var, "SE(Var)": s.se_var}))
    mc = pd.concat(rows, ignore_index=True)
    mc["z(E)"] = (mc["E MC"] - mc["E formula"]) / mc["SE(E)"]
    mc["z(Var)"] = (mc["Var MC"] - mc["Var formula"]) / mc["SE(Var)"]
    return mc


def ap_scenarios(scenarios, n_sims, *, rng=None):
    """E and Var of AP@k in AP25's scenarios: closed form, exact recursion, Monte Carlo.

    ``scenarios`` has columns ``scenario, N, m, p, k`` (AP25 Table 1, e.g.
    ``sampling_lib.testing.paper_table("ap25_table2")``). For every scenario
    and quantity (E_WOR, E_WR, Var_WOR, Var_WR): the formula, the recursion of
    :mod:`sampling_lib.testing` and ``n_sims`` Monte Carlo draws with their
    standard error (WOR then WR draws per scenario).

    Returns
    -------
    pandas.DataFrame
        Columns ``scenario, N, m, p, k, quantity, formula, recursion, MC, MC se``.

    References
    ----------
    AP25 Tables 1-2.
    """
    from .. import random_baseline as rb
    from .. import testing

    rows = []
    for sc in scenarios.itertuples(index=False):
        N, m, p, k = int(sc.N), int(sc.m), float(sc.p), int(sc.k)
        rec_o, rec_n = testing.recursive_ap_moments_wor(N, m, k), testing.recursive_ap_moments_wr(p, k)
        so = rb.simulate_ap_summary("wor", k, n_sims, N=N, m=m, rng=rng)
        sn = rb.simulate_ap_summary("wr", k, n_sims, p=p, rng=rng)
        vals = {"E_WOR": (rb.expected_ap_wor(N, m, k), rec_o.mean, so.mean, so.se_mean),
                "E_WR": (rb.expected_ap_wr(p, k), rec_n.mean, sn.mean, sn.se_mean),
                "Var_WOR": (rb.var_ap_wor(N, m, k), rec_o.var, so.var, so.se_var),
                "Var_WR": (rb.var_ap_wr(p, k), rec_n.var, sn.var, sn.se_var)}
        rows += [dict(scenario=sc.scenario, N=N, m=m, p=p, k=k, quantity=q, formula=f, recursion=r, MC=s,
                      **{"MC se": se}) for q, (f, r, s, se) in vals.items()]
    return pd.DataFrame(rows)
