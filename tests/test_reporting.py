"""The report runner and the claims ledger.

Runner safety (issue 16): the output folder is replaced only on success and
never goes missing, a user's ``<out>.old`` survives, the folder keeps normal
permissions, two runners into one folder are locked out, ``--only`` keeps the
run mode of merged claims. Signals are tested in test_runner_signals.py.
"""
import fcntl
import os
import shutil
import stat
import sys

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from sampling_lib import reporting
from sampling_lib.reporting import ClaimLedger, ClaimsFailed, ReportsLocked, run_notebooks
from sampling_lib.reporting.folders import write_marker

# how a kernel's command line reads: the runner's own launcher, or ipykernel's
KERNEL_MODULES = ("sampling_lib.reporting.kernel", "ipykernel")


def _nb(path, passes, observation_holds=False):
    cells = [
        new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
        new_code_cell(
            "from sampling_lib.reporting import ClaimLedger\n"
            f"ledger = ClaimLedger({path.stem!r})\n"
            "ledger.check_close('c1', 'KDD20 eq 4', 'one equals one', measured=x, expected=1, atol=0)\n"
            f"ledger.check_true('c2', 'sampling-lab', 'decided', passed={passes})\n"
            f"ledger.observe('o1', 'TORS24 Table 4', 'a statement about this dataset', holds={observation_holds})\n"
            "ledger.finalize()"
        ),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["sampling_lab"] = {"smoke_parameters": {"x": 1}}
    nbformat.write(nb, str(path))


@pytest.mark.notebooks
def _kernels_left(before=()):
    """Kernel processes running below this test process (a killed kernel must also be reaped), other than the
    pids ``before`` (the test process's own kernels from before the run: in the slow tier, the notebooks'
    shared kernel of ``conftest.notebook_kernel`` lives in the same process)."""
    psutil = pytest.importorskip("psutil")
    left = []
    for p in psutil.Process().children(recursive=True):
        if p.pid in before:
            continue
        try:
            if any(k in part for part in p.cmdline() for k in KERNEL_MODULES) or p.status() == psutil.STATUS_ZOMBIE:
                left.append((p.pid, p.status()))
        except psutil.NoSuchProcess:
            pass
        except psutil.ZombieProcess:
            left.append((p.pid, "zombie"))
    return left


@pytest.mark.slow
def test_runner_replaces_reports_only_on_success(tmp_path):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    out = tmp_path / "reports"
    _nb(nbdir / "01_good.ipynb", True)
    _nb(nbdir / "02_bad.ipynb", True)
    logs = []
    before = {pid for pid, _ in _kernels_left()}
    runs = run_notebooks(out, notebooks_dir=nbdir, smoke=True, log=logs.append)
    assert all(r.ok for r in runs)       # a failing observation does not fail the run
    assert _kernels_left(before) == []   # each kernel is stopped (immediately) once its notebook has run
    claims = pd.read_csv(out / "claims.csv")
    assert len(claims) == 6 and list(claims.kind).count("observation") == 2
    assert claims[claims.kind == "claim"].passed.all() and not claims[claims.kind == "observation"].passed.any()
    assert set(claims.paper) == {"KDD20", "sampling-lab", "TORS24"}
    assert set(claims.run) == {"smoke"}
    html = (out / "index.html").read_text()
    assert "01_good.html" in html and (out / "01_good.html").exists()
    before = {f.name: f.read_bytes() for f in out.iterdir()}

    _nb(nbdir / "02_bad.ipynb", False)
    runs = run_notebooks(out, notebooks_dir=nbdir, only="02", failed_dir=tmp_path / "failed", log=logs.append)
    assert [r.ok for r in runs] == [False]
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before      # untouched
    assert any("02_bad" in m and "c2" in m for m in logs)                  # names notebook and claim
    assert (tmp_path / "failed" / "02_bad.ipynb").exists()

    # --only merges: the other notebook's report and claims are kept, with their own run mode
    _nb(nbdir / "02_bad.ipynb", True)
    logs.clear()
    runs = run_notebooks(out, notebooks_dir=nbdir, only="02", log=logs.append)
    assert [r.name for r in runs] == ["02_bad"]
    claims = pd.read_csv(out / "claims.csv")
    assert sorted(claims.notebook.unique()) == ["01_good", "02_bad"] and (out / "01_good.html").exists()
    assert set(claims[claims.notebook == "01_good"].run) == {"smoke"}     # kept from the smoke run
    assert set(claims[claims.notebook == "02_bad"].run) == {"default"}
    assert logs[-1].startswith("1 notebook ran ok (1 kept from the previous report)"), logs[-1]


# --------------------------------------------------------------------------- one run, several checks


@pytest.fixture(scope="session")
def safety_run(tmp_path_factory):
    """A successful run over an existing reports/ beside a user's reports.old, watched while it swaps."""
    root = tmp_path_factory.mktemp("safety")
    nbdir = root / "nbs"
    nbdir.mkdir()
    _nb(nbdir / "01_only.ipynb", True)
    out = root / "reports"
    out.mkdir()
    (out / "index.html").write_text("previous report")
    write_marker(out, ["index.html"])        # a report folder the runner wrote
    user_old = root / "reports.old"
    user_old.mkdir()
    (user_old / "keep").write_text("the user's own folder")

    # every rename / move / delete is watched: reports/ must exist, complete, after each of them
    seen_missing = []

    def watch(fn):
        def wrapper(*args, **kwargs):
            result = fn(*args, **kwargs)
            if not (out / "index.html").exists():
                seen_missing.append(f"{fn.__name__}{args[:2]}")
            return result
        return wrapper

    mp = pytest.MonkeyPatch()
    for mod, name in [(os, "rename"), (os, "replace"), (shutil, "move"), (shutil, "rmtree")]:
        mp.setattr(mod, name, watch(getattr(mod, name)))
    umask = os.umask(0o022)
    try:
        runs = run_notebooks(out, notebooks_dir=nbdir, log=lambda m: None)
    finally:
        os.umask(umask)
        mp.undo()
    return {"root": root, "out": out, "runs": runs, "missing": seen_missing}


@pytest.mark.notebooks
def test_user_backup_folder_is_never_touched(safety_run):
    assert all(r.ok for r in safety_run["runs"])
    keep = safety_run["root"] / "reports.old" / "keep"
    assert keep.exists() and keep.read_text() == "the user's own folder"


@pytest.mark.notebooks
def test_no_temporary_or_backup_folder_is_left(safety_run):
    left = sorted(p.name for p in safety_run["root"].iterdir())
    assert left == ["nbs", "reports", "reports.old"], left     # the lock file too is removed on exit


@pytest.mark.notebooks
def test_report_folder_has_normal_permissions(safety_run):
    mode = stat.S_IMODE(safety_run["out"].stat().st_mode)
    assert mode == 0o755, oct(mode)   # 0777 & ~umask(022), not mkdtemp's 0700


@pytest.mark.notebooks
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="atomic exchange is Linux-only (documented fallback)")
def test_report_folder_never_missing_during_swap(safety_run):
    assert safety_run["missing"] == []
    assert "01_only" in (safety_run["out"] / "index.html").read_text()


