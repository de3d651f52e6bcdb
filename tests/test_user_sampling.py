"""Tests of sampling_lib.user_sampling and sampling_lib.inference (TORS24 Section 7, eqs 45-52)."""
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import (
    confint_proportions_2indep,
    power_proportions_2indep,
    proportion_confint as sm_proportion_confint,
    proportions_ztest,
    samplesize_proportions_2indep_onetail,
)

from sampling_lib import studies
from sampling_lib import inference as inf
from sampling_lib import user_sampling as us
from sampling_lib.metrics import metric_from_ranks

SM_ALT = {"two-sided": "two-sided", "less": "smaller", "greater": "larger"}


# ---------------------------------------------------------------------------
# sample sizes: reference table
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "margin, confidence, p, raw, m, tol",
    [
        # TORS24 eq 47: "approx 1067"; raw value with exact z = 1.959964
        (0.03, 0.95, 0.5, 1067.07, 1068, 0.01),
        # TORS24 eq 47: "approx 9604"
        (0.01, 0.95, 0.5, 9603.65, 9604, 0.01),
        # hand: 2.575829^2 * 0.25 / 0.05^2 = 663.49
        (0.05, 0.99, 0.5, 663.49, 664, 0.01),
        # hand: 1.644854^2 * 0.3 * 0.7 / 0.02^2 = 1420.41 (Recall@30 = 0.3, TORS Sec 7.1)
        (0.02, 0.90, 0.3, 1420.41, 1421, 0.01),
    ],
)
def test_sample_size_proportion_reference(margin, confidence, p, raw, m, tol):
    assert us.sample_size_proportion(margin, confidence, p, round_up=False) == pytest.approx(raw, abs=tol)
    assert us.sample_size_proportion(margin, confidence, p) == m


def test_eq47_with_paper_z_196():
    # TORS24 eq 47 uses z = 1.96: 1.96^2 * 0.25 / 0.03^2 = 1067.11, / 0.01^2 = 9604.0
    assert 1.96 ** 2 * 0.25 / 0.03 ** 2 == pytest.approx(1067.11, abs=0.005)
    raw = us.sample_size_proportion(0.03, round_up=False)
    assert round(raw) == 1067 and math.ceil(raw) == 1068


@pytest.mark.parametrize("margin", [0.005, 0.01, 0.03, 0.1])
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_eq52_is_double_eq46(margin, p):
    # TORS24 after eq 52: "the value in Equation (52) is double that of Equation (46)"
    a = us.sample_size_proportion(margin, p=p, round_up=False)
    b = us.sample_size_difference(margin, p=p, round_up=False)
    assert b == pytest.approx(2 * a, rel=1e-12)


def test_sample_size_difference_reference():
    # hand: 2 * 0.25 * 1.959964^2 / 0.03^2 = 2134.14 -> 2135; / 0.01^2 = 19207.3 -> 19208
    assert us.sample_size_difference(0.03) == 2135
    assert us.sample_size_difference(0.01) == 19208


@pytest.mark.parametrize(
    "n_models, family, k",
    [(2, "all-pairs", 1), (2, "vs-best", 1), (5, "all-pairs", 10), (5, "vs-best", 4),
     (10, "all-pairs", 45), (10, "vs-best", 9)],
)
def test_n_comparisons_and_bonferroni_sample_size(n_models, family, k):
    assert inf.n_comparisons(n_models, family) == k
    z = stats.norm.isf(0.05 / (2 * k))
    raw = 2 * 0.25 * (z / 0.03) ** 2
    got = us.sample_size_difference(0.03, n_models=n_models, family=family, round_up=False)
    assert got == pytest.approx(raw, rel=1e-12)


def test_bonferroni_sample_size_models():
    z = stats.norm.isf(0.05 / (2 * 5))
    assert us.sample_size_proportion(0.03, n_models=5, round_up=False) == pytest.approx(
        0.25 * (z / 0.03) ** 2, rel=1e-12)
    assert us.bonferroni_confidence(0.95, 5) == pytest.approx(0.99)


def test_finite_population_correction():
    # Cochran: n = n0 / (1 + (n0 - 1)/M); with M = 2000, n0 = 1067.07 -> 696.0
    m0 = us.sample_size_proportion(0.03, round_up=False)
    m = us.sample_size_proportion(0.03, population=2000, round_up=False)
    assert m == pytest.approx(m0 / (1 + (m0 - 1) / 2000), rel=1e-12)
    # the margin at that m (with fpc) is exactly the requested one
    assert float(us.margin_of_error(m, population=2000)) == pytest.approx(0.03, rel=1e-10)
    # never more users than the population
    assert us.sample_size_proportion(0.001, population=500) <= 500


@given(margin=st.floats(0.002, 0.5), conf=st.floats(0.5, 0.999), p=st.floats(0.01, 0.99),
       diff=st.booleans())
