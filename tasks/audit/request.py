"""What an audit is asked to do: one validated, frozen request passed from the command line or a
deployment through the flows (flows/audit.py, flows/checkpoint.py, flows/nightly.py) and the
in-process runner (flows/runs.py) down to the analyses, which read its :class:`AuditConfig`.

A pydantic model, so that Prefect validates it as a flow parameter and records it as JSON on
the flow run.
"""

from __future__ import annotations

import os

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from benchcert.tasks.audit.contract import DEFAULT_HIERARCHY, AuditConfig
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT


def _path_text(value):
    # Callers hold paths as Path objects; the flows record and pass them on as text.
    return os.fspath(value) if isinstance(value, os.PathLike) else value


#: A path, given as text or as a path object, held as text.
PathText = Annotated[str, BeforeValidator(_path_text)]


class AuditRequest(BaseModel):
    """One benchmark's audit: where to read and write, and the analyses' settings.

    Attributes
    ----------
    db, benchmark
        The store and the benchmark in it.
    artifacts_root
        Where the run's folder is written (``<artifacts_root>/<benchmark>/<run_id>``).
    alpha
        1 - confidence level, in (0, 1).
    variant
        The prompt variant to audit (None: the store's default for the benchmark).
    lock_timeout
        Seconds to wait for the store's lock.
    hierarchy, subject_weights, baseline, environments, all_pairs
        The analyses' settings (see :class:`~benchcert.tasks.audit.contract.AuditConfig`).
    options
        The analyses' own options by name, as JSON (e.g. ``{"perturbation": {"method": "widened"}}``):
        each is declared and checked by the analysis that reads it (its registry entry's ``options``,
        tasks/audit/analyses.py); an option no analysis declares is refused.
    webhook_url
        Where a run that finds regressions POSTs them (None: nowhere).
    export_dir, dask_block_models
        The Dask path: read the benchmark from this Parquet export and send the per-model work
        out in blocks of this many models (tasks/audit/distributed.py).
    out_of_core
        Do not hold the score matrix: read it from the store by blocks of ``dask_block_models``
        models (default 500) when an analysis asks (tasks/store/blocked.py; 0/1 scores only).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    db: PathText
    benchmark: str
    artifacts_root: PathText = "artifacts"
    alpha: float = 0.05
    variant: str | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    hierarchy: tuple[str, ...] = DEFAULT_HIERARCHY
    subject_weights: dict[str, float] | None = None
    baseline: str | None = None
    webhook_url: str | None = None
    environments: dict | None = None
    all_pairs: bool = False
    export_dir: PathText | None = None
    dask_block_models: int | None = None
    out_of_core: bool = False
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("hierarchy", mode="before")
    @classmethod
    def _default_hierarchy(cls, value):
        return DEFAULT_HIERARCHY if value is None else value

    @model_validator(mode="after")
    def _settings_valid(self) -> AuditRequest:
        # AuditConfig holds the rules for alpha, hierarchy and weights, each analysis those of its
        # options: one home for each.
        self.audit_config()
        return self

    def audit_config(self) -> AuditConfig:
        """The settings the analyses read, their options parsed by the analyses that declare them."""
        options = {}
        if self.options:  # (the registry imports every analysis: only when an option asks for it)
            from benchcert.tasks.audit.analyses import parse_options

            options = parse_options(self.options)
        return AuditConfig(alpha=self.alpha, variant=self.variant, hierarchy=self.hierarchy,
                           subject_weights=self.subject_weights, baseline=self.baseline, db=self.db,
                           environments=self.environments, all_pairs=self.all_pairs, options=options)

    def run_config(self) -> dict:
        """The request as the run catalog and manifest.json record it (``analyses`` is filled in by the run)."""
        return {"db": self.db, "benchmark": self.benchmark, "alpha": self.alpha, "variant": self.variant,
                "artifacts_root": self.artifacts_root, "analyses": None, "hierarchy": list(self.hierarchy),
                "subject_weights": self.subject_weights, "baseline": self.baseline,
                "webhook": bool(self.webhook_url), "environments": self.environments, "all_pairs": self.all_pairs,
                # The artifacts are the same either way; the record says how the run read the store.
                "out_of_core": self.out_of_core,
                # (only when given: the record of a run without options is as it was)
                **({"options": self.options} if self.options else {})}


class CheckpointRequest(BaseModel):
    """A checkpoint's audit (flows/checkpoint.py): ingest the logs of ``model`` at ``logs``, then
    audit as ``audit`` asks, with a verdict against ``audit.baseline`` when it names one.

    Attributes
    ----------
    model
        The checkpoint's model id (the event's resource id).
    logs
        A log file or folder; it must lie inside ``inbox`` or one of ``allowed_logs``.
    audit
        The audit of the benchmark the logs belong to (its db, benchmark, artifacts root,
        alpha, baseline, webhook and lock timeout).
    mapping
        Column names for the logs (None: the benchmark's inbox ``mapping.toml``, else the
        canonical names).
    inbox, allowed_logs
        Where logs may be read from.
    dashboard_dir
        Rebuild the dashboard here after the audit (None: no dashboard).
    question
        The verdict's question: "items" (default) or "new-subjects" (``compare --question``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    model: str
    logs: PathText
    audit: AuditRequest
    mapping: dict | None = None
    inbox: PathText | None = None
    dashboard_dir: PathText | None = None
    allowed_logs: tuple[PathText, ...] = ()
    question: Literal["items", "new-subjects"] = "items"

    @field_validator("allowed_logs", mode="before")
    @classmethod
    def _none_is_empty(cls, value):
        return () if value is None else value