@pytest.mark.notebooks
def test_lock_is_released_after_the_run(safety_run):
    assert not (safety_run["root"] / ".reports.lock").exists()       # released, then removed
    with reporting.folders.locked(safety_run["out"]):                # raises if still held
        pass


def test_second_runner_into_the_same_folder_is_refused(tmp_path):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    _nb(nbdir / "01_x.ipynb", True)
    out = tmp_path / "reports"
    out.mkdir()
    (out / "index.html").write_text("first runner's report")
    write_marker(out, ["index.html"])
    lock = tmp_path / ".reports.lock"
    with open(lock, "w") as f:               # the first runner holds the lock (and wrote its pid)
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write("4242\n")
        f.flush()
        with pytest.raises(ReportsLocked, match=r"another report runner \(pid 4242\) is writing .*reports"):
            run_notebooks(out, notebooks_dir=nbdir, log=lambda m: None)
    assert (out / "index.html").read_text() == "first runner's report"
    assert not list(tmp_path.glob(".reports-tmp-*"))


def test_exchange_swaps_two_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "new").touch()
    (b / "old").touch()
    if not reporting.folders.exchange(a, b):
        pytest.skip("renameat2(RENAME_EXCHANGE) not supported here (two-rename fallback)")
    assert [p.name for p in b.iterdir()] == ["new"] and [p.name for p in a.iterdir()] == ["old"]


# --------------------------------------------------------------------------- the ledger


