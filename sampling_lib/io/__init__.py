"""Readers: per-user sampled ranks from tables of ranks or of scores.

* :func:`read_table` -- a DataFrame or a CSV/TSV path, with one-line errors;
* :func:`ranks_from_table` -- a ranks table ``user, rank[, sample_size][, model]``;
* :func:`ranks_from_score_table` -- a long scores table ``user, score, label[, model]``
  (the layout of a ``uni100`` evaluation), ranked with a tie rule of
  :mod:`sampling_lib.ranking`;
* :class:`SampledRanks` -- what both return: per-user ranks (and sample sizes) per model;
* :func:`counts_table` -- the sufficient statistic (users per (model, n_items,
  sample_size, rank) cell) of a ranks or counts file, CSV or partitioned Parquet
  (read with dask.dataframe without loading it whole);
* the files evaluation frameworks write: :func:`read_trec_run` /
  :func:`read_trec_qrels` / :func:`read_ranx_json` and :func:`ranks_from_run`
  (TREC runs and ranx runs, sampled or full rankings);
  :func:`read_ncf_negatives` (NCF ``*.test.negative``),
  :func:`read_elliot_negatives` (Elliot's negatives TSV), :func:`read_negatives`
  (this project's fixed negatives file) and :func:`ranks_from_negatives`
  (a candidates table + a scores function or file -> sampled ranks);
  :func:`popularity_table` (popularity-sampled negatives with their draw
  probabilities + scores -> the table of the popularity estimators);
* the stages of a nested design (a second stage, the doubling ladder):
  :func:`read_stages` (every stage's negatives file -> one candidates table,
  checked: users, held-out items, repeated negatives, history, N_u) and
  :func:`write_stage_negatives` (a stage's negatives in the first stage's
  format).

Every reader reports a bad file in one line naming the file (and the line of
a text file). The conventions of the frameworks (n, N, sampling scheme, ties,
duplicates) are tabulated in the README, section "Conventions of evaluation
frameworks".

The outputs feed :func:`sampling_lib.correct.estimate` and
:func:`~sampling_lib.correct.compare`.
"""
from ._counts import counts_table, is_parquet
from ._files import ID_COLUMNS, concat_tables, id_text, read_table, row_location, table_name, table_source
from ._negatives import (DUPLICATES, POPULARITY_NEGATIVE_COLUMNS, popularity_table, ranks_from_negatives,
                         read_elliot_negatives, read_ncf_negatives, read_negatives)
from ._stages import STAGE_FORMATS, check_stage_sizes, read_stages, stage_file_name, write_stage_negatives
from ._runs import CANDIDATES, RUN_FORMATS, ranks_from_run, read_ranx_json, read_trec_qrels, read_trec_run
from ._tables import (TABLE_LAYOUTS, SampledRanks, check_scores_and_labels, ranks_from_score_table, ranks_from_table,
                      table_layout)

__all__ = ["SampledRanks", "read_table", "check_scores_and_labels", "ranks_from_table", "ranks_from_score_table",
           "read_trec_run", "read_trec_qrels", "read_ranx_json", "ranks_from_run", "CANDIDATES",
           "read_ncf_negatives", "read_elliot_negatives", "read_negatives", "ranks_from_negatives",
           "DUPLICATES", "counts_table", "is_parquet", "RUN_FORMATS", "TABLE_LAYOUTS", "table_layout",
           "ID_COLUMNS", "id_text", "row_location", "table_source", "table_name",
           "STAGE_FORMATS", "read_stages", "write_stage_negatives", "stage_file_name", "check_stage_sizes",
           "concat_tables", "popularity_table", "POPULARITY_NEGATIVE_COLUMNS"]