@settings(max_examples=60, deadline=None)
def test_sample_size_is_smallest_meeting_margin(margin, conf, p, diff):
    f = us.sample_size_difference if diff else us.sample_size_proportion
    m = f(margin, conf, p)
    e = lambda mm: float(us.margin_of_error(mm, conf, p, difference=diff))  # noqa: E731
    assert e(m) <= margin * (1 + 1e-9)
    if m > 1:
        assert e(m - 1) > margin * (1 - 1e-9)


# ---------------------------------------------------------------------------
# Hoeffding (TORS24 eq 48)
# ---------------------------------------------------------------------------
def test_hoeffding_paper_statements():
    # TORS24 after eq 48: t = 0.02, m = 10K -> confidence higher than 99.9%
    assert 1 - us.hoeffding_bound(10_000, 0.02) > 0.999
    # TORS24 after eq 17: M = 30K, t = 0.01 -> bound <= 0.005 (2 e^-6 = 0.004958)
    assert us.hoeffding_bound(30_000, 0.01) == pytest.approx(2 * math.exp(-6), rel=1e-12)
    assert us.hoeffding_bound(30_000, 0.01) <= 0.005


@pytest.mark.parametrize(
    "t, delta, kw, m",
    [
        (0.02, 0.001, {}, 9502),  # hand: log(2000)/(2*0.0004) = 9501.1
        (0.03, 0.05, {}, 2050),   # hand: log(40)/(2*0.0009) = 2049.4
        (0.03, 0.05, {"n_tests": 10}, 3329),  # hand: log(400)/0.0018 = 3328.6
        (0.1, 0.05, {"value_range": 2.0}, 738),  # 4 log(40)/0.02 = 737.8
    ],
)
def test_hoeffding_sample_size(t, delta, kw, m):
    k = kw.get("n_tests", 1)
    r = kw.get("value_range", 1.0)
    expected = math.ceil(r ** 2 * math.log(2 * k / delta) / (2 * t ** 2))
    got = us.hoeffding_sample_size(t, delta, **kw)
    assert got == expected == m
    assert us.hoeffding_bound(got, t, value_range=r) <= delta / k * (1 + 1e-12)
    assert us.hoeffding_bound(got - 1, t, value_range=r) > delta / k


def test_hoeffding_bound_capped_and_vectorized():
    b = us.hoeffding_bound(np.array([1, 10, 1000]), 0.01)
    assert b[0] == 1.0 and np.all(np.diff(b) <= 0)


# ---------------------------------------------------------------------------
# confidence intervals vs statsmodels
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("count, nobs", [(300, 1000), (1, 50), (49, 50), (5000, 9604)])
@pytest.mark.parametrize("conf", [0.9, 0.95, 0.99])
def test_proportion_confint_vs_statsmodels(count, nobs, conf):
    lo, hi = inf.proportion_confint(count, nobs, conf)
    slo, shi = sm_proportion_confint(count, nobs, alpha=1 - conf, method="normal")
    assert (lo, hi) == pytest.approx((slo, shi), rel=1e-12, abs=1e-12)


def test_proportion_confint_fpc_and_one_sided():
    lo, hi = inf.proportion_confint(300, 1000, population=2000)
    se = math.sqrt(0.3 * 0.7 / 1000 * (1000 / 1999))
    assert (hi - lo) / 2 == pytest.approx(stats.norm.isf(0.025) * se, rel=1e-12)
    lo1, hi1 = inf.proportion_confint(300, 1000, alternative="less")
    assert lo1 == 0.0 and hi1 == pytest.approx(0.3 + stats.norm.isf(0.05) * math.sqrt(0.21 / 1000))
    # full census: zero width
    lo, hi = inf.proportion_confint(300, 1000, population=1000)
    assert lo == hi == pytest.approx(0.3)


@pytest.mark.parametrize("c1, n1, c2, n2", [(350, 1000, 300, 1000), (10, 200, 30, 150),
                                            (0, 100, 3, 100), (999, 1000, 990, 1200)])
@pytest.mark.parametrize("conf", [0.9, 0.95])
def test_diff_confint_vs_statsmodels(c1, n1, c2, n2, conf):
    # TORS24 eq 51 = statsmodels Wald interval of the difference
    lo, hi = inf.diff_confint(c1, n1, c2, n2, conf)
    slo, shi = confint_proportions_2indep(c1, n1, c2, n2, method="wald", compare="diff",
                                          alpha=1 - conf)
    assert (lo, hi) == pytest.approx((slo, shi), rel=1e-10, abs=1e-12)