def test_ledger_records_everything_then_raises():
    led = ClaimLedger("x")
    assert not led.check_close("a", "KDD20 eq 4", "d", measured=[1.0, 2.0], expected=[1.0, 2.5], atol=0.1)
    assert led.check_z("b", "TORS24 eq 42", "d", estimate=[0.5, 0.52], expected=0.5, se=0.01)
    assert not led.check_le("c", "AP25 Thm 4.2", "d", measured=2.0, bound=1.0)
    assert led.check_ge("d", "AAAI21 eq 21", "d", measured=2.0, bound=1.0)
    with pytest.raises(ValueError, match="unique"):
        led.check_true("a", "KDD20 x", "dup", passed=True)
    with pytest.raises(ValueError, match="source must start with"):
        led.check_true("e", "Somebody 1999", "d", passed=True)
    with pytest.raises(ClaimsFailed, match="2 of 4 claims failed: a, c"):
        led.finalize()
    assert list(led.table().passed) == [False, True, False, True]


def test_ledger_z_check_handles_zero_se():
    led = ClaimLedger("x")
    assert led.check_z("a", "KDD20 eq 4", "d", estimate=[1.0, 0.5], expected=[1.0, 0.5], se=[0.0, 0.1])
    assert not led.check_z("b", "KDD20 eq 4", "d", estimate=[1.0], expected=[0.9], se=[0.0])


def test_observations_are_shown_but_never_fail():
    led = ClaimLedger("x")
    assert led.check_close("a", "KDD20 eq 4", "exact", measured=1.0, expected=1.0)
    out = led.check_le("S08-T4-recall-bound", "TORS24 Table 4", "relative error below 15% on this data",
                       measured=0.173, bound=0.15, observation=True)
    assert not out and "observation: does not hold" in repr(out)
    assert led.observe("o2", "TORS24 Table 5", "MN among the two best", holds=True)
    assert [c.kind for c in led.claims] == ["claim", "observation", "observation"]
    assert led.failed == [] and len(led.observations) == 2
    tbl = led.finalize()                      # does not raise
    assert list(tbl.kind) == ["claim", "observation", "observation"]
    with pytest.raises(TypeError, match="observation must be True or False"):
        led.check_true("z", "KDD20 x", "d", passed=True, observation="yes")


def test_failed_claim_still_fails_next_to_observations():
    led = ClaimLedger("x")
    led.check_true("a", "KDD20 x", "d", passed=False)
    led.observe("o", "KDD20 x", "d", holds=False)
    with pytest.raises(ClaimsFailed, match="1 of 1 claims failed: a"):
        led.finalize()


def test_ledger_records_the_tolerance_scale():
    led = ClaimLedger("x")
    led.check_close("a", "KDD20 eq 4", "d", measured=0.30000000000000004, expected=0.3, rtol=1e-12)
    led.check_z("b", "KDD20 eq 4", "d", estimate=0.503, expected=0.5, se=0.002)
    led.check_le("c", "KDD20 eq 4", "d", measured=[1, 2], bound=[3, 4])
    assert led.claims[0].scale == pytest.approx(3e-13) and led.claims[1].scale == 0.002
    assert led.claims[2].scale is None and led.claims[0].cell is None   # no IPython here


@pytest.mark.parametrize("value, scale, shown", [
    (0.3479611844281517, None, "0.348"),
    (0.3479611844281517, 1e-12, "0.347961184428"),
    (-8.548717289613705e-15, None, "-8.549e-15"),
    (1067.0, None, "1067"),
    (1067.07, 0.01, "1067.07"),
    (0.503, 0.002, "0.503"),
    ("max |z| 2.5 over 48", None, "max |z| 2.5 over 48"),
    ("True", None, "True"),
    (None, None, ""),
])
def test_values_are_shown_to_meaningful_digits(value, scale, shown):
    assert reporting.index.format_value(value, scale) == shown


def test_runner_starts_the_longest_notebooks_first(tmp_path):
    # LPT scheduling for --jobs > 1: the previous run's papermill durations, unknown ones first
    import json

    prev = tmp_path / "reports"
    prev.mkdir()
    for name, secs in [("01_a.ipynb", 5.0), ("02_b.ipynb", 50.0), ("04_d.ipynb", None)]:
        (prev / name).write_text(json.dumps({"metadata": {"papermill": {"duration": secs}}}))
    (prev / "05_e.ipynb").write_text("not json")
    jobs = [(f"nbs/{n}", f"tmp/{n}", {}, None) for n in ["01_a.ipynb", "02_b.ipynb", "03_c.ipynb", "04_d.ipynb",
                                                          "05_e.ipynb"]]
    order = [a[0] for a in reporting.runner.longest_first(jobs, prev)]
    assert order == ["nbs/03_c.ipynb", "nbs/04_d.ipynb", "nbs/05_e.ipynb", "nbs/02_b.ipynb", "nbs/01_a.ipynb"]


