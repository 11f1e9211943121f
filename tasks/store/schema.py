"""Every table of the store, its migrations and the store version: the one place that defines them.

When each table is created
--------------------------
* **At store creation** (the first :func:`~benchcert.tasks.store.connection.open_store` for
  writing, through :func:`create_core`): the core tables every store has - ``meta`` (the
  store version), ``sources``, the code dictionaries ``models``/``variants``/``items``,
  ``response_codes``, ``rejects``, ``runs``, ``run_results`` - the ``source_ids`` sequence and
  the ``responses`` view. ``STORE_VERSION`` names this set; a store of another version is
  upgraded (version 1, :func:`migrate_v1`; version 2, :func:`migrate_v2` then :func:`migrate_v3`;
  version 3, :func:`migrate_v3`) or refused (a newer one).
* **On first use**, by the feature that writes them, through :func:`ensure_tables` - inside
  the writer's transaction where it has one: ``verdicts``/``verdict_items`` (a recorded
  checkpoint verdict), ``environment_plans``/``environment_plan_draws`` (a recorded
  certification plan), ``subsets``/``subset_items`` (a recorded subset), ``option_probs`` (an
  ingest that carried option probabilities), ``benchmark_settings`` (a default variant set),
  ``human_label_changes`` (human labels replaced by ``ingest --replace-human-labels``, the old
  value kept), ``suites`` (a suite defined) and ``suite_verdicts`` (a recorded suite verdict).
  A store that never used a feature does not have its tables, so readers ask
  :func:`has_tables` first and treat a missing table as "nothing recorded"; the feature tables
  do not change the store version, and a store written by an earlier benchcert opens and
  works unchanged.

Migrations
----------
* Store version 1 kept responses as text: :func:`migrate_v1` moves them to codes (run once,
  when such a store is opened).
* Store version 2 had no ``human_score`` column in ``response_codes`` (the optional human score
  of a judge-scored response, issue #28): :func:`migrate_v2` adds it (NULL for every stored
  response) and the view's column, when such a store is opened; nothing else changes.
* Store version 3 had no ``parsed`` column in ``response_codes`` (whether the response's answer
  could be read from the model's output, issue #39): :func:`migrate_v3` adds it (NULL, not known,
  for every stored response) and the view's column; nothing stored changes.
* Columns added to a feature table after it first shipped are in ``COLUMN_MIGRATIONS``
  (``ALTER TABLE ... ADD COLUMN IF NOT EXISTS``; old rows read NULL); :func:`ensure_tables`
  applies them every time it creates (or finds) the table, so an older store gains them at
  the feature's next write.

Scratch tables of one connection (``CREATE OR REPLACE TEMP TABLE ...``) are not part of the
store: they stay with the ``tasks/store/`` module that stages through them, and no module
outside ``tasks/store/`` makes one (tests/project/test_layout_store.py; ingest's staging
tables are allowed there until its SQL moves into the store, issue #34 point 4).
"""

from __future__ import annotations

import duckdb

__all__ = ["STORE_VERSION", "RESPONSES_VIEW", "CORE_DDL", "TABLES", "COLUMN_MIGRATIONS", "create_core",
           "migrate_v1", "migrate_v2", "migrate_v3", "ensure_tables", "has_tables", "has_column", "stored_version",
           "table_ddl"]

STORE_VERSION = "4"

#: The canonical responses, as every reader sees them.
RESPONSES_VIEW = """CREATE OR REPLACE VIEW responses AS
    SELECT m.benchmark, m.model, i.item_id, v.variant, r.replicate, r.score, r.source_id, r.line, r.human_score,
           r.parsed
    FROM response_codes r
    JOIN models m ON m.model_id = r.model_id
    JOIN items i ON i.item_key = r.item_key
    JOIN variants v ON v.variant_id = r.variant_id"""

_SOURCE_IDS = "CREATE SEQUENCE IF NOT EXISTS source_ids START 1"