# ---------------------------------------------------------------------------
# z-test (eqs 49-50) vs statsmodels and hand values
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("c1, n1, c2, n2", [(300, 1000, 350, 1000), (10, 200, 30, 150),
                                            (1, 100, 3, 100), (500, 1068, 520, 1068)])
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_ztest_vs_statsmodels(c1, n1, c2, n2, alternative):
    res = inf.two_proportion_ztest(c1, n1, c2, n2, alternative=alternative)
    z, p = proportions_ztest([c1, c2], [n1, n2], alternative=SM_ALT[alternative], prop_var=False)
    assert res.statistic == pytest.approx(z, rel=1e-12)
    assert res.pvalue == pytest.approx(p, rel=1e-10)


def test_ztest_eq49_hand_value():
    # eq 49 with m1 = m2 = m: z = (p1 - p2) / sqrt(2 pbar qbar / m)
    m, p1, p2 = 1000, 0.30, 0.35
    pbar = (p1 + p2) / 2
    z = (p1 - p2) / math.sqrt(2 * pbar * (1 - pbar) / m)
    res = inf.two_proportion_ztest(300, 1000, 350, 1000, alternative="less")  # eq 50 H_a
    assert res.statistic == pytest.approx(z, rel=1e-12)
    assert res.pvalue == pytest.approx(stats.norm.cdf(z), rel=1e-12)
    assert res.estimate == pytest.approx(-0.05)
    with pytest.raises(Exception):
        res.statistic = 0.0  # frozen dataclass


def test_ztest_result_confidence_interval():
    res = inf.two_proportion_ztest(350, 1000, 300, 1000)
    assert res.confidence_interval(0.9) == pytest.approx(inf.diff_confint(350, 1000, 300, 1000, 0.9))
    lo, hi = inf.two_proportion_ztest(350, 1000, 300, 1000, alternative="greater").confidence_interval()
    assert hi == np.inf and lo == pytest.approx(inf.diff_confint(350, 1000, 300, 1000, 0.90)[0])


@given(c1=st.integers(0, 200), c2=st.integers(0, 200), n1=st.integers(200, 400),
       n2=st.integers(200, 400))
@settings(max_examples=60, deadline=None)
def test_ztest_properties(c1, c2, n1, n2):
    a = inf.two_proportion_ztest(c1, n1, c2, n2)
    b = inf.two_proportion_ztest(c2, n2, c1, n1)
    assert a.statistic == pytest.approx(-b.statistic, abs=1e-12)
    assert a.pvalue == pytest.approx(b.pvalue, abs=1e-12)
    less = inf.two_proportion_ztest(c1, n1, c2, n2, alternative="less").pvalue
    greater = inf.two_proportion_ztest(c1, n1, c2, n2, alternative="greater").pvalue
    if a.statistic != 0.0 or 0 < c1 + c2 < n1 + n2:
        assert less + greater == pytest.approx(1.0, abs=1e-12)
        assert a.pvalue == pytest.approx(2 * min(less, greater), abs=1e-12)
    lo, hi = a.confidence_interval()
    assert lo <= a.estimate <= hi


def test_ztest_degenerate():
    res = inf.two_proportion_ztest(0, 100, 0, 80)
    assert res.statistic == 0.0 and res.pvalue == 1.0
    res = inf.two_proportion_ztest(100, 100, 80, 80, alternative="less")
    assert res.statistic == 0.0


# ---------------------------------------------------------------------------
# t-tests vs scipy
# ---------------------------------------------------------------------------
@pytest.fixture
def ap_values():
    rng = np.random.default_rng(7)
    R1 = rng.integers(1, 60, size=400)
    R2 = np.maximum(1, R1 + rng.integers(-5, 8, size=400))
    return 1.0 / R1 * (R1 <= 20), 1.0 / R2 * (R2 <= 20)


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_ttest_paired_vs_scipy(ap_values, alternative):
    x, y = ap_values
    res = inf.ttest_paired(x, y, alternative=alternative)
    ref = stats.ttest_rel(x, y, alternative=alternative)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    assert res.confidence_interval(0.9) == pytest.approx(tuple(ref.confidence_interval(0.9)), rel=1e-10)
    d = x - y
    assert res.statistic == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(d.size)), rel=1e-12)


@pytest.mark.parametrize("equal_var", [True, False])
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_ttest_unpaired_vs_scipy(ap_values, equal_var, alternative):
    x, y = ap_values
    y = y[:300]
    res = inf.ttest_unpaired(x, y, equal_var=equal_var, alternative=alternative)
    ref = stats.ttest_ind(x, y, equal_var=equal_var, alternative=alternative)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    assert res.df == pytest.approx(ref.df, rel=1e-12)
    assert res.confidence_interval() == pytest.approx(tuple(ref.confidence_interval()), rel=1e-10)


# ---------------------------------------------------------------------------
# power vs statsmodels
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("p1, p2, m", [(0.30, 0.35, 1000), (0.5, 0.45, 500), (0.05, 0.08, 3000),
                                       (0.2, 0.2, 100)])
