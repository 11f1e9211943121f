"""Replicate counts per prompt variant (from ``response_codes``): the read behind the perturbation analysis.

One row per (model, item, variant) of a benchmark, summed in DuckDB so that a benchmark of
many replicates never reaches Python as single responses.
"""

from __future__ import annotations

import polars as pl

from benchcert.tasks.store.connection import query_pl

__all__ = ["read_variant_counts"]

_READ = """
    SELECT m.model, i.item_id, v.variant, c.r, c.k, c.binary, c.k AS s, c.scores
    FROM (SELECT model_id, item_key, variant_id, count(*)::BIGINT AS r, sum(score) AS k,
                 bool_and(score = 0 OR score = 1) AS binary,
                 CASE WHEN bool_and(score = 0 OR score = 1) THEN NULL
                      ELSE list(score ORDER BY replicate) END AS scores
          FROM response_codes
          WHERE model_id IN (SELECT model_id FROM models WHERE benchmark = ?)
          GROUP BY model_id, item_key, variant_id) c
    JOIN models m ON m.model_id = c.model_id
    JOIN items i ON i.item_key = c.item_key
    JOIN variants v ON v.variant_id = c.variant_id
    ORDER BY m.model, i.item_id, v.variant"""


def read_variant_counts(con, benchmark: str) -> pl.DataFrame:
    """The benchmark's responses summed per (model, item_id, variant).

    Returns
    -------
    polars.DataFrame
        One row per (model, item_id, variant), sorted by them: ``r`` replicates, ``k`` and ``s``
        the sum of their scores, ``binary`` whether every score is 0 or 1, and ``scores`` the
        replicates' scores in replicate order where not binary (null otherwise); no rows for an
        unknown benchmark.
    """
    return query_pl(con, _READ, [benchmark])
