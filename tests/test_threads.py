"""One BLAS thread in estimate, compare and the CLI, unless the user set a thread count (issue 27 item 1).

The test processes themselves run with OPENBLAS_NUM_THREADS=1 (conftest), so the
pin is observed in a fresh interpreter whose environment has no thread variable:
BLAS then starts with one thread per core, and inside ``estimate``/``compare``
(spying on their fit) and inside the CLI (spying on its loader) it must run one.
With ``OPENBLAS_NUM_THREADS`` set, the user's value must be left alone. The
speed that this buys on a loaded machine is measured in benchmarks/bench_threads.py.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from sampling_lib._threads import USER_THREAD_VARIABLES, user_thread_setting

SPY = r"""
import json, sys
import numpy as np
from threadpoolctl import threadpool_info
import sampling_lib.cli as cli
import sampling_lib.cli._estimate as cli_estimate
import sampling_lib.correct as C
import sampling_lib._estimate_rows as ER

def blas_threads():
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

seen = {"estimate": [], "compare": [], "cli": []}
fit, load = ER._fit, cli_estimate.load_ranks
where = ["estimate"]
def spy_fit(*a, **k):
    seen[where[0]].append(blas_threads())
    return fit(*a, **k)
def spy_load(*a, **k):
    seen["cli"].append(blas_threads())
    return load(*a, **k)
ER._fit, C._fit, cli_estimate.load_ranks = spy_fit, spy_fit, spy_load
before = blas_threads()
r = np.arange(1, 21).repeat(5)
C.estimate(r, 200, 20, n_boot=0)
where[0] = "compare"
C.compare({"a": r, "b": r[::-1]}, 200, 20, n_boot=2)
where[0] = "estimate"
path = sys.argv[1]
with open(path, "w") as fh:
    fh.write("user,rank\n" + "".join(f"{u},{x}\n" for u, x in enumerate(r)))
rc = cli.main(["estimate", path, "-N", "200", "-n", "20", "--n-boot", "0", "--output", path + ".out"])
print(json.dumps({"before": before, "after": blas_threads(), "seen": seen, "rc": rc}))
"""


def _spy(tmp_path, **env_vars):
    env = {k: v for k, v in os.environ.items() if k not in USER_THREAD_VARIABLES}
    env.update(env_vars, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", SPY, str(tmp_path / "ranks.csv")], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_blas_is_pinned_to_one_thread_inside_estimate_compare_and_the_cli(tmp_path):
    got = _spy(tmp_path)
    if got["before"] < 2:
        pytest.skip(f"BLAS starts with {got['before']} thread here: nothing to pin")
    assert got["rc"] == 0
    assert got["seen"]["estimate"] and set(got["seen"]["estimate"]) == {1}, got      # library call and CLI
    assert got["seen"]["compare"] and set(got["seen"]["compare"]) == {1}, got
    assert got["seen"]["cli"] == [1], got                                              # the CLI's own reading
    assert got["after"] == got["before"], got                  # restored when the call returns


# slow (3 s, a subprocess): test_blas_is_pinned_to_one_thread_inside_estimate_compare_and_the_cli keeps the
# same spy on the default; test_user_thread_setting_reads_every_variable the rule
@pytest.mark.slow
def test_the_users_thread_setting_wins(tmp_path):
    got = _spy(tmp_path, OPENBLAS_NUM_THREADS="2")
    assert got["before"] == 2, got
    assert set(got["seen"]["estimate"]) == set(got["seen"]["compare"]) == set(got["seen"]["cli"]) == {2}, got


def test_user_thread_setting_reads_every_variable():
    for name in USER_THREAD_VARIABLES:
        assert user_thread_setting({name: "3"}) == f"{name}=3"
    assert user_thread_setting({"OPENBLAS_NUM_THREADS": " "}) is None       # empty: not a setting
    assert user_thread_setting({"PATH": "/bin"}) is None