@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_ztest_power_vs_statsmodels(p1, p2, m, alternative):
    ref = power_proportions_2indep(p1 - p2, p2, m, alpha=0.05, alternative=SM_ALT[alternative],
                                   return_results=False)
    assert float(us.ztest_power(p1, p2, m, 0.05, alternative=alternative)) == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("diff, power, alpha, p, alternative",
                         [(0.05, 0.8, 0.05, 0.5, "two-sided"), (0.03, 0.9, 0.05, 0.5, "two-sided"),
                          (0.02, 0.8, 0.01, 0.3, "greater"), (0.1, 0.5, 0.05, 0.2, "two-sided")])
def test_sample_size_power_vs_normalindpower(diff, power, alpha, p, alternative):
    es = diff / math.sqrt(p * (1 - p))
    alt = {"two-sided": "two-sided", "greater": "larger"}[alternative]
    ref = NormalIndPower().solve_power(effect_size=es, alpha=alpha, power=power, ratio=1,
                                       alternative=alt)
    m = us.sample_size_power(diff, power, alpha, p, alternative=alternative)
    assert m == math.ceil(ref - 1e-6)
    # the smallest integer reaching the power (NormalIndPower.power is exact normal power)
    pw = NormalIndPower().power(es, m, alpha, ratio=1, alternative=alt)
    assert pw >= power - 1e-12
    assert NormalIndPower().power(es, m - 1, alpha, ratio=1, alternative=alt) < power


def test_sample_size_power_one_tail_statsmodels():
    # statsmodels one-tail approximation with prop2 = 0.5, diff = 0.05
    ref = samplesize_proportions_2indep_onetail(0.05, 0.5, 0.8, alpha=0.05, alternative="two-sided")
    # ref uses unpooled variances (0.55*0.45 + 0.25) vs our 2 * 0.25: within 1%
    assert us.sample_size_power(0.05) == pytest.approx(ref, rel=0.01)


# ---------------------------------------------------------------------------
# multiple comparisons
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["bonferroni", "holm"])
def test_adjust_pvalues_vs_statsmodels(method):
    pv = np.array([0.001, 0.01, 0.02, 0.04, 0.3])
    rej, padj = inf.adjust_pvalues(pv, method, 0.05)
    srej, spadj, _, _ = multipletests(pv, 0.05, method)
    assert np.array_equal(rej, srej) and np.allclose(padj, spadj)


def test_adjust_pvalues_hand():
    pv = np.array([0.01, 0.02, 0.04])
    # Bonferroni: p * 3 = [0.03, 0.06, 0.12]
    rej, padj = inf.adjust_pvalues(pv, "bonferroni")
    assert rej.tolist() == [True, False, False] and padj == pytest.approx([0.03, 0.06, 0.12])
    # Holm: 0.01 <= 0.05/3, 0.02 <= 0.05/2, 0.04 <= 0.05
    rej, padj = inf.adjust_pvalues(pv, "holm")
    assert rej.tolist() == [True, True, True] and padj == pytest.approx([0.03, 0.04, 0.04])
    rej, padj = inf.adjust_pvalues(pv, "none")
    assert rej.all() and np.array_equal(padj, pv)



@pytest.mark.parametrize("adjust", ["bonferroni", "holm"])
def test_adjust_pvalues_rows_vs_statsmodels(adjust, monkeypatch):
    """2-D input: every row is its own family, as multipletests on that row (ties included)."""
    import gc

    # multipletests(method="holm") calls gc.collect() on every call: over a full test session's heap that
    # took minutes for these 201 calls; collecting changes no result, so it is skipped here
    monkeypatch.setattr(gc, "collect", lambda generation=2: 0)
    rng = np.random.default_rng(0)
    pv = np.concatenate([rng.random((200, 6)) ** 3, np.full((1, 6), 0.01)])
    rej, padj = inf.adjust_pvalues(pv, adjust, 0.05)
    for i in range(pv.shape[0]):
        srej, spadj, _, _ = multipletests(pv[i], 0.05, adjust)
        assert np.array_equal(rej[i], srej) and np.allclose(padj[i], spadj, rtol=1e-12)


