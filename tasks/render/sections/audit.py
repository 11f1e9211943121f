"""The audit report's own sections, around the analyses': the interval plots, warnings, sources."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.render.report import Section, table_html


def intervals_section(alpha: float, macro_plot: str, pooled_plot: str) -> Section:
    """The first section: every method's interval per model, ``macro_plot`` then ``pooled_plot`` (SVG)."""
    level = f"{100 * (1 - alpha):g}%"
    return Section(
        title="Interval per model",
        anchor="intervals",
        html=(f"<p>{level} intervals for each model's macro and pooled score, one colour per method. "
              "Wider is not worse: it is what the data support once dependence between items is allowed.</p>"
              + macro_plot + pooled_plot),
    )


def warnings_section(warnings: list[str]) -> Section:
    """The run's warnings, one row each (escaped by :func:`table_html`)."""
    return Section(title="Warnings", anchor="warnings", html=table_html(pl.DataFrame({"warning": warnings})))


def sources_section(sources: pl.DataFrame) -> Section:
    """The log files the run's responses came from."""
    return Section(title="Sources", anchor="sources", html=table_html(sources))
