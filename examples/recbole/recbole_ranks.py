"""Per-user sampled ranks and N_u from one RecBole evaluation pass (RecBole 1.2.1, public API only).

Not part of the library or of CI: RecBole needs torch and pins an old numpy, so run
this in a separate environment (see README.md beside this file). The script

1. converts a MovieLens-style ratings file (``user item rating timestamp``) into
   RecBole's atomic ``.inter`` file in a temporary folder;
2. trains each model with RecBole (leave-one-out split by time: one test item per user);
3. evaluates the test set with RecBole's own ``trainer.evaluate`` in ``full`` mode
   and in ``uniN`` mode (its published metrics);
4. runs the *same* ``uniN`` pass again (same seed, so the data loader draws the
   same negatives) through the model's public ``predict``, ranks every user's
   held-out item, and writes three tables (:func:`write_outputs`):

   * ``OUTPUT`` (e.g. ``ranks.csv``): ``user, model, rank, sample_size, n_items``,
     the rank among the held-out item and its N drawn negatives **every draw
     counted** (sample_size = N + 1: the binomial kernel is exact) and the user's
     number of candidates N_u = items outside its train+valid history (what
     ``full`` mode ranks against). ``sampling-lib estimate ranks.csv`` reads it
     as it is (N_u from its ``n_items`` column);
   * ``<stem>_distinct.csv``: the same columns for the rank among the *distinct*
     drawn negatives (what RecBole's own sampled metric uses), sample_size =
     1 + distinct negatives, and ``scheme = hypergeometric``, so that
     ``sampling-lib estimate ranks_distinct.csv`` reads them with the exact kernel;
   * ``<stem>_truth.csv``: ``user, model, global_rank, n_items``, the rank among
     the N_u candidates from ``full_sort_predict`` (the ground truth of the
     correction; ``summarize.py`` compares with it).

   Ties follow ``--ties``, the same rule for sampled and global ranks.

Usage::

    python recbole_ranks.py ../../../shared/data/ml-100k/u.data ranks.csv \\
        --models Pop ItemKNN BPR --mode uni100 --epochs 30

Then, with the sampling-lab environment::

    sampling-lib estimate ranks.csv --metric recall@10 --metric ndcg@10
    sampling-lib estimate ranks_distinct.csv --metric recall@10 --metric ndcg@10

Facts this relies on (RecBole 1.2.1 source): ``recbole/sampler/sampler.py``
(``Sampler._uni_sampling`` draws ids 1..item_num-1 uniformly *with replacement*;
``sample_by_key_ids`` redraws any id in the user's used set, which for the test
phase is train + valid + test items); ``recbole/data/dataloader/general_dataloader.py``
(``NegSampleEvalDataLoader`` puts each positive row first and its sample_num
negatives after it; ``FullSortEvalDataLoader`` masks the history = used - positive);
``recbole/trainer/trainer.py`` (``_neg_sample_batch_eval`` writes the scores into a
users x items matrix, so a negative drawn twice occupies one cell: duplicates collapse;
``_full_sort_batch_eval`` sets item 0 ([PAD]) and the history to -inf).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from pathlib import Path

import numpy as np
import pandas as pd

# torch and RecBole are imported where they are used (main, the passes), so that write_outputs, which turns
# the passes' table into the files sampling-lib reads, imports without them (tests/test_recbole_recipe.py)


def write_atomic(ratings_path, folder, name):
    """MovieLens u.data (tab: user item rating timestamp) -> RecBole atomic <name>.inter."""
    df = pd.read_csv(ratings_path, sep=r"\s+", header=None, names=["u", "i", "r", "t"], engine="python")
    os.makedirs(os.path.join(folder, name), exist_ok=True)
    out = os.path.join(folder, name, f"{name}.inter")
    with open(out, "w") as fh:
        fh.write("user_id:token\titem_id:token\trating:float\ttimestamp:float\n")
        df.to_csv(fh, sep="\t", header=False, index=False)
    return len(df)


def make_config(model, data_path, name, mode, epochs, seed, checkpoint_dir):
    from recbole.config import Config

    return Config(model=model, dataset=name, config_dict={
        "data_path": data_path,
        "checkpoint_dir": checkpoint_dir,
        "load_col": {"inter": ["user_id", "item_id", "timestamp"]},
        "eval_args": {"split": {"LS": "valid_and_test"}, "order": "TO", "group_by": "user",
                      "mode": {"valid": "full", "test": mode}},
        "metrics": ["Hit", "NDCG", "MRR"], "topk": [1, 5, 10, 20, 50],
        "valid_metric": "NDCG@10", "metric_decimal_place": 6,
        "epochs": epochs, "stopping_step": 5, "seed": seed, "reproducibility": True,
        "use_gpu": False, "gpu_id": "", "show_progress": False, "worker": 0, "state": "WARNING",
    })


def tie_rank(greater, equal, ties, rng):
    """1 + (scored above) + tie term: pessimistic (all ties above), optimistic, random."""
    if ties == "pessimistic":
        return 1 + greater + equal
    if ties == "optimistic":
        return 1 + greater
    return 1 + greater + rng.integers(0, equal + 1)


def sampled_pass(model, loader, config, ties, rng):
    """Per-user (uid, sampled rank with duplicates counted, n, rank among distinct, n distinct).

    Iterates the public data loader of a uniN / popN evaluation: every batch is
    (interaction, row_idx, positive_u, positive_i); rows with label 1 are the
    held-out items, the others the drawn negatives of the same user (row_idx).
    Ties follow ``ties`` (same rule as :func:`full_pass`).
    """
    import torch

    uid_f, iid_f, lab_f = config["USER_ID_FIELD"], config["ITEM_ID_FIELD"], config["LABEL_FIELD"]
    rows = []
    for interaction, row_idx, _, _ in loader:
        with torch.no_grad():
            scores = model.predict(interaction).double().numpy()
        uid = interaction[uid_f].numpy()
        iid = interaction[iid_f].numpy()
        lab = interaction[lab_f].numpy()
        ri = row_idx.numpy()
        for g in np.unique(ri):
            sel = ri == g
            s, it, lb = scores[sel], iid[sel], lab[sel]
            if int(lb.sum()) != 1:
                raise ValueError(f"user {uid[sel][0]} has {int(lb.sum())} held-out items; the recipe "
                                 "needs a leave-one-out split (one test item per user)")
            pos = s[lb == 1][0]
            neg_s, neg_i = s[lb == 0], it[lb == 0]
            r = int(tie_rank(np.sum(neg_s > pos), np.sum(neg_s == pos), ties, rng))
            _, first = np.unique(neg_i, return_index=True)
            d = neg_s[first]
            r_d = int(tie_rank(np.sum(d > pos), np.sum(d == pos), ties, rng))
            rows.append((int(uid[sel][0]), r, 1 + neg_s.size, r_d, 1 + first.size))
    return pd.DataFrame(rows, columns=["uid", "rank", "sample_size", "rank_distinct",
                                       "sample_size_distinct"])


def full_pass(model, loader, config, item_num, ties, rng):
    """Per-user (uid, global rank among non-history items, N_u) from full_sort_predict."""
    import torch

    uid_f = config["USER_ID_FIELD"]
    rows = []
    for interaction, history, positive_u, positive_i in loader:
        with torch.no_grad():
            scores = model.full_sort_predict(interaction).double().view(-1, item_num)
        scores[:, 0] = -np.inf
        hu, hi = history
        scores[hu, hi] = -np.inf
        pu, pi = positive_u.numpy(), positive_i.numpy()
        if np.unique(pu).size != pu.size:
            raise ValueError("the recipe needs one test item per user (leave-one-out split)")
        S = scores.numpy()
        pos = S[pu, pi]
        n_items = np.isfinite(S).sum(axis=1)
        gt = (S > pos[:, None]).sum(axis=1)
        eq = (S == pos[:, None]).sum(axis=1) - 1             # minus the held-out item itself
        R = tie_rank(gt, eq, ties, rng)
        uid = interaction[uid_f].numpy()[pu]
        rows += list(zip(uid.tolist(), R.tolist(), n_items[pu].tolist()))
    return pd.DataFrame(rows, columns=["uid", "global_rank", "n_items"])


#: what write_outputs writes beside OUTPUT: <stem>_distinct.csv, <stem>_truth.csv
DISTINCT, TRUTH = "_distinct", "_truth"


def output_paths(output):
    """(counted ranks, distinct ranks, global ranks) file names of ``output`` (ranks.csv -> ranks.csv,
    ranks_distinct.csv, ranks_truth.csv)."""
    p = Path(output)
    return p, p.with_name(p.stem + DISTINCT + p.suffix), p.with_name(p.stem + TRUTH + p.suffix)


def write_outputs(table, output):
    """Write the passes' table as three files that ``sampling-lib`` reads as they are; returns their paths.

    ``table`` has one row per user and model: ``user, model, rank, sample_size,
    rank_distinct, sample_size_distinct, global_rank, n_items`` (what
    :func:`sampled_pass` and :func:`full_pass` give, merged). One file could not
    hold them all: a ranks table holds one rank per user and model (sampling-lib
    refuses a column it would not read), so the ranks among the distinct
    negatives and the global ranks go to their own files.
    """
    counted, distinct, truth = output_paths(output)
    keys = ["user", "model"]
    table[keys + ["rank", "sample_size", "n_items"]].to_csv(counted, index=False)
    (table[keys + ["rank_distinct", "sample_size_distinct", "n_items"]]
     .rename(columns={"rank_distinct": "rank", "sample_size_distinct": "sample_size"})
     .assign(scheme="hypergeometric")
     .to_csv(distinct, index=False))
    table[keys + ["global_rank", "n_items"]].to_csv(truth, index=False)
    return counted, distinct, truth


def main(argv=None):
    import torch
    from recbole.data import create_dataset, data_preparation
    from recbole.utils import get_model, get_trainer, init_logger, init_seed

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ratings", help="MovieLens-style ratings file (user item rating timestamp)")
    p.add_argument("output", help="ranks CSV to write (and <stem>_distinct.csv, <stem>_truth.csv beside it)")
    p.add_argument("--models", nargs="+", default=["Pop", "ItemKNN", "BPR"])
    p.add_argument("--mode", default="uni100", help="RecBole sampled mode, e.g. uni100 (default)")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--seed", type=int, default=2020)
    p.add_argument("--ties", choices=["pessimistic", "optimistic", "random"], default="random",
                   help="tie rule of the written ranks, the same for sampled and global ranks "
                        "(default random: RecBole's torch.topk puts ties in an arbitrary order)")
    p.add_argument("--metrics-out", default=None, help="CSV of RecBole's own full and sampled metrics")
    args = p.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="recbole-recipe-")
    name = "ratings"
    n_rows = write_atomic(args.ratings, tmp, name)
    print(f"atomic file: {n_rows} interactions in {tmp}", file=sys.stderr)
    tables, metrics = [], []
    for model_name in args.models:
        t0 = time.time()
        cfg_full = make_config(model_name, tmp, name, "full", args.epochs, args.seed, os.path.join(tmp, "saved"))
        cfg_samp = make_config(model_name, tmp, name, args.mode, args.epochs, args.seed, os.path.join(tmp, "saved"))
        init_logger(cfg_full)
        init_seed(cfg_full["seed"], cfg_full["reproducibility"])
        ds_full = create_dataset(cfg_full)
        train, valid, test_full = data_preparation(cfg_full, ds_full)
        init_seed(cfg_samp["seed"], cfg_samp["reproducibility"])
        ds_samp = create_dataset(cfg_samp)
        _, _, test_samp = data_preparation(cfg_samp, ds_samp)
        for f in (cfg_full["USER_ID_FIELD"], cfg_full["ITEM_ID_FIELD"]):
            if not np.array_equal(ds_full.field2id_token[f], ds_samp.field2id_token[f]):
                raise RuntimeError(f"the two datasets map {f} differently")
        init_seed(cfg_full["seed"], cfg_full["reproducibility"])
        model = get_model(model_name)(cfg_full, train._dataset).to(cfg_full["device"])
        trainer = get_trainer(cfg_full["MODEL_TYPE"], model_name)(cfg_full, model)
        trainer.fit(train, valid, saved=True, show_progress=False)
        # the best checkpoint (by valid NDCG@10). RecBole 1.2.1 calls torch.load with
        # torch's default weights_only=True since torch 2.6, which cannot read its own
        # checkpoint: load it here (we wrote it ourselves a moment ago).
        ckpt = torch.load(trainer.saved_model_file, map_location=cfg_full["device"], weights_only=False)
        model.load_state_dict(ckpt["state_dict"])
        model.load_other_parameter(ckpt.get("other_parameter"))
        model.eval()
        res_full = trainer.evaluate(test_full, load_best_model=False, show_progress=False)
        # RecBole's own sampled metric, then the same pass again for the ranks:
        # the data loader draws negatives from numpy's global generator, so the
        # same seed before each pass gives the same negatives.
        init_seed(args.seed + 1, True)
        res_samp = trainer.evaluate(test_samp, load_best_model=False, show_progress=False)
        init_seed(args.seed + 1, True)
        rng = np.random.default_rng(args.seed)
        sp = sampled_pass(model, test_samp, cfg_samp, args.ties, rng)
        fp = full_pass(model, test_full, cfg_full, ds_full.item_num, args.ties, rng)
        t = sp.merge(fp, on="uid", how="inner", validate="one_to_one")
        if len(t) != len(sp) or len(t) != len(fp):
            raise RuntimeError("the full and sampled test sets hold different users")
        t.insert(0, "user", ds_full.id2token(cfg_full["USER_ID_FIELD"], t["uid"].to_numpy()))
        t.insert(1, "model", model_name)
        tables.append(t.drop(columns="uid"))
        for mode, res in (("full", res_full), (args.mode, res_samp)):
            for k, v in res.items():
                metrics.append(dict(model=model_name, mode=mode, metric=k, value=float(v)))
        print(f"{model_name}: {time.time() - t0:.1f} s; full {dict(res_full)}; {args.mode} {dict(res_samp)}",
              file=sys.stderr)
    out = pd.concat(tables, ignore_index=True)
    paths = write_outputs(out, args.output)
    if args.metrics_out:
        pd.DataFrame(metrics).to_csv(args.metrics_out, index=False)
    print(f"wrote {len(out)} rows to each of {', '.join(map(str, paths))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