def test_decide_and_pvalue_from_z():
    d = inf.decide([0.001, np.nan, 0.2], [0.3, 0.0, -0.1], ["A", "A", "B"], ["B", "C", "C"],
                  adjust="holm", alpha=0.05)
    assert d["decision"] == ["A > B", "no significant difference", "no significant difference"]
    assert d["reject"].tolist() == [True, False, False]
    assert d["pvalue_adjusted"][1] == 1.0                      # NaN (no variation) counts as p = 1
    d = inf.decide([0.001], [-0.3], ["A"], ["B"], adjust="none")
    assert d["decision"] == ["A < B"]
    with pytest.raises(ValueError, match="same length"):
        inf.decide([0.1, 0.2], [0.0], ["A"], ["B"])
    z = np.array([-2.5, 0.0, 1.3])
    assert inf.pvalue_from_z(z) == pytest.approx(2 * stats.norm.sf(np.abs(z)), rel=1e-14)
    assert inf.pvalue_from_z(z, "less") == pytest.approx(stats.norm.cdf(z), rel=1e-14)
    assert inf.pvalue_from_z(z, "greater") == pytest.approx(stats.norm.sf(z), rel=1e-14)
    with pytest.raises(ValueError, match="alternative"):
        inf.pvalue_from_z(z, "both")


def _three_models(m=800, seed=3):
    rng = np.random.default_rng(seed)
    R = rng.integers(1, 40, size=m)
    return pd.DataFrame({
        "A": us_metric(R, 0),
        "B": us_metric(np.maximum(1, R - rng.integers(0, 6, size=m)), 0),
        "C": us_metric(R + rng.integers(-1, 2, size=m).clip(0), 0),
    })


def us_metric(R, _):
    return np.where(R <= 20, 1.0 / np.log2(R + 1.0), 0.0)  # NDCG@20


def test_compare_models_all_pairs_paired():
    df = _three_models()
    out = inf.compare_models(df, alpha=0.05)
    assert set(out["adjust"]) == {"bonferroni", "holm"}
    assert len(out) == 6 and (out["n_comparisons"] == 3).all()
    bon = out[out.adjust == "bonferroni"].reset_index(drop=True)
    pairs = [("A", "B"), ("A", "C"), ("B", "C")]
    assert list(zip(bon.model_a, bon.model_b)) == pairs
    for row, (a, b) in zip(bon.itertuples(), pairs):
        ref = stats.ttest_rel(df[a], df[b])
        assert row.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
        assert row.pvalue_adjusted == pytest.approx(min(1, 3 * ref.pvalue), rel=1e-10)
        assert row.reject == (3 * ref.pvalue <= 0.05)
        lo, hi = ref.confidence_interval(1 - 0.05 / 3)
        assert (row.ci_low, row.ci_high) == pytest.approx((lo, hi), rel=1e-10)
        assert row.mean_a - row.mean_b == pytest.approx(row.difference)
    holm = out[out.adjust == "holm"]
    _, sp, _, _ = multipletests(bon.pvalue, 0.05, "holm")
    assert np.allclose(holm.pvalue_adjusted, sp)
    # Holm rejects at least what Bonferroni rejects
    assert (holm.reject.to_numpy() >= bon.reject.to_numpy()).all()
    # B has higher NDCG (ranks shifted up) -> A < B decided
    ab = bon.iloc[0]
    assert ab.reject and ab.decision == "A < B"


def test_compare_models_vs_best_and_unpaired_dict():
    df = _three_models()
    vals = {k: df[k].to_numpy()[: 700 + 50 * i] for i, k in enumerate(df)}
    out = inf.compare_models(vals, paired=False, family="vs-best", adjust="holm")
    # data-selected best (B): its 2 comparisons are adjusted within all 3 pairs
    assert len(out) == 2 and (out.model_a == "B").all() and (out.n_comparisons == 3).all()
    allp = inf.compare_models(vals, paired=False, adjust="holm")
    for row in out.itertuples():
        ref = stats.ttest_ind(vals[row.model_a], vals[row.model_b], equal_var=False)
        assert row.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
        same = allp[allp.pvalue == row.pvalue]
        assert row.pvalue_adjusted == pytest.approx(same.pvalue_adjusted.iloc[0], rel=1e-12)
    # reference fixed in advance: n - 1 = 2 comparisons
    fx = inf.compare_models(vals, paired=False, family="vs-best", reference="A",
                           adjust="bonferroni")
    assert (fx.model_a == "A").all() and (fx.n_comparisons == 2).all()
    assert np.allclose(fx.pvalue_adjusted, np.minimum(1, 2 * fx.pvalue))
    with pytest.raises(ValueError, match="reference must be one of"):
        inf.compare_models(vals, paired=False, family="vs-best", reference="Z")
    with pytest.raises(ValueError, match="only used with"):
        inf.compare_models(vals, paired=False, reference="A")


def test_compare_models_ztest_recall():
    rng = np.random.default_rng(11)
    vals = {"A": (rng.random(1000) < 0.30).astype(float),
            "B": (rng.random(1200) < 0.36).astype(float)}
    out = inf.compare_models(vals, paired=False, test="z", adjust="none", alternative="less")
    r = inf.two_proportion_ztest(int(vals["A"].sum()), 1000, int(vals["B"].sum()), 1200,
                                alternative="less")
    assert out.pvalue.iloc[0] == pytest.approx(r.pvalue, rel=1e-12)
    assert out.ci_low.iloc[0] == -np.inf
    assert out.ci_high.iloc[0] == pytest.approx(r.confidence_interval(0.95)[1], rel=1e-12)


