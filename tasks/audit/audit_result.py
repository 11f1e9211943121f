"""An audit's result as typed, frozen objects: what ``benchcert audit`` prints and the Python API returns.

The audit writes summary.json (tasks/audit/results.py); :meth:`AuditResult.from_summary` reads
that document (validated by its schema, tasks/schemas.py) into :class:`AuditResult`.  The
command line's table (:func:`benchcert.tasks.render.text.audit_table`) and the notebook view
render this object, so the terminal, the notebook and summary.json say the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from benchcert.tasks.audit.headline import headline_of
from benchcert.tasks.result_types import TableResult
from benchcert.tasks.schemas import ModelSummary, ParseFailures, Summary


def _ordered(models) -> tuple[ModelSummary, ...]:
    # The order `benchcert audit` has always printed: best macro score first, ties as summary.json lists them.
    return tuple(sorted(models, key=lambda m: -m.macro.estimate))


@dataclass(frozen=True, repr=False)
class AuditResult(TableResult):
    """One audit of one benchmark: every model's scores and headline intervals, and where the run was written.

    Attributes
    ----------
    summary : Summary
        summary.json as its frozen, validated model (tasks/schemas.py): every model's scores and
        intervals, the analyses run, warnings, verdicts, what changed since the previous run.
    run_dir : Path or None
        The run's folder (manifest.json, summary.json, tables/, report.html).

    ``benchmark``, ``variant``, ``run_id``, ``alpha``, ``n_models``, ``n_items``, ``n_subjects``,
    ``n_domains`` and ``warnings`` read the summary's fields; ``models`` lists its
    :class:`~benchcert.tasks.schemas.ModelSummary` rows best macro score first (ties in
    summary.json's order), as ``benchcert audit`` prints them.

    Examples
    --------
    >>> import benchcert as bc
    >>> result = bc.audit(bc.example_frame(), model="model", item="item", subject="subject", score="score")
    >>> [m.model for m in result.models]
    ['strong', 'weak']
    >>> result.to_polars().select("model", "n_items", "pooled").row(0)
    ('strong', 200, 0.75)
    """

    summary: Summary
    run_dir: Path | None = None

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> AuditResult:
        """The result of a summary.json document, or of the dict an audit run returns (which adds
        ``run_dir``, ``timings_s``, ``run_mode`` and ``webhook`` beside the summary's fields)."""
        known = {k: v for k, v in summary.items() if k in Summary.model_fields}
        run_dir = summary.get("run_dir")
        return cls(summary=Summary.model_validate(known), run_dir=None if run_dir is None else Path(run_dir))

    benchmark = property(lambda self: self.summary.benchmark, doc="The benchmark audited.")
    variant = property(lambda self: self.summary.variant, doc="The prompt variant audited.")
    run_id = property(lambda self: self.summary.run_id, doc="The run's id (its folder's name).")
    alpha = property(lambda self: self.summary.alpha, doc="1 - the confidence level of every interval.")
    n_models = property(lambda self: self.summary.n_models)
    n_items = property(lambda self: self.summary.n_items)
    n_subjects = property(lambda self: self.summary.n_subjects)
    n_domains = property(lambda self: self.summary.n_domains)
    warnings = property(lambda self: tuple(self.summary.warnings), doc="What the analyses said about the data.")

    @property
    def parse_failures(self) -> tuple[ParseFailures, ...]:
        """Per model, the answers that failed to parse: how many and their share, the score with them
        counted wrong and the score over parsed answers only, each with its interval (empty when no
        response of the audited variant says whether its answer parsed)."""
        return tuple(self.summary.parse_failures or ())

    @property
    def models(self) -> tuple[ModelSummary, ...]:
        """Every model's row, best macro score first (the order ``benchcert audit`` prints)."""
        return _ordered(self.summary.models)

    @property
    def report(self) -> Path | None:
        """The run's report.html (None when the run wrote no folder)."""
        return None if self.run_dir is None else self.run_dir / "report.html"

    @property
    def headline_question(self) -> str:
        """The question the macro scores' headline intervals answer (one rule for every model)."""
        heads = (headline_of(m.macro) for m in self.summary.models)
        return next((h.question for h in heads if h is not None), "new_subjects")

    def model(self, name: str) -> ModelSummary:
        """The row of model ``name``; KeyError naming the audit's models when it has none."""
        for m in self.summary.models:
            if m.model == name:
                return m
        raise KeyError(f"model {name!r} is not in this audit; it has {[m.model for m in self.models]}")

    def table(self, name: str):
        """One of the run's Parquet tables (``tables/<name>.parquet``) as a polars DataFrame."""
        import polars as pl

        if self.run_dir is None:
            raise FileNotFoundError("this result has no run folder")
        path = self.run_dir / "tables" / f"{name}.parquet"
        if "/" in name or "\\" in name or not path.is_file():
            known = sorted(p.stem for p in (self.run_dir / "tables").glob("*.parquet"))
            raise FileNotFoundError(f"{path}: no such table; the run has {known}")
        return pl.read_parquet(path)

    def to_polars(self):
        """One row per model, in :attr:`models` order: counts, pooled and macro score, the macro score's
        headline interval (with the question it answers), the rank with its simultaneous interval and,
        where the log says which answers parsed, the unparsed count and share (null otherwise; the
        scores with and without them and their intervals are under :attr:`parse_failures`)."""
        import polars as pl

        parsing = {p.model: p for p in self.parse_failures}
        rows = []
        for m in self.models:
            hd = headline_of(m.macro)
            pf = parsing.get(m.model)
            rows.append({"model": m.model, "n_items": m.n_items, "n_unscored": m.n_unscored,
                         "pooled": m.pooled.estimate, "macro": m.macro.estimate,
                         "headline_question": hd.question if hd else None,
                         "headline_method": hd.method if hd else None,
                         "headline_lower": hd.lower if hd else None, "headline_upper": hd.upper if hd else None,
                         "headline_half_width": hd.half_width if hd else None,
                         "rank": m.rank, "rank_lower": m.rank_lower, "rank_upper": m.rank_upper,
                         "tied_groups": list(m.tied_groups),
                         "n_unparsed": pf.n_unparsed if pf else None,
                         "share_unparsed": pf.share_unparsed if pf else None})
        schema = {"model": pl.String, "n_items": pl.Int64, "n_unscored": pl.Int64, "pooled": pl.Float64,
                  "macro": pl.Float64, "headline_question": pl.String, "headline_method": pl.String,
                  "headline_lower": pl.Float64, "headline_upper": pl.Float64, "headline_half_width": pl.Float64,
                  "rank": pl.Int64, "rank_lower": pl.Int64, "rank_upper": pl.Int64, "tied_groups": pl.List(pl.Int64),
                  "n_unparsed": pl.Int64, "share_unparsed": pl.Float64}
        return pl.DataFrame(rows, schema=schema)

    def __str__(self) -> str:
        from benchcert.tasks.render.text import audit_table

        return audit_table(self)

    def __repr__(self) -> str:
        return f"<AuditResult of {self._title()}>\n{self}"

    def _title(self) -> str:
        return (f"benchmark {self.benchmark!r} (variant {self.variant!r}): {self.n_models} models, {self.n_items} "
                f"items, {self.n_subjects} subjects, {self.n_domains} domains")

    def _notes(self) -> list[str]:
        level = f"{100 * (1 - self.alpha):g}%"
        notes = [f"macro score with its {level} headline interval ({self.headline_question.replace('_', ' ')})"]
        if self.report is not None:
            notes.append(f"run {self.run_id}; report: {self.report}")
        return notes + [f"warning: {w}" for w in self.warnings[:5]]

    def _chart(self) -> dict | None:
        models = self.models
        heads = [headline_of(m.macro) for m in models]
        return {"labels": [m.model for m in models],
                "series": [{"name": f"macro, headline ({self.headline_question.replace('_', ' ')})",
                            "estimate": [m.macro.estimate for m in models],
                            "lower": [h.lower if h else None for h in heads],
                            "upper": [h.upper if h else None for h in heads]}],
                "title": "Headline interval per model", "x_label": "macro score"}