#: Every table of the store by name: its ``CREATE TABLE IF NOT EXISTS`` statement.
TABLES: dict[str, str] = {
    # --- core: created with the store --------------------------------------------------
    "meta": "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    "sources": """CREATE TABLE IF NOT EXISTS sources (
        source_id BIGINT PRIMARY KEY,
        benchmark VARCHAR,
        path VARCHAR NOT NULL,
        sha256 VARCHAR NOT NULL,
        format VARCHAR NOT NULL,
        config VARCHAR NOT NULL,
        rows_read BIGINT NOT NULL,
        rows_accepted BIGINT NOT NULL,
        rows_added BIGINT NOT NULL,
        rows_rejected BIGINT NOT NULL,
        status VARCHAR NOT NULL,
        ingested_at TIMESTAMP NOT NULL)""",
    "models": """CREATE TABLE IF NOT EXISTS models (
        model_id INTEGER NOT NULL,
        benchmark VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        source_id BIGINT NOT NULL)""",
    "variants": """CREATE TABLE IF NOT EXISTS variants (
        variant_id INTEGER NOT NULL,
        benchmark VARCHAR NOT NULL,
        variant VARCHAR NOT NULL,
        source_id BIGINT NOT NULL)""",
    "response_codes": """CREATE TABLE IF NOT EXISTS response_codes (
        model_id INTEGER NOT NULL,
        item_key INTEGER NOT NULL,
        variant_id INTEGER NOT NULL,
        replicate BIGINT NOT NULL,
        score DOUBLE NOT NULL,
        source_id BIGINT NOT NULL,
        line BIGINT NOT NULL,
        human_score DOUBLE,
        parsed BOOLEAN)""",
    "items": """CREATE TABLE IF NOT EXISTS items (
        benchmark VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        subject VARCHAR NOT NULL,
        domain VARCHAR NOT NULL,
        source_id BIGINT NOT NULL,
        line BIGINT NOT NULL,
        item_key INTEGER NOT NULL)""",
    "rejects": """CREATE TABLE IF NOT EXISTS rejects (
        source_id BIGINT NOT NULL,
        path VARCHAR NOT NULL,
        line BIGINT,
        field VARCHAR NOT NULL,
        reason VARCHAR NOT NULL,
        raw VARCHAR)""",
    "runs": """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY,
        benchmark VARCHAR NOT NULL,
        flow_run_id VARCHAR,
        status VARCHAR NOT NULL,
        started_at TIMESTAMP NOT NULL,
        finished_at TIMESTAMP,
        run_dir VARCHAR,
        n_models BIGINT,
        n_items BIGINT,
        config VARCHAR,
        error VARCHAR)""",
    "run_results": """CREATE TABLE IF NOT EXISTS run_results (
        run_id VARCHAR NOT NULL,
        benchmark VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        metric VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        estimate DOUBLE,
        lower DOUBLE,
        upper DOUBLE,
        half_width DOUBLE,
        alpha DOUBLE)""",
    # --- feature tables: created on first use (ensure_tables) ----------------------------
    # Checkpoint verdicts (tasks/compare/verdicts.py): one row per look of a question, and the
    # ledger of items with the difference each had at the look where it entered.
    "verdicts": """CREATE TABLE IF NOT EXISTS verdicts (
        benchmark VARCHAR NOT NULL,
        variant VARCHAR NOT NULL,
        baseline VARCHAR NOT NULL,
        candidate VARCHAR NOT NULL,
        look BIGINT NOT NULL,
        recorded_at TIMESTAMP NOT NULL,
        alpha DOUBLE NOT NULL,
        first_look_share DOUBLE NOT NULL,
        verdict VARCHAR NOT NULL,
        decided_by VARCHAR,
        decided_at_look BIGINT,
        fixed_verdict VARCHAR NOT NULL,
        method VARCHAR NOT NULL,
        gap DOUBLE, lower DOUBLE, upper DOUBLE, se DOUBLE, p_value DOUBLE, p_exact DOUBLE,
        hoeffding_lower DOUBLE, hoeffding_upper DOUBLE, mde DOUBLE, power DOUBLE,
        n_shared BIGINT, n_only_baseline BIGINT, n_only_candidate BIGINT, n_excluded BIGINT,
        n_new BIGINT, n_sequential BIGINT,
        log_e_improved DOUBLE, log_e_regressed DOUBLE, anytime_p DOUBLE, cs_lower DOUBLE, cs_upper DOUBLE,
        first_p_value DOUBLE, first_gap DOUBLE, question VARCHAR, estimand VARCHAR, first_method VARCHAR,
        first_lower DOUBLE, first_upper DOUBLE,
        PRIMARY KEY (benchmark, variant, baseline, candidate, look))""",
    "verdict_items": """CREATE TABLE IF NOT EXISTS verdict_items (
        benchmark VARCHAR NOT NULL,
        variant VARCHAR NOT NULL,
        baseline VARCHAR NOT NULL,
        candidate VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        look BIGINT NOT NULL,
        d DOUBLE NOT NULL)""",
    # Certification plans (tasks/certify/service.py): the plan and its drawn items.
    "environment_plans": """CREATE TABLE IF NOT EXISTS environment_plans (
        plan_id VARCHAR PRIMARY KEY,
        benchmark VARCHAR NOT NULL,
        level VARCHAR NOT NULL,
        protocol VARCHAR NOT NULL,
        epsilon DOUBLE NOT NULL,
        delta DOUBLE NOT NULL,
        seed BIGINT NOT NULL,
        spec VARCHAR NOT NULL,
        design VARCHAR NOT NULL,
        n_draws BIGINT NOT NULL,
        n_items BIGINT NOT NULL,
        created_at TIMESTAMP NOT NULL)""",
    "environment_plan_draws": """CREATE TABLE IF NOT EXISTS environment_plan_draws (
        plan_id VARCHAR NOT NULL,
        draw BIGINT NOT NULL,
        item_id VARCHAR NOT NULL,
        subject VARCHAR NOT NULL,
        domain VARCHAR NOT NULL,
        stratum VARCHAR NOT NULL)""",
    # Subset manifests (tasks/subsample/subsets.py).
    "subsets": """CREATE TABLE IF NOT EXISTS subsets (
        subset_id VARCHAR PRIMARY KEY,
        benchmark VARCHAR NOT NULL,
        n_items BIGINT NOT NULL,
        n_benchmark BIGINT NOT NULL,
        seed BIGINT NOT NULL,
        stratified BOOLEAN NOT NULL,
        strata VARCHAR,
        created_at TIMESTAMP NOT NULL)""",
    "subset_items": """CREATE TABLE IF NOT EXISTS subset_items (
        subset_id VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        subject VARCHAR NOT NULL,
        domain VARCHAR NOT NULL)""",
    # Predicted option probabilities kept beside the responses (tasks/ingest/adapters/native.py).
    "option_probs": """CREATE TABLE IF NOT EXISTS option_probs (
        benchmark VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        variant VARCHAR NOT NULL,
        replicate BIGINT NOT NULL,
        probs DOUBLE[] NOT NULL,
        source_id BIGINT NOT NULL,
        line BIGINT NOT NULL,
        label INTEGER)""",
    # Suites: a named list of benchmarks with weights (tasks/store/suites.py; issue #35).
    "suites": """CREATE TABLE IF NOT EXISTS suites (
        suite VARCHAR NOT NULL,
        position INTEGER NOT NULL,
        benchmark VARCHAR NOT NULL,
        weight DOUBLE NOT NULL,
        defined_at TIMESTAMP NOT NULL,
        PRIMARY KEY (suite, benchmark))""",
    # Recorded suite verdicts (compare --suite --record, notify-checkpoint --suite): one row per look.
    "suite_verdicts": """CREATE TABLE IF NOT EXISTS suite_verdicts (
        suite VARCHAR NOT NULL,
        baseline VARCHAR NOT NULL,
        candidate VARCHAR NOT NULL,
        look BIGINT NOT NULL,
        recorded_at TIMESTAMP NOT NULL,
        alpha DOUBLE NOT NULL,
        question VARCHAR NOT NULL,
        regressed_somewhere BOOLEAN NOT NULL,
        n_improved BIGINT NOT NULL,
        n_regressed BIGINT NOT NULL,
        score_gap DOUBLE, score_lower DOUBLE, score_upper DOUBLE, score_verdict VARCHAR,
        document VARCHAR NOT NULL,
        PRIMARY KEY (suite, baseline, candidate, look))""",
    # Per-benchmark settings (the default variant; tasks/store/connection.py).
    "benchmark_settings": """CREATE TABLE IF NOT EXISTS benchmark_settings (
        benchmark VARCHAR PRIMARY KEY,
        default_variant VARCHAR,
        updated_at TIMESTAMP NOT NULL)""",
    # Human labels an ingest replaced (``ingest --replace-human-labels``; tasks/store/responses.py): the
    # response, its old and new human score, the stored response's source and line (its judge score's
    # file), and the source and line that replaced the label. Nothing is lost.
    "human_label_changes": """CREATE TABLE IF NOT EXISTS human_label_changes (
        benchmark VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        item_id VARCHAR NOT NULL,
        variant VARCHAR NOT NULL,
        replicate BIGINT NOT NULL,
        old_human_score DOUBLE NOT NULL,
        stored_source_id BIGINT NOT NULL,
        stored_line BIGINT NOT NULL,
        new_human_score DOUBLE NOT NULL,
        new_source_id BIGINT NOT NULL,
        new_line BIGINT NOT NULL,
        replaced_at TIMESTAMP NOT NULL)""",
}

#: Columns added after a feature table first shipped; stores written before gain them (NULL for old rows).
COLUMN_MIGRATIONS: dict[str, tuple[str, ...]] = {
    "verdicts": ("ALTER TABLE verdicts ADD COLUMN IF NOT EXISTS question VARCHAR",
                 "ALTER TABLE verdicts ADD COLUMN IF NOT EXISTS estimand VARCHAR",
                 # the first look's directional test (NULL: recorded before the betting bounds,
                 # by a test without a finite-sample guarantee)
                 "ALTER TABLE verdicts ADD COLUMN IF NOT EXISTS first_method VARCHAR",
                 # the first-look test's interval, which decides a "first_look" verdict (NULL: recorded before it
                 # was stored, or a question with no separate first look)
                 "ALTER TABLE verdicts ADD COLUMN IF NOT EXISTS first_lower DOUBLE",
                 "ALTER TABLE verdicts ADD COLUMN IF NOT EXISTS first_upper DOUBLE"),
    # the correct option (NULL: not known)
    "option_probs": ("ALTER TABLE option_probs ADD COLUMN IF NOT EXISTS label INTEGER",),
}

#: A new store's statements, in order (version 4).
CORE_DDL: tuple[str, ...] = (
    TABLES["meta"], _SOURCE_IDS, TABLES["sources"], TABLES["models"], TABLES["variants"], TABLES["response_codes"],
    TABLES["items"], RESPONSES_VIEW, TABLES["rejects"], TABLES["runs"], TABLES["run_results"])


def table_ddl(name: str) -> str:
    """The ``CREATE TABLE IF NOT EXISTS`` statement of table ``name`` (KeyError if the store has no such table)."""
    return TABLES[name]


def has_tables(con: duckdb.DuckDBPyConnection, *names: str) -> bool:
    """Whether the store holds every table in ``names`` (as a table, or as a view: an export's
    connection, tasks/store/export.py, holds its tables as views over Parquet files)."""
    # Looked up in the catalog: a failing SELECT on a new file costs more than the whole query.
    n = con.execute("SELECT count(DISTINCT name) FROM (SELECT table_name AS name FROM duckdb_tables() "
                    "WHERE schema_name = 'main' UNION ALL SELECT view_name FROM duckdb_views() "
                    "WHERE schema_name = 'main' AND NOT internal) WHERE name IN (SELECT unnest(?::VARCHAR[]))",
                    [list(names)]).fetchall()[0][0]
    return n == len(set(names))


def has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether the store's table ``table`` has the column ``column`` (False when there is no such table)."""
    # A feature table that shipped before one of its COLUMN_MIGRATIONS lacks the column until
    # the feature's next write; readers of an older store ask first.
    n = con.execute("SELECT count(*) FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = ? "
                    "AND column_name = ?", [table, column]).fetchall()[0][0]
    return n > 0