def test_compare_models_identical_models():
    # zero-variance differences: scipy gives NaN, treated as no evidence (p_adj = 1)
    x = np.linspace(0, 1, 50)
    out = inf.compare_models({"a": x, "b": x.copy()}, adjust=("none", "holm"))
    assert not out.reject.any() and (out.pvalue_adjusted == 1.0).all()
    assert (out.decision == "no significant difference").all()


def test_compare_models_validation():
    df = _three_models()
    with pytest.raises(ValueError, match="same users"):
        inf.compare_models({"a": np.ones(5), "b": np.ones(6)}, paired=True)
    with pytest.raises(ValueError, match="at least 2 models"):
        inf.compare_models({"a": np.ones(5)})
    with pytest.raises(ValueError, match="adjust"):
        inf.compare_models(df, adjust="fdr")
    with pytest.raises(ValueError, match="family"):
        inf.compare_models(df, family="best")
    with pytest.raises(ValueError, match="0/1"):
        inf.compare_models(df, paired=False, test="z")
    with pytest.raises(ValueError, match="independent"):
        inf.compare_models(df, test="z")
    with pytest.raises(TypeError):
        inf.compare_models([[1, 2], [3, 4]])


# ---------------------------------------------------------------------------
# simulation helpers
# ---------------------------------------------------------------------------
def test_sample_users():
    idx = us.sample_users(100, 30, rng=1)
    assert idx.size == 30 and np.unique(idx).size == 30 and idx.min() >= 0 and idx.max() < 100
    assert np.array_equal(idx, us.sample_users(100, 30, rng=1))
    with pytest.raises(ValueError, match="m must lie in 1..M=10; got m=11"):
        us.sample_users(10, 11)


def test_user_sampled_metric_full_population_equals_truth():
    rng = np.random.default_rng(0)
    R = rng.integers(1, 200, size=500)
    Ks = [1, 5, 10, 50]
    for metric in ["recall", "ndcg", "ap"]:
        est = us.user_sampled_metric(R, 500, metric, Ks, repeats=2, rng=1)
        truth = [metric_from_ranks(R, metric, K) for K in Ks]
        assert est.shape == (2, 4)
        assert np.allclose(est, truth, rtol=1e-12)
    with pytest.raises(ValueError, match="m must lie in 1..M=500"):
        us.user_sampled_metric(R, 501, "recall", Ks)


def test_user_sampled_metric_unbiased():
    # mean over repeats within 5 standard errors of the population value
    rng = np.random.default_rng(2)
    R = rng.geometric(0.05, size=5000)
    est = us.user_sampled_metric(R, 200, "recall", [10], repeats=2000, rng=3)[:, 0]
    truth = np.mean(R <= 10)
    assert abs(est.mean() - truth) < 5 * est.std(ddof=1) / math.sqrt(est.size)


def test_expected_abs_error_proportion():
    # hand: M=4, 2 successes, m=2: Q in {0,1,2} w.p. 1/6, 4/6, 1/6; |Q/2 - 1/2| -> 1/6
    assert us.expected_abs_error_proportion(4, 2, 2) == pytest.approx(1 / 6)
    # full census: no error
    assert us.expected_abs_error_proportion(50, [0, 10, 50], 50) == pytest.approx([0, 0, 0])
    # large M: approx normal sqrt(2/pi) sd with fpc
    M, S, m = 100_000, 30_000, 1000
    sd = math.sqrt(0.3 * 0.7 / m * (M - m) / (M - 1))
    assert us.expected_abs_error_proportion(M, S, m) == pytest.approx(math.sqrt(2 / math.pi) * sd, rel=0.01)


@pytest.mark.parametrize("M, s, m", [(100_000, 11_340, 1000), (50, 10, 50), (20, 0, 5),
                                     (20, 20, 5), (1000, 700, 400)])
def test_hypergeom_pmf_vs_scipy(M, s, m):
    q, p = us._hypergeom_pmf(M, s, m)
    assert np.allclose(p, stats.hypergeom.pmf(q, M, s, m), rtol=1e-8, atol=1e-14)
    assert p.sum() == pytest.approx(1.0, abs=1e-8)


