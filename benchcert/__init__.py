"""benchcert: what benchmark results actually support.

The code lives in three top-level folders installed as subpackages:
``benchcert.stats`` (pure numpy/scipy formulas), ``benchcert.tasks`` (I/O and Prefect
tasks: store, adapters, matrices, analyses, artifacts) and ``benchcert.flows``
(Prefect flows and the CLI).  Dependencies point one way: flows -> tasks -> stats.
"""

__version__ = "0.1.0"

#: Version of the artifact and canonical-row JSON Schemas.  Bump the major part on any
#: change that breaks a reader of manifest.json / summary.json / index.json.
SCHEMA_VERSION = "1.2"  # 1.1: summary.changes; 1.2 (additive): response-row.human_score, summary.human_scale,
#                        judge_agreement, headline, ranks, n_unscored, headline_rule, unscored_convention
