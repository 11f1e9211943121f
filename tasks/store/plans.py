"""Recorded certification plans (tables ``environment_plans`` and ``environment_plan_draws``): the SQL of
tasks/certify/service.py.

The tables are made on a plan's first recording (:func:`~benchcert.tasks.store.schema.ensure_tables`);
a store that never recorded one has neither, and reads find nothing.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from benchcert.tasks.store import schema
from benchcert.tasks.store.connection import query_pl
from benchcert.tasks.store.recorded import RecordTables, record_once

__all__ = ["PLAN_TABLES", "PLAN_COLUMNS", "record_plan", "read_plan", "plan_ids", "plan_draws"]

#: Created on the first recorded plan (tasks/store/schema.py).
PLAN_TABLES = ("environment_plans", "environment_plan_draws")

#: The columns of a plan's row in ``environment_plans``, in the table's order.
PLAN_COLUMNS = ("plan_id", "benchmark", "level", "protocol", "epsilon", "delta", "seed", "spec", "design",
                "n_draws", "n_items", "created_at")

#: The keys of :func:`read_plan`'s answer, in its SELECT's order.
_READ_COLUMNS = ("plan_id", "benchmark", "level", "protocol", "epsilon", "delta", "seed", "spec", "design")

_RECORD = RecordTables(PLAN_TABLES[0], "plan_id", PLAN_COLUMNS, PLAN_TABLES[1],
                       ("draw", "item_id", "subject", "domain", "stratum"))


def record_plan(con, head: dict, draws: pl.DataFrame) -> dt.datetime:
    """Record a plan once, in one transaction (:func:`~benchcert.tasks.store.recorded.record_once`):
    its row ``head``, a value for each of :data:`PLAN_COLUMNS` (``spec`` and ``design`` as JSON
    text), and its ``draws`` (draw, item_id, subject, domain, stratum). A plan id recorded before
    keeps its row, draws and time (the same plan is stored once); the ``created_at`` stored is
    returned."""
    return record_once(con, _RECORD, head, draws)


def read_plan(con, plan_id: str) -> dict | None:
    """The row of plan ``plan_id`` (plan_id, benchmark, level, protocol, epsilon, delta, seed, and
    the JSON texts spec and design), or None when no such plan was recorded."""
    if not schema.has_tables(con, "environment_plans"):
        return None
    rows = con.execute("SELECT plan_id, benchmark, level, protocol, epsilon, delta, seed, spec, design "
                       "FROM environment_plans WHERE plan_id = ?", [plan_id]).fetchall()
    return dict(zip(_READ_COLUMNS, rows[0])) if rows else None


def plan_ids(con, benchmark: str) -> list[str]:
    """The ids of the benchmark's recorded plans, oldest first (none when no plan was ever recorded)."""
    if not schema.has_tables(con, "environment_plans"):
        return []
    return [r[0] for r in con.execute("SELECT plan_id FROM environment_plans WHERE benchmark = ? ORDER BY created_at",
                                      [benchmark]).fetchall()]


def plan_draws(con, plan_id: str) -> pl.DataFrame:
    """The drawn items of a recorded plan (draw, item_id, subject, domain, stratum), in draw order."""
    return query_pl(con, "SELECT draw, item_id, subject, domain, stratum FROM environment_plan_draws "
                         "WHERE plan_id = ? ORDER BY draw", [plan_id])