def test_exact_coverage_vs_simulation_and_nominal():
    M, S = 50_000, 8000
    for m in (500, 1068):
        ex = us.exact_proportion_coverage(M, S, m, margin=0.03)
        mc = studies.simulate_proportion_coverage(M, S, m, 4000, margin=0.03, rng=m)
        se = math.sqrt(ex["coverage"] * (1 - ex["coverage"]) / 4000)
        assert abs(mc["coverage"] - ex["coverage"]) < 4 * se
        se = math.sqrt(ex["margin_prob"] * (1 - ex["margin_prob"]) / 4000)
        assert abs(mc["margin_met"] - ex["margin_prob"]) < 4 * se + 1e-12
        assert abs(ex["coverage"] - 0.95) < 0.01  # Wald is close to nominal here
    # eq 47: the conservative m = 1068 meets a 3% margin with probability >= 95%
    for S in (1000, 25_000, 40_000):
        assert us.exact_proportion_coverage(M, S, 1068, margin=0.03)["margin_prob"] >= 0.95
    # census: always covered
    assert us.exact_proportion_coverage(100, 30, 100)["coverage"] == pytest.approx(1.0)


def test_predicted_relative_error_vs_simulation():
    rng = np.random.default_rng(4)
    R = rng.geometric(0.02, size=20_000)
    Ks = [1, 5, 20]
    for metric in ("recall", "ndcg"):
        pred = us.predicted_relative_error(R, 500, metric, Ks)
        est = us.user_sampled_metric(R, 500, metric, Ks, repeats=3000, rng=5)
        truth = np.array([metric_from_ranks(R, metric, K) for K in Ks])
        rel = np.abs(est - truth) / truth
        se = rel.std(axis=0, ddof=1) / math.sqrt(rel.shape[0])
        slack = 0 if metric == "recall" else 0.02 * pred  # normal approximation for NDCG
        assert np.all(np.abs(rel.mean(axis=0) - pred) < 4 * se + slack)
    with pytest.raises(ValueError, match="m must lie"):
        us.predicted_relative_error(R, 20_001, "recall", Ks)


def test_relative_error_with_replacement():
    # users drawn i.i.d.: Binomial(m, p) exact for recall, no finite-population factor
    rng = np.random.default_rng(8)
    R = rng.geometric(0.05, size=3000)
    Ks = [2, 10]
    pred = us.predicted_relative_error(R, 2000, "recall", Ks, scheme="binomial")
    pred_wor = us.predicted_relative_error(R, 2000, "recall", Ks)
    assert np.all(pred > 1.5 * pred_wor)  # fpc sqrt(1000/2999) ~ 0.58
    est = us.user_sampled_metric(R, 2000, "recall", Ks, repeats=3000, scheme="binomial", rng=9)
    truth = np.array([metric_from_ranks(R, "recall", K) for K in Ks])
    rel = np.abs(est - truth) / truth
    se = rel.std(axis=0, ddof=1) / math.sqrt(rel.shape[0])
    assert np.all(np.abs(rel.mean(axis=0) - pred) < 4 * se)
    # hand: M=4, 2 successes, m=2 with replacement: Q ~ Bin(2, 1/2) -> E|Q/2 - 1/2| = 1/4
    assert us.expected_abs_error_proportion(4, 2, 2, scheme="binomial") == pytest.approx(0.25)
    assert us.user_sampled_metric(R, 5000, "recall", Ks, scheme="binomial", rng=1).shape == (1, 2)


def test_simulate_difference_coverage():
    # eq 52: m = 2135 per model meets a 3% margin of p1 - p2 with prob >= 95%
    out = studies.simulate_difference_coverage(100_000, 30_000, 35_000, 2135, 4000, margin=0.03, rng=6)
    assert abs(out["coverage"] - 0.95) < 4 * out["coverage_se"]
    assert out["margin_met"] >= 0.95 - 4 * out["coverage_se"]
    assert out["mean_halfwidth"] < 0.03
    with pytest.raises(ValueError, match="m must lie in 1..M=10"):
        studies.simulate_difference_coverage(10, 2, 3, 11, 5)
    # m close to M: the finite-population correction keeps coverage nominal
    out = studies.simulate_difference_coverage(2000, 600, 700, 1500, 4000, rng=7)
    assert abs(out["coverage"] - 0.95) < 4 * out["coverage_se"]
    out = studies.simulate_difference_coverage(2000, 600, 700, 1500, 4000, fpc=False, rng=7)
    assert out["coverage"] > 0.99


def test_diff_confint_fpc():
    lo, hi = inf.diff_confint(350, 1000, 240, 800, population=5000)
    se = math.sqrt(0.35 * 0.65 / 1000 * 4000 / 4999 + 0.3 * 0.7 / 800 * 4200 / 4999)
    assert (hi - lo) / 2 == pytest.approx(stats.norm.isf(0.025) * se, rel=1e-12)
    with pytest.raises(ValueError, match="population"):
        inf.diff_confint(3, 10, 3, 10, population=5)