# --------------------------------------------------------------------------- the commit a report names


def test_report_names_the_code_commit_and_uncommitted_changes_only_of_the_sources(tmp_path):
    # issue 27: the committed report said "from commit ...+dirty", behind HEAD: reports/ itself (the previous
    # run, not yet committed) and README edits made the tree dirty, and commits of reports or README moved HEAD
    import subprocess

    from sampling_lib.reporting.environment import commit_label, environment_info

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    for f, text in [("sampling_lib/x.py", "x = 1\n"), ("notebooks/01_a.ipynb", "{}\n"), ("README.md", "r\n"),
                    ("reports/claims.csv", "a\n")]:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(text)
    git("add", "-A")
    git("commit", "-q", "-m", "code")
    code = git("rev-parse", "HEAD")
    (tmp_path / "reports" / "claims.csv").write_text("a new report\n")   # the previous run, uncommitted
    (tmp_path / "README.md").write_text("edited\n")
    (tmp_path / "notes.txt").write_text("untracked, not a source\n")
    env = environment_info(tmp_path)
    assert (env["commit"], env["dirty"], env["changed_sources"]) == (code, False, [])
    assert commit_label(env) == code[:12]
    git("add", "reports", "README.md")
    git("commit", "-q", "-m", "reports and README")                      # HEAD moves, the code does not
    env = environment_info(tmp_path)
    assert env["commit"] == code and env["head"] == git("rev-parse", "HEAD") != code
    (tmp_path / "sampling_lib" / "x.py").write_text("x = 2\n")
    (tmp_path / "notebooks" / "02_new.ipynb").write_text("{}\n")
    env = environment_info(tmp_path)
    assert env["dirty"] is True and sorted(env["changed_sources"]) == ["notebooks/02_new.ipynb", "sampling_lib/x.py"]
    assert commit_label(env) == f"{code[:12]} (uncommitted changes)"


def test_report_commit_runs_the_notebook_filter_only_for_notebooks_whose_raw_file_changed(tmp_path):
    """The notebooks' git clean filter (nbstripout under `make setup`) costs a process per notebook, and
    git runs it for every notebook whose stat data it cannot trust (a fresh clone: 13 s per report). The
    runner compares raw files and filters only the notebooks that differ; one whose difference the filter
    removes (outputs JupyterLab saved) is no change, one with a real change is. (The previous code ran
    the filter on all 5 notebooks here.)"""
    import subprocess
    import sys

    from sampling_lib.reporting.environment import NOTEBOOK_FILTER, environment_info

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    log = tmp_path / "filter.log"
    strip = tmp_path / "strip.py"       # the stand-in for nbstripout: drops lines with OUTPUT, logs each call
    strip.write_text("import sys\n"
                     f"open({str(log)!r}, 'a').write('x\\n')\n"
                     "sys.stdout.write(''.join(l for l in sys.stdin if 'OUTPUT' not in l))\n")
    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    git("config", f"filter.{NOTEBOOK_FILTER}.clean", f"{sys.executable} {strip}")
    git("config", f"filter.{NOTEBOOK_FILTER}.smudge", "cat")
    (tmp_path / ".gitattributes").write_text(f"notebooks/*.ipynb filter={NOTEBOOK_FILTER}\n")
    (tmp_path / "notebooks").mkdir()
    for k in range(5):
        (tmp_path / "notebooks" / f"0{k}.ipynb").write_text(f"cell {k}\n")
    git("add", "-A")
    git("commit", "-q", "-m", "code")
    log.write_text("")
    env = environment_info(tmp_path)
    assert env["dirty"] is False and env["changed_sources"] == []
    assert log.read_text() == ""                         # no notebook filtered: none changed
    (tmp_path / "notebooks" / "01.ipynb").write_text("cell 1\nOUTPUT 42\n")    # only what the filter strips
    (tmp_path / "notebooks" / "02.ipynb").write_text("cell 2 edited\n")
    env = environment_info(tmp_path)
    assert env["changed_sources"] == ["notebooks/02.ipynb"]
    assert len(log.read_text().splitlines()) == 2        # the two changed raw files, nothing else
