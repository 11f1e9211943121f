"""The report's section of calibration and goodness of fit (Brier, log loss, ECE, the GoF test)."""

from __future__ import annotations

import polars as pl

from benchcert.tasks.render.charts import reliability_svg
from benchcert.tasks.render.escape import escape
from benchcert.tasks.render.report import Section, table_html


def section(shown: pl.DataFrame, panels: list[dict], notes: list[str], alpha: float) -> Section:
    """The calibration section.

    Parameters
    ----------
    shown : polars.DataFrame
        A row per model: accuracy, confidence, Brier, log loss, ECE and the GoF test's columns.
    panels : list of dict
        One reliability panel per model with bins (:func:`~benchcert.tasks.render.charts.reliability_svg`).
    notes : list of str
        The analysis' notes, listed under the table.
    alpha : float
        1 - confidence level.

    Returns
    -------
    Section
    """
    level = f"{100 * (1 - alpha):g}%"
    html = (
        "<p>Are the models' option probabilities right? Brier score (multi-class, 0-2) and log loss are "
        f"averages over items (their {level} intervals are in the table <code>calibration</code>); ECE is the "
        "top-label expected calibration error over 15 equal-width confidence bins, shown beside the ECE that "
        "perfectly calibrated probabilities with the same confidences would show at this number of items. "
        "<b>gof_delta_min</b> is the goodness-of-fit test of the black-box classifier GoF paper (Algorithm 1, "
        "sample split, logistic distinguisher on subject, domain and the probability vector): a "
        f"{level} lower confidence bound on how well the correct options can be told apart from options drawn "
        "from the model's own probabilities (0 = indistinguishable, 0.5 = always). "
        "<b>gof_reject</b> = the probabilities are shown not to fit (H0: exact fit rejected at level "
        f"{alpha:g}); not rejecting is not proof of a good fit.</p>"
        + table_html(shown, float_digits=3)
        + (reliability_svg(panels, title="Reliability: accuracy by confidence bin (diagonal = calibrated)")
           if panels else ""))
    if notes:
        html += "<ul class=\"notes\">" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
    return Section(title="Calibration and goodness of fit", anchor="calibration", html=html)
