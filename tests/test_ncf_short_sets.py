"""NCF's published files as they are: sets of 99 negatives, a few of 98 (the line lists the held-out item).

plan, the later stages and re-planning take such a first stage with no workaround: n is the common first
stage size (100), the short sets are first stages a few items short (sampling.SHORT_FIRST_STAGE), the
models' first-stage ranks pair them, and the later stages continue one ladder. Methods that need one common
n say what the principled choices are, and --common-size-only takes one of them, counting what it leaves out.
"""
import io

import numpy as np
import pandas as pd
import pytest

from sampling_lib.cli import main
from sampling_lib.io import read_ncf_negatives

N, M = 1500, 400


@pytest.fixture(scope="module")
def ncf(tmp_path_factory):
    d = tmp_path_factory.mktemp("ncf")
    rng = np.random.default_rng(0)
    q = rng.normal(size=N)
    p = np.exp(1.2 * q)
    held = rng.choice(N, size=M, p=p / p.sum())
    lines = []
    for u in range(M):
        neg = rng.choice(N, size=99, replace=False)
        if u % 20 == 0 and held[u] not in neg:
            neg[5] = held[u]                               # NCF drew around the training items only
        lines.append(f"({u},{held[u]})\t" + "\t".join(map(str, neg)))
    (d / "s1.test.negative").write_text("\n".join(lines) + "\n")
    pd.DataFrame({"user": np.arange(M), "item": held}).to_csv(d / "users.csv", index=False)

    def score(files, out):
        t = pd.concat([read_ncf_negatives(d / f)[["user", "item"]] for f in files]
                      + [pd.read_csv(d / "users.csv")]).astype(int).drop_duplicates()
        f = lambda u, i, k, a: q[i] + a * (np.sin((u * 7919 + i * 104729 + k) * 12.9898) * 43758.5453 % 1.0)  # noqa
        pd.concat([t.assign(model=m, score=f(t.user.to_numpy(), t.item.to_numpy(), k, a))
                   for m, k, a in (("a", 1, 0.5), ("b", 2, 1.5))]).to_csv(d / out, index=False)

    return d, score


def _run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


# slow (5 s): the re-planning workflow on NCF's short sets; the module's other tests keep the reader and plan
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_plan_stages_and_replan_take_short_first_stages(ncf, capsys, monkeypatch):
    d, score = ncf
    monkeypatch.chdir(d)
    score(["s1.test.negative"], "sc1.csv")
    code, _, err = _run(["ranks", "s1.test.negative", "--input-format", "ncf", "--scores", "sc1.csv", "-N", str(N),
                         "--scheme", "hypergeometric", "-o", "ranks1.csv"], capsys)
    assert code == 0, err
    sizes = pd.read_csv(d / "ranks1.csv").sample_size
    assert set(sizes) >= {99, 100}                          # short sets are there
    code, out, err = _run(["plan", "ranks1.csv"], capsys)
    assert code == 0, err
    assert ", n = 100," in out                              # the common first-stage size, not the smallest
    assert "the models taken as independent" not in out     # the first-stage ranks pair the models
    assert "does not continue the stages already run" not in out
    assert "--n-max" in out
    n_max = int(out.split("--n-max ")[1].split()[0])
    code, _, err = _run(["negatives", "--stage", "2", "--previous", "s1.test.negative", "--input-format", "ncf",
                         "--ranks", "ranks1.csv", "--n-max", str(n_max), "--no-replace", "-N", str(N), "--seed", "0",
                         "-o", "s2.test.negative"], capsys)
    assert code == 0, err
    score(["s1.test.negative", "s2.test.negative"], "sc2.csv")
    code, _, err = _run(["ranks", "s1.test.negative", "s2.test.negative", "--input-format", "ncf", "--scores",
                         "sc1.csv", "--scores", "sc2.csv", "-N", str(N), "--scheme", "hypergeometric", "-o",
                         "merged.csv"], capsys)
    assert code == 0, err
    merged = pd.read_csv(d / "merged.csv")
    # a short first stage went on to the ladder's next rung like the others (one ladder, n = 100)
    assert set(merged.sample_size[merged.sample_size > 100]) == {200}
    code, out, err = _run(["plan", "merged.csv"], capsys)
    assert code == 0, err
    assert "does not continue" not in out


@pytest.mark.filterwarnings("ignore:.*list their held-out item among their negatives:UserWarning")
def test_methods_that_need_one_n_name_the_choices_and_common_size_only_counts_what_it_leaves_out(ncf, capsys,
                                                                                                  monkeypatch):
    d, score = ncf
    monkeypatch.chdir(d)
    score(["s1.test.negative"], "sc1.csv")
    base = ["estimate", "s1.test.negative", "--input-format", "ncf", "--scores", "sc1.csv", "-N", str(N),
            "--scheme", "hypergeometric", "--method", "mle", "--n-boot", "50", "--format", "csv", "--quiet"]
    code, _, err = _run(base, capsys)
    assert code == 1
    assert "score their missing negatives" in err and "--common-size-only" in err and "logspline" in err
    code, out, err = _run(base + ["--common-size-only"], capsys)
    assert code == 0, err
    short = sum(1 for line in (d / "s1.test.negative").read_text().splitlines()
                if line.split("\t")[0].strip("()").split(",")[1] in line.split("\t")[1:])
    assert f"{short:,} of {M:,} users have sets of fewer than 100 items" in err
    assert int(pd.read_csv(io.StringIO(out)).users.iloc[0]) == M - short
