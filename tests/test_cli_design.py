"""``sampling-lib design init|next|status|estimate DIR``: the one-call evaluation through files.

The file route must give what the Python route gives (same inputs, same seed: the same table), read each
request's scores once and whole, and refuse what does not fit, in one line, without touching the user's files.
"""
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sampling_lib import evaluate
from sampling_lib.cli import main
from sampling_lib.io import read_ncf_negatives

N = 500


def _world(M=150, seed=0):
    rng = np.random.default_rng(seed)
    quality = rng.normal(size=N)
    p = np.exp(1.5 * quality)
    held = pd.DataFrame({"user": [f"u{k}" for k in range(M)],
                         "item": [int(rng.choice(N, p=p / p.sum())) for _ in range(M)]})
    train = []
    for u, h in zip(held.user, held.item):
        for i in rng.choice(N, size=int(rng.integers(0, 30)), replace=False):
            if i != h:
                train.append((u, int(i)))
    train = pd.DataFrame(train, columns=["user", "item"])
    code = {u: k for k, u in enumerate(held.user)}

    def model(key, noise):
        def f(users, items):
            users = np.asarray(users)
            x = (np.array([code[str(u)] for u in users]) * 7919 + np.asarray(items, dtype=np.int64) * 104729 + key)
            return quality[np.asarray(items, dtype=np.int64)] + noise * (np.sin(x * 12.9898) * 43758.5453 % 1.0)
        return f

    return held, train, {"A": model(1, 0.8), "B": model(2, 2.0)}


def _files(tmp_path, held, train):
    h, t = tmp_path / "held_out.csv", tmp_path / "train.csv"
    held.to_csv(h, index=False)
    train.to_csv(t, index=False)
    return h, t


def _score_request(path, models, fmt="pairs"):
    """What a framework does: score every pair of the request; write user, item, score, model."""
    if fmt == "pairs":
        pairs = pd.read_csv(path, dtype=str)
    else:
        t = read_ncf_negatives(path)
        pairs = t[["user", "item"]].astype(str)
    out = pd.concat([pairs.assign(score=f(pairs.user.to_numpy(), pairs.item.astype(int).to_numpy()), model=m)
                     for m, f in models.items()])
    target = path.with_name(path.name.split(".")[0].replace("request", "scores") + ".csv")
    out.to_csv(target, index=False)
    return target


def _loop(d, models, capsys, fmt="pairs"):
    while True:
        assert main(["design", "status", str(d), "--pending"]) in (0, 1)
        out = capsys.readouterr().out.strip()
        if not out:
            break
        _score_request(Path(out), models, fmt)
        assert main(["design", "next", str(d), "--quiet"]) == 0
        capsys.readouterr()


def test_the_file_route_gives_the_python_route_s_table(tmp_path, capsys):
    held, train, models = _world()
    h, t = _files(tmp_path, held, train)
    d = tmp_path / "run"
    assert main(["design", "init", str(d), "--held-out", str(h), "-N", str(N), "--exclude", str(t), "-n", "20",
                 "--seed", "4"]) == 0
    assert "request-1.csv" in capsys.readouterr().out
    _loop(d, models, capsys)
    assert main(["design", "estimate", str(d), "--format", "csv", "--n-boot", "200", "--quiet"]) == 0
    got = pd.read_csv(io.StringIO(capsys.readouterr().out))
    exclude = {u: g.item.tolist() for u, g in train.groupby("user")}
    ref = evaluate(models, dict(zip(held.user, held.item)), N, exclude=exclude, n=20, seed=4, n_boot=200,
                   progress=False)
    for col in ("estimate", "ci_low", "ci_high", "naive"):
        np.testing.assert_allclose(got[col].to_numpy(), ref.table[col].to_numpy(), rtol=1e-12)
    assert main(["design", "status", str(d)]) == 0
    status = capsys.readouterr().out
    assert "done: sampling-lib design estimate" in status and "stage 1: 150 users" in status


