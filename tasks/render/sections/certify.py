"""The report's section of deployment environments and failure-rate bounds (certifying-capabilities paper)."""

from __future__ import annotations

import polars as pl

from benchcert.stats.failure_rates import BLACK_BOX_SENTENCE
from benchcert.tasks.render.charts import interval_plot_svg
from benchcert.tasks.render.escape import escape  # the shared escaper: NUL, bidi controls
from benchcert.tasks.render.report import Section, table_html


def section(risks: pl.DataFrame | None, failures: pl.DataFrame, alpha: float, spec_dict: dict | None,
            notes: list[str]) -> Section:
    """The report section: environment profiles (when given) and the failure-rate bounds.

    Parameters
    ----------
    risks : polars.DataFrame or None
        Table ``environment_risks`` (None without ``audit --environments``).
    failures : polars.DataFrame
        Table ``failure_rate_bounds``.
    alpha : float
        1 - confidence level.
    spec_dict : dict or None
        The parsed environments file (its ``source`` and ``level`` are shown).
    notes : list of str
        The environments' notes, one paragraph each.

    Returns
    -------
    Section
    """
    level = f"{100 * (1 - alpha):g}%"
    parts = []
    if risks is not None and risks.height:
        envs = list(dict.fromkeys(risks["environment"].to_list()))
        models = sorted(set(risks["model"].to_list()))
        series = []
        for env in envs:
            sub = {r["model"]: r for r in risks.filter(pl.col("environment") == env).iter_rows(named=True)}
            series.append({"name": env,
                           "estimate": [sub[mo]["score"] if mo in sub else None for mo in models],
                           "lower": [sub[mo]["lower"] if mo in sub else None for mo in models],
                           "upper": [sub[mo]["upper"] if mo in sub else None for mo in models]})
        svg = interval_plot_svg(models, series, title=f"Score per environment with its {level} joint band",
                                x_label="score (risk = 1 - score)", x_range=(0.0, 1.0))
        src = escape(str(spec_dict.get("source", ""))) if spec_dict else ""
        parts.append(
            f"<p>Environments from <code>{src}</code> (level {escape(str(spec_dict.get('level')))}): each is a mix "
            f"of the benchmark's {escape(str(spec_dict.get('level')))}s with items equally likely inside each. The "
            "score is the benchmark's exact mean under the environment; the band holds for <b>every environment "
            f"(and every mix of the family) at once</b> with probability &ge; {level} for new items from the same "
            "subjects (items independent given their subject; at subject level, independent items): per-atom exact "
            "Clopper-Pearson intervals at alpha/K combined linearly (certifying-capabilities paper, section 3.1; a "
            "family's worst mix is one of its vertices). Columns <i>new subjects</i> give a new subject's expected "
            "score in each domain and its band (subjects as the sampling unit, each weighing the same whatever its "
            "size, so this score differs from the item-weighted one when big and small subjects differ; wide when "
            "a domain has few subjects). "
            "Plan a cheaper evaluation with <code>benchcert plan environments</code>.</p>"
            f'<div class="environment-profiles">{svg}</div>'
            + table_html(risks.select("model", "environment", "score", "lower", "upper",
                                      pl.col("score_new_subjects").alias("score (new subjects)"),
                                      pl.col("lower_new_subjects").alias("lower (new subjects)"),
                                      pl.col("upper_new_subjects").alias("upper (new subjects)"), "method",
                                      "worst_of_family"), float_digits=4, max_rows=400))
        for n in notes:
            parts.append(f"<p>{escape(n)}</p>")
    parts.append(
        f"<h3>What can be certified about failures</h3><p>Per model, {level} one-sided upper bounds on the failure "
        "rate (an item scored below 1) for the same two questions as the band. Column <i>upper</i>: new items from "
        "the same subjects (question <code>same_subjects</code>; items independent given their subject, subjects "
        "may differ in difficulty): the exact binomial (Clopper-Pearson) bound, raised to (k+1)/n where it is "
        "lower so that it holds for unequal subject rates (Hoeffding 1956, Theorem 4); with no failure in n items "
        "it is about 3/n; its estimate <i>failure_rate</i> is item-weighted. Column <i>upper_new_subjects</i>: a "
        "new subject's expected failure rate (subjects as the sampling unit, each weighing the same whatever its "
        "size: Hoeffding's relative-entropy bound on the <i>effective_subjects</i> = number of subjects, around the "
        "subject-weighted <i>failure_rate_new_subjects</i>; never above his additive bound, and 1 - alpha^(1/J) "
        "with no failure): wide with few subjects, since a failure rate on new subjects cannot be "
        "pinned down from a handful of them. The two estimates differ when big and small subjects fail at "
        "different rates; each bound is about its own.</p>"
        + table_html(failures, float_digits=4, max_rows=400)
        + f'<p class="black-box"><b>{escape(BLACK_BOX_SENTENCE)}</b></p>')
    return Section(title="Deployment environments and failure rates", anchor="environments", html="".join(parts))
