"""The audit report's own sections, around the analyses': the interval plots, warnings, sources."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.render.report import Section, table_html


def intervals_section(alpha: float, headline_plot: str | None, macro_plot: str, pooled_plot: str) -> Section:
    """The first section: the headline interval per model first (``headline_plot``, SVG; the question the
    headline rule chose is named in its legend), then every method's interval, ``macro_plot`` and
    ``pooled_plot``; models in the report's one order (pooled score, best first, ties by name)."""
    level = f"{100 * (1 - alpha):g}%"
    head = ("" if headline_plot is None else
            f"<p>{level} headline intervals: for each weighting the interval the headline rule chose (its question "
            "is in the legend; the rule is in the next section). Models by pooled score, best first.</p>"
            + headline_plot + "<h3>Every method</h3>")
    return Section(
        title="Interval per model",
        anchor="intervals",
        html=(head + f"<p>{level} intervals for each model's macro and pooled score, one colour per method. "
              "Wider is not worse: it is what the data support once dependence between items is allowed.</p>"
              + macro_plot + pooled_plot),
    )


def verdicts_section(benchmark: str, verdicts: list[dict]) -> Section:
    """The run's checkpoint verdicts, each with its question, gap, interval and (when open) what would resolve
    it (the rows of the dashboard, :mod:`benchcert.tasks.render.verdict_rows`)."""
    from benchcert.tasks.render.verdict_rows import verdict_view, verdicts_table

    return Section(title="Checkpoint verdicts", anchor="verdicts",
                   html=("<p>Each verdict as recorded: the question it answers, the gap (candidate − baseline), "
                         "the interval of the test that decides it (named; the look's fixed-sample interval beside it "
                         "for information), and for an open verdict what would resolve it.</p>"
                         + verdicts_table([verdict_view(v, benchmark) for v in verdicts])))


def warnings_section(warnings: list[str]) -> Section:
    """The run's warnings, one row each (escaped by :func:`table_html`)."""
    return Section(title="Warnings", anchor="warnings", html=table_html(pl.DataFrame({"warning": warnings})))


def sources_section(sources: pl.DataFrame) -> Section:
    """The log files the run's responses came from."""
    return Section(title="Sources", anchor="sources", html=table_html(sources))
