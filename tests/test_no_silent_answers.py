"""Issue 16, "Silently wrong or lossy answers" and "Memory must stay bounded".

Each test is one probe of the issue: it failed (or passed silently with a wrong
answer) before the change.
"""
import time

import numpy as np
import pandas as pd
import pytest

from sampling_lib import metrics
from sampling_lib.correct import compare, estimate
from sampling_lib.estimators import METHODS, get_estimator
from sampling_lib.exceptions import EstimatorOptionError, MemoryLimitError
from sampling_lib.kernels import kernel
from sampling_lib.metrics import metric_matrix

R10 = np.array([1, 2, 3, 5, 8, 1, 2, 9, 4, 1])


# --- unknown options raise on every path ------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_unknown_option_raises_on_every_method_and_path(method):
    with pytest.raises(EstimatorOptionError, match="gama"):
        estimate(R10, 200, 10, method=method, options={"gama": 0.5}, n_boot=0)
    with pytest.raises(EstimatorOptionError, match="gama"):
        compare({"A": R10, "B": R10[::-1]}, 200, 10, method=method, options={"gama": 0.5},
                n_boot=2)
    with pytest.raises(EstimatorOptionError, match="gama"):
        get_estimator(method, gama=0.5)


# --- compare: names that collide after str() --------------------------------
def test_compare_rejects_names_colliding_as_text():
    a, b, c = R10, R10[::-1], np.minimum(R10 + 1, 10)
    with pytest.raises(ValueError, match="distinct as text"):
        compare({1: a, "1": b, "C": c}, 200, 10, n_boot=10)
    with pytest.raises(ValueError, match="distinct as text"):
        compare(pd.DataFrame({1: a, "1": b}), 200, 10, n_boot=10)


# --- estimates outside the metric's range are clipped and flagged ------------
def test_bv_out_of_range_is_clipped_and_flagged():
    raw = get_estimator("bv")([1], 200, 10) @ metric_matrix(["recall@10"], 200)
    assert raw[0] > 1.1                                     # the 1.134
    t = estimate([1], 200, 10, method="bv", n_boot=0)
    row = t.set_index("metric").loc["recall@10"]
    assert row.estimate == 1.0 and bool(row.clipped)
    assert not bool(t.set_index("metric").loc["ndcg@10"].clipped)
    t = estimate([1, 1, 2], 200, 10, method="bv", n_boot=50, rng=0)
    assert (t[["estimate", "ci_low", "ci_high"]].to_numpy() <= 1.0).all()


def test_mle_is_never_flagged():
    t = estimate(R10, 200, 10, metrics=["recall@1", "recall@50", "ndcg@10"], n_boot=20, rng=0)
    assert not t.clipped.any()


def test_compare_warns_about_out_of_range_estimates():
    with pytest.warns(RuntimeWarning, match="outside the metric's range"):
        compare({"A": [1, 1, 1], "B": [1, 1, 2]}, 200, 10, method="bv", n_boot=10, rng=0)


# --- metric functions reject fractional ranks --------------------------------
@pytest.mark.parametrize("name", sorted(metrics.METRICS))
def test_metric_functions_reject_fractional_ranks(name):
    with pytest.raises(ValueError, match=r"R must hold ranks >= 1 \(whole numbers.*got 2.5"):
        metrics.METRICS[name]([2.5], 5)
    assert metrics.METRICS[name]([2.0], 5).shape == (1,)    # whole floats stay accepted


def test_estimate_metrics_none_is_a_clear_error():
    with pytest.raises(TypeError, match="metrics must be a metric name .* got None"):
        estimate(R10, 200, 10, metrics=None)


# --- memory: refuse up front, naming the size --------------------------------
def test_huge_N_is_refused_up_front_with_its_size():
    # the default needs no length-N array (issue 18, tests/test_scale.py); mle's exact kernel does
    with pytest.raises(MemoryLimitError, match=r"N=1000000000.*\) would need [0-9.]+ GiB"):
        estimate([1, 2, 3], 10**9, 10, n_boot=0, method="mle")
    with pytest.raises(MemoryError):                         # also a MemoryError ...
        estimate([1, 2, 3], 10**9, 10, n_boot=0, method="mle")
    with pytest.raises(ValueError):                          # ... and a ValueError
        estimate([1, 2, 3], 10**9, 10, n_boot=0, method="mle")
    for method in ("bv", "mn", "cls", "mes"):
        with pytest.raises(MemoryLimitError, match="GiB"):
            estimate([1, 2, 3], 10**9, 10, n_boot=0, method=method)



def test_mle_at_ten_million_items_refuses_or_stays_under_the_limit():
    # the probe: estimate(method="mle") at N = 10^7 peaked at 2.7 GB. Either answer is acceptable
    # (a clear refusal naming the size, or a result); what is not is a peak above the per-array limit.
    import tracemalloc

    r = np.random.default_rng(0).integers(1, 101, 300)
    tracemalloc.start()
    try:
        estimate(r, 10**7, 100, ["recall@10"], method="mle", n_boot=0)
    except MemoryLimitError as exc:
        assert "N=10000000" in str(exc) and "GiB" in str(exc), str(exc)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 2 * 2**30, f"peak {peak / 2**30:.2f} GiB"

def test_dense_kernel_over_the_limit_is_refused():
    with pytest.raises(MemoryLimitError, match=r"N x n sampling kernel .* 7.45 GiB"):
        kernel(10**7, 100)
    with pytest.raises(MemoryLimitError, match="kernel"):
        get_estimator("bv")([1, 2], 10**7, 100)


def test_memory_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", "4000")
    with pytest.raises(MemoryLimitError, match="limit of 0.00 GiB"):
        metrics.metric_values("recall@3", 1000)             # 8000 bytes
    monkeypatch.setenv("SAMPLING_LIB_MAX_ARRAY_BYTES", "many")
    with pytest.raises(ValueError, match="SAMPLING_LIB_MAX_ARRAY_BYTES"):
        metrics.metric_values("recall@3", 1000)
    monkeypatch.delenv("SAMPLING_LIB_MAX_ARRAY_BYTES")
    assert metrics.metric_values("recall@3", 1000).size == 1000