def test_ncf_requests_are_read_by_the_ncf_reader_and_a_rescored_held_out_item_is_accepted(tmp_path, capsys):
    held, train, models = _world(M=80, seed=1)
    h, t = _files(tmp_path, held, train)
    d = tmp_path / "run"
    assert main(["design", "init", str(d), "--held-out", str(h), "-N", str(N), "-n", "20", "--format", "ncf"]) == 0
    capsys.readouterr()
    assert (d / "request-1.test.negative").exists()
    _loop(d, models, capsys, fmt="ncf")           # the NCF lines name the held-out item: scored again, same score
    assert main(["design", "status", str(d), "--pending"]) == 1


def test_a_scores_file_read_twice_missing_or_foreign_pairs_are_refused(tmp_path, capsys):
    held, train, models = _world(M=60, seed=2)
    h, _ = _files(tmp_path, held, train)
    d = tmp_path / "run"
    main(["design", "init", str(d), "--held-out", str(h), "-N", str(N), "-n", "20"])
    capsys.readouterr()
    s1 = _score_request(d / "request-1.csv", models)
    full = pd.read_csv(s1)
    full.iloc[:-1].to_csv(tmp_path / "short.csv", index=False)
    assert main(["design", "next", str(d), "--scores", str(tmp_path / "short.csv")]) == 1
    assert "is missing" in capsys.readouterr().err
    pd.concat([full, full.iloc[:1].assign(item=str(held.item[0] + 1 if held.item[0] + 1 < N else 0),
                                          user="u1")]).to_csv(tmp_path / "extra.csv", index=False)
    assert main(["design", "next", str(d), "--scores", str(tmp_path / "extra.csv")]) == 1
    err = capsys.readouterr().err
    assert "does not ask for" in err or "twice" in err
    assert main(["design", "next", str(d), "--quiet"]) == 0
    capsys.readouterr()
    if main(["design", "status", str(d), "--pending"]) == 0:       # a later request pending: the old file again
        capsys.readouterr()
        assert main(["design", "next", str(d), "--scores", str(s1)]) == 1
        assert "was already read, as the scores of request 1" in capsys.readouterr().err


def test_a_changed_held_out_score_is_refused(tmp_path, capsys):
    held, train, models = _world(M=60, seed=3)
    h, _ = _files(tmp_path, held, train)
    d = tmp_path / "run"
    main(["design", "init", str(d), "--held-out", str(h), "-N", str(N), "-n", "20", "--format", "ncf"])
    capsys.readouterr()
    _score_request(d / "request-1.test.negative", models, "ncf")
    main(["design", "next", str(d), "--quiet"])
    capsys.readouterr()
    if main(["design", "status", str(d), "--pending"]) == 1:
        pytest.skip("the first stage alone sufficed")
    req = Path(capsys.readouterr().out.strip())
    target = _score_request(req, models, "ncf")
    s = pd.read_csv(target, dtype={"user": str, "item": str})
    is_held = s.item == s.user.map(dict(zip(held.user, held.item.astype(str))))
    s.loc[is_held, "score"] += 1.0
    s.to_csv(target, index=False)
    assert main(["design", "next", str(d)]) == 1
    assert "the model changed between stages" in capsys.readouterr().err


def test_init_refuses_a_folder_with_files_and_next_a_folder_it_did_not_make(tmp_path, capsys):
    held, train, _ = _world(M=20)
    h, _ = _files(tmp_path, held, train)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert main(["design", "init", str(busy), "--held-out", str(h), "-N", str(N)]) == 1
    assert "exists and is not empty" in capsys.readouterr().err
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]
    assert main(["design", "next", str(busy)]) == 1
    assert "is not a design folder" in capsys.readouterr().err
    assert main(["design", "init", str(tmp_path / "x"), "-N", str(N)]) == 2
    assert "needs --held-out" in capsys.readouterr().err


def test_next_without_scores_says_where_they_go(tmp_path, capsys):
    held, train, _ = _world(M=20)
    h, _ = _files(tmp_path, held, train)
    d = tmp_path / "run"
    main(["design", "init", str(d), "--held-out", str(h), "-N", str(N), "-n", "10"])
    capsys.readouterr()
    assert main(["design", "next", str(d)]) == 1
    err = capsys.readouterr().err
    assert "scores-1.csv not found" in err and "request-1.csv" in err