def restart_source_ids(con: duckdb.DuckDBPyConnection, following: int) -> None:
    """Make ``source_ids`` give ``following`` next (ingest gives back the ids a rolled-back file took).

    DDL cannot take a bound parameter; ``following`` is an integer, checked as one.
    """
    con.execute(f"CREATE OR REPLACE SEQUENCE source_ids START WITH {int(following)}")


def stored_version(con: duckdb.DuckDBPyConnection) -> str | None:
    """The store version recorded in ``meta``, or None when there is no meta table or no version."""
    if not has_tables(con, "meta"):
        return None
    rows = con.execute("SELECT value FROM meta WHERE key = 'store_version'").fetchall()
    return rows[0][0] if rows else None


def create_core(con: duckdb.DuckDBPyConnection) -> None:
    """Create a new store's tables, sequence and view and record its version (call inside a transaction)."""
    for stmt in CORE_DDL:
        con.execute(stmt)
    con.execute("INSERT INTO meta VALUES ('store_version', ?)", [STORE_VERSION])


def ensure_tables(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    """Create the tables ``names`` if missing and bring their columns up to date (on a feature's first use)."""
    for name in names:
        con.execute(TABLES[name])
        for stmt in COLUMN_MIGRATIONS.get(name, ()):
            con.execute(stmt)


def migrate_v1(con: duckdb.DuckDBPyConnection) -> int:
    """Move a version-1 store (responses as text) to codes; return how many responses did not carry over.

    Call inside a transaction and roll it back when the count is not 0: the old tables are
    dropped only when every response was moved.
    """
    n_before = con.execute("SELECT count(*) FROM responses").fetchall()[0][0]
    con.execute("ALTER TABLE responses RENAME TO responses_v1")
    con.execute("ALTER TABLE items RENAME TO items_v1")
    for stmt in CORE_DDL:
        if stmt is not RESPONSES_VIEW:
            con.execute(stmt)
    con.execute("""INSERT INTO items SELECT benchmark, item_id, subject, domain, source_id, line,
                   row_number() OVER (ORDER BY benchmark, item_id)::INTEGER FROM items_v1""")
    con.execute("""INSERT INTO models SELECT row_number() OVER (ORDER BY benchmark, model)::INTEGER, benchmark, model,
                   min(source_id) FROM responses_v1 GROUP BY benchmark, model""")
    con.execute("""INSERT INTO variants SELECT row_number() OVER (ORDER BY benchmark, variant)::INTEGER, benchmark,
                   variant, min(source_id) FROM responses_v1 GROUP BY benchmark, variant""")
    con.execute("""INSERT INTO response_codes (model_id, item_key, variant_id, replicate, score, source_id, line)
                   SELECT m.model_id, i.item_key, v.variant_id, r.replicate, r.score, r.source_id, r.line
                   FROM responses_v1 r
                   JOIN models m ON m.benchmark = r.benchmark AND m.model = r.model
                   JOIN items i ON i.benchmark = r.benchmark AND i.item_id = r.item_id
                   JOIN variants v ON v.benchmark = r.benchmark AND v.variant = r.variant""")
    n_lost = n_before - con.execute("SELECT count(*) FROM response_codes").fetchall()[0][0]
    if n_lost:
        return n_lost
    con.execute("DROP TABLE responses_v1")
    con.execute("DROP TABLE items_v1")
    con.execute(RESPONSES_VIEW)
    con.execute("UPDATE meta SET value = ? WHERE key = 'store_version'", [STORE_VERSION])
    return 0


def migrate_v2(con: duckdb.DuckDBPyConnection) -> None:
    """Bring a version-2 store to version 3: ``response_codes`` gains the nullable ``human_score``
    column (NULL for every stored response); :func:`migrate_v3` follows in the same transaction
    (call inside one)."""
    con.execute("ALTER TABLE response_codes ADD COLUMN IF NOT EXISTS human_score DOUBLE")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'store_version'")


def migrate_v3(con: duckdb.DuckDBPyConnection) -> None:
    """Bring a version-3 store to version 4: ``response_codes`` gains the nullable ``parsed`` column
    (NULL, not known, for every stored response: no row, score or label changes) and the
    ``responses`` view shows it (call inside a transaction)."""
    con.execute("ALTER TABLE response_codes ADD COLUMN IF NOT EXISTS parsed BOOLEAN")
    con.execute(RESPONSES_VIEW)
    con.execute("UPDATE meta SET value = ? WHERE key = 'store_version'", [STORE_VERSION])
