"""benchcert: what benchmark results actually support.

The Python API (docs/python.md)::

    import benchcert as bc
    store = bc.Store("results.duckdb")                  # or bc.Store(): a throw-away store
    store.ingest(frame, benchmark="mmlu_pro", mapping={"item_id": "question", "score": "correct"})
    result = store.audit("mmlu_pro")                    # AuditResult: result.models, .to_polars()
    store.compare("model-b", "model-a", benchmark="mmlu_pro")

or in one call, ``bc.audit(frame, model=..., item=..., subject=..., score=...)``.  Every result is a
frozen, typed object with ``to_polars()``, ``to_pandas()`` and a Jupyter view; the command line
renders the same objects.

The code lives in three top-level folders installed as subpackages:
``benchcert.stats`` (pure numpy/scipy formulas), ``benchcert.tasks`` (I/O and Prefect
tasks: store, adapters, matrices, analyses, artifacts) and ``benchcert.flows``
(Prefect flows and the CLI).  Dependencies point one way: flows -> tasks -> stats.
"""

__version__ = "0.1.0"

#: Version of the artifact and canonical-row JSON Schemas.  Bump the major part on any
#: change that breaks a reader of manifest.json / summary.json / index.json.
SCHEMA_VERSION = "1.3"  # 1.1: summary.changes; 1.2 (additive): response-row.human_score, summary.human_scale,
#                        judge_agreement, headline, ranks, n_unscored, headline_rule, unscored_convention,
#                        item_analysis; 1.3 (additive): response-row.parsed, summary.parse_failures

#: The public names; each is loaded on first use, so ``import benchcert`` (and the command line,
#: which reads ``__version__``) stays light.
__all__ = ["Store", "audit", "example_frame", "example_store", "AuditResult", "ComparisonResult", "ComparisonRow", "GapInterval",
           "IngestResult", "IngestedFile", "IngestRefused", "PerturbationAudit", "VariantRow", "SuiteResult",
           "UserError"]

_HOMES = {"Store": "benchcert._store", "IngestResult": "benchcert._store", "IngestedFile": "benchcert._store",
          "IngestRefused": "benchcert._store", "audit": "benchcert._oneshot", "example_frame": "benchcert._oneshot",
          "example_store": "benchcert._oneshot",
          "AuditResult": "benchcert.tasks.audit.audit_result", "ComparisonResult": "benchcert.tasks.compare.service",
          "ComparisonRow": "benchcert.tasks.compare.rows", "GapInterval": "benchcert.tasks.compare.rows",
          "PerturbationAudit": "benchcert.tasks.perturbation.service",
          "VariantRow": "benchcert.tasks.perturbation.rows", "SuiteResult": "benchcert.tasks.compare.suite",
          "UserError": "benchcert.tasks.errors"}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'benchcert' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