@pytest.mark.parametrize("margin", [0.01, 0.03, 0.05])
@pytest.mark.parametrize("p", [0.1, 0.5])
@pytest.mark.parametrize("conf", [0.9, 0.95])
def test_sample_size_proportion_vs_statsmodels(margin, p, conf):
    from statsmodels.stats.proportion import samplesize_confint_proportion
    ref = samplesize_confint_proportion(p, margin, alpha=1 - conf, method="normal")
    assert us.sample_size_proportion(margin, conf, p, round_up=False) == pytest.approx(ref, rel=1e-12)


def test_simulate_proportion_coverage():
    out = studies.simulate_proportion_coverage(20_000, 6000, 1068, 4000, margin=0.03, rng=5)
    assert abs(out["coverage"] - 0.95) < 4 * out["coverage_se"]
    assert out["margin_met"] >= 0.95 - 4 * out["coverage_se"]
    assert out["mean_halfwidth"] < 0.03


def test_simulate_familywise_error_and_rejections():
    fw = studies.simulate_familywise_error([0.3] * 5, 1000, 4000, 0.05, rng=2).set_index("adjust")
    assert fw.loc["none", "fwer"] > 0.15  # about 0.28 for 10 correlated tests
    assert fw.loc["bonferroni", "fwer"] <= 0.05 + 4 * fw.loc["bonferroni", "se"]
    # under the complete null, Holm rejects anything iff Bonferroni does
    assert fw.loc["holm", "fwer"] == fw.loc["bonferroni", "fwer"]
    # best picked from the data, naive n-1 Bonferroni: does NOT control the FWER
    fb = studies.simulate_familywise_error([0.3] * 5, 1000, 4000, family="vs-best", rng=2)
    fb = fb.set_index("adjust")
    assert (fb.n_comparisons == 4).all()
    assert fb.loc["bonferroni", "fwer"] > 0.05 + 4 * fb.loc["bonferroni", "se"]
    # reference fixed in advance: n-1 Bonferroni controls it
    fr = studies.simulate_familywise_error([0.3] * 5, 1000, 4000, family="vs-best", reference=0,
                                      rng=2).set_index("adjust")
    assert fr.loc["bonferroni", "fwer"] <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / 4000)
    rate = studies.simulate_ztest_rejections(0.30, 0.35, 1000, 4000, rng=4)
    pw = float(us.ztest_power(0.30, 0.35, 1000))
    assert abs(rate - pw) < 4 * math.sqrt(pw * (1 - pw) / 4000) + 0.01


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan")])
def test_margin_validation(bad):
    with pytest.raises(ValueError, match="margin"):
        us.sample_size_proportion(bad)
    with pytest.raises(ValueError, match="margin"):
        us.sample_size_difference(bad)


@pytest.mark.parametrize("bad", [0, 1, -0.5, 1.2])
def test_confidence_validation(bad):
    with pytest.raises(ValueError, match="confidence"):
        us.sample_size_proportion(0.03, bad)
    with pytest.raises(ValueError, match="confidence"):
        inf.proportion_confint(3, 10, bad)
    with pytest.raises(ValueError, match="confidence"):
        inf.z_critical(bad)


def test_other_validation():
    with pytest.raises(ValueError, match="p must lie"):
        us.sample_size_proportion(0.03, p=1.2)
    with pytest.raises(ValueError, match="n_models"):
        us.sample_size_difference(0.03, n_models=1)
    with pytest.raises(ValueError, match="family"):
        inf.n_comparisons(5, "pairs")
    with pytest.raises(ValueError, match="alternative"):
        inf.two_proportion_ztest(3, 10, 4, 10, alternative="smaller")
    with pytest.raises(ValueError, match="count1 must lie in 0..nobs1"):
        inf.two_proportion_ztest(11, 10, 4, 10)
    with pytest.raises(ValueError, match="whole numbers"):
        inf.two_proportion_ztest(3.5, 10, 4, 10)
    with pytest.raises(ValueError, match="nobs"):
        inf.proportion_confint(0, 0)
    with pytest.raises(ValueError, match="population"):
        inf.proportion_confint(10, 100, population=50)
    with pytest.raises(ValueError, match="m must be <= population"):
        us.margin_of_error(100, population=50)
    with pytest.raises(ValueError, match="t must be > 0"):
        us.hoeffding_bound(100, 0.0)
    with pytest.raises(ValueError, match="delta"):
        us.hoeffding_sample_size(0.02, 1.0)
    with pytest.raises(ValueError, match="same length"):
        inf.ttest_paired([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2"):
        inf.ttest_unpaired([1.0], [1, 2])
    with pytest.raises(ValueError, match="m must lie in 1..M=5"):
        studies.simulate_proportion_coverage(5, 2, 6, 10)
    with pytest.raises(ValueError, match="m must lie in 1..M=5"):
        us.expected_abs_error_proportion(5, 2, 6)
    with pytest.raises(TypeError):
        us.hoeffding_sample_size(0.02, 0.05, n_tests=1.5)
