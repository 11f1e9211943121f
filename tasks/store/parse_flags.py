"""Whether each stored response's answer could be read (``response_codes.parsed``): the read behind
the audit's parse-failure analysis (tasks/parsing/analysis.py).

``parsed`` is false where the log says the model's answer could not be extracted (MMLU-Pro's
``pred: null``, an lm-evaluation-harness filter that matched nothing, inspect_ai's NOANSWER, or a
mapping such as ``--map "parsed=pred IS NOT NULL"``), true where it was read, NULL where the log
does not say (and for every response stored before store version 4).
"""

from __future__ import annotations

import polars as pl

from benchcert.tasks.store.connection import query_pl

__all__ = ["PARSE_SCHEMA", "has_parse_flags", "load_parse_flags"]

#: One row per (model, item) of a benchmark's variant: its responses (replicates), how many carry a
#: flag and how many are unparsed, the item's score with the unparsed ones counted wrong (0) and
#: its score over the parsed ones only (null when none is), and the item's subject.
PARSE_SCHEMA = {"model": pl.String, "item_key": pl.Int64, "subject": pl.String, "n": pl.Int64,
                "n_flagged": pl.Int64, "n_unparsed": pl.Int64, "score_wrong": pl.Float64,
                "score_parsed": pl.Float64}

_WHERE = """FROM response_codes r JOIN models m ON m.model_id = r.model_id
    JOIN variants v ON v.variant_id = r.variant_id
    WHERE m.benchmark = ? AND v.variant = ?"""

_READ = f"""
    SELECT m.model, r.item_key::BIGINT AS item_key, any_value(i.subject) AS subject, count(*) AS n,
           count(r.parsed) AS n_flagged, count(*) FILTER (WHERE NOT r.parsed) AS n_unparsed,
           avg(CASE WHEN r.parsed IS NOT DISTINCT FROM false THEN 0.0 ELSE r.score END) AS score_wrong,
           avg(r.score) FILTER (WHERE r.parsed IS DISTINCT FROM false) AS score_parsed
    FROM response_codes r JOIN models m ON m.model_id = r.model_id
    JOIN variants v ON v.variant_id = r.variant_id
    JOIN items i ON i.item_key = r.item_key
    WHERE m.benchmark = ? AND v.variant = ? AND m.model IN (SELECT unnest(?::VARCHAR[]))
    GROUP BY m.model, r.item_key ORDER BY m.model, r.item_key"""


def has_parse_flags(con, benchmark: str, variant: str) -> bool:
    """Whether some response of the benchmark's variant says whether its answer was read."""
    return con.execute(f"SELECT count(*) FROM (SELECT 1 {_WHERE} AND r.parsed IS NOT NULL LIMIT 1)",
                       [benchmark, variant]).fetchall()[0][0] > 0


def load_parse_flags(con, benchmark: str, variant: str, models: list[str]) -> pl.DataFrame:
    """Each (model, item) of ``models`` in the benchmark's variant (:data:`PARSE_SCHEMA`); empty when
    no response of the variant carries a parse flag."""
    if not has_parse_flags(con, benchmark, variant):
        return pl.DataFrame(schema=PARSE_SCHEMA)
    return query_pl(con, _READ, [benchmark, variant, list(models)]).cast(PARSE_SCHEMA)
