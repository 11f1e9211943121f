"""The report's section of model comparisons: the family tested, rank intervals, tied groups, the pairs."""

from __future__ import annotations

import polars as pl

from benchcert.stats.comparisons import QUESTIONS
from benchcert.tasks.render.charts import interval_plot_svg
from benchcert.tasks.render.escape import escape  # the shared escaper: NUL, bidi controls
from benchcert.tasks.render.report import Section, table_html


def empty_section(note: str) -> Section:
    """The section of an audit that compares nothing: why, in one paragraph."""
    return Section(title="Model comparisons", anchor="comparisons", html=f"<p>{escape(note)}</p>")


class _TieNote:
    """What decided a tie (the question and the family of pairs) and the one-pair command for the other
    question: a tie here and a verdict from ``benchcert compare`` on one pair can both be right, each for its
    own question and family (issue #37, finding 5)."""

    def __init__(self, primary: str, benchmark: str, n_tested: int, k: int, against_baseline: bool):
        self.question = "new-subjects" if primary == "clustered_subject" else "items"
        self.other = None if primary == "paired_clt" else ("items" if self.question == "new-subjects" else
                                                           "new-subjects")
        self.benchmark = benchmark
        self.family = (f"Bonferroni over the {n_tested} pairs against the baseline" if against_baseline else
                       f"Bonferroni over the {n_tested} pairs tested")
        self.rank_family = f"Bonferroni over every pair of the {k} models (the ranking family)"

    def command(self, versus: str, model: str) -> str:
        if self.other is None:
            return "no subjects: only the items question can be asked"
        return (f"benchcert compare --db STORE --benchmark {self._quoted(self.benchmark or 'BENCHMARK')} "
                f"{self._quoted(versus)} {self._quoted(model)} --question {self.other}")

    def _quoted(self, name: str) -> str:
        """shlex.quote of a name, once per name (a table names each model in many pairs)."""
        import shlex

        cache = self.__dict__.setdefault("_quotes", {})
        if name not in cache:
            cache[name] = shlex.quote(name)
        return cache[name]

    def row_text(self, versus: str, model: str) -> str:
        return f"{self.question} question, {self.family}; one pair, {self.other or 'no other'} question: " + \
            self.command(versus, model)

    def group_html(self, a: str, b: str) -> str:
        return (f"tied on the <b>{escape(self.question)}</b> question by {escape(self.rank_family)}; one pair on the "
                f"other question: <code>{escape(self.command(a, b))}</code>")


def _mde_note(frame: pl.DataFrame) -> str:
    """What <code>MDE pp</code> is: the gap each verdict detects with 80% power at the level it is decided at."""
    levels = frame["mde_alpha"].drop_nulls().unique() if "mde_alpha" in frame.columns else []
    if len(levels) != 1:
        return ""
    return (f"<code>MDE pp</code> is the gap each verdict detects with 80% power at the level it is decided at, "
            f"two-sided {float(levels[0]):.3g} (the Bonferroni level; <code>mde_alpha</code>). ")


def section(frame: pl.DataFrame, ranks: pl.DataFrame, groups, models: list[str], baseline: int | None,
            alpha: float, primary: str, *, top_n: int, all_pairs_max_models: int, benchmark: str = "") -> Section:
    """The comparisons' section: the family and question, the rank plot, the tied groups, the tables.

    Parameters
    ----------
    frame : polars.DataFrame
        Table ``comparisons``.
    ranks : polars.DataFrame
        Table ``comparison_ranks``.
    groups : sequence of sequences of int
        The tied groups, as column indices of ``models``.
    models : list of str
        The models compared.
    baseline : int or None
        The baseline's index, None for the pairs of models.
    alpha : float
        1 - confidence level.
    primary : str
        The primary interval's method (``clustered_subject``, ``stratified_items`` or ``paired_clt``).
    top_n, all_pairs_max_models : int
        The leaderboard family's size and the number of models beyond which it is used, named in the text.
    benchmark : str
        The benchmark, for the one-pair ``benchcert compare`` command shown at a tie.

    Returns
    -------
    Section
    """
    level = f"{100 * (1 - alpha):g}%"
    k = len(models)
    plot = interval_plot_svg(
        ranks["model"].to_list(),
        [{"name": f"rank with simultaneous {level} interval", "estimate": ranks["rank"].to_list(),
          "lower": ranks["rank_lower"].to_list(), "upper": ranks["rank_upper"].to_list(), "color": "#0072b2"}],
        title="Rank of each model (1 = best) with its rank interval", x_label="rank (1 = best)",
        x_range=(0.5, k + 0.5), percent=False)
    multi = [g for g in groups if len(g) > 1]
    n_tested = frame.filter(pl.col("n_shared") > 0).height
    tie = _TieNote(primary, benchmark, n_tested, k, baseline is not None)
    group_items = "".join(
        f"<li>group {gid}: {escape(', '.join(models[i] for i in g))} — {tie.group_html(models[g[0]], models[g[1]])}"
        f"</li>" for gid, g in enumerate(groups, start=1) if len(g) > 1)
    method = {"clustered_subject": "clustered by subject (CR2, t with Bell-McCaffrey df)",
              "stratified_items": "paired within subjects as fixed strata (t with N - C df)",
              "paired_clt": "paired CLT"}[primary]
    question = QUESTIONS[primary]
    if baseline is not None:
        fam = f"every model against the baseline {escape(models[baseline])!s}"
    elif frame.height and frame["family"][0] == "leaderboard":
        fam = (f"each model against the next one in the ranking and every pair among the top {top_n} "
               f"({k} models: more than {all_pairs_max_models}, so not every pair; --all-pairs for all)")
    else:
        fam = "every pair of models"
    intro = (f"<p>Paired comparisons of {fam} on the items both models answered (items only one answered are "
             f"excluded and counted in <code>n_excluded</code>). Gap = model &minus; versus; {level} interval "
             f"{method}; verdict by the Bonferroni-simultaneous {level} intervals over the "
             f"{frame.filter(pl.col('n_shared') > 0).height} comparisons (<code>improved</code> = the model's "
             "interval lies above 0: significantly ahead), so a verdict never contradicts its interval. Holm and "
             "Benjamini-Hochberg (FDR) adjusted p-values are in the table for reference; Holm's step-down can reject "
             "a pair whose simultaneous interval covers 0, and the verdict does not claim those. So is the unpaired "
             f"z-test peers report, which ignores that both models answered the same items. {_mde_note(frame)}</p>"
             "<p>The question answered: "
             f"<b>{escape(question)}</b>.</p>")
    family = ("Bonferroni over the pairs tested, as the verdicts" if baseline is None else
              "Bonferroni over every pair of models: the ranking question, a wider family than the verdicts "
              "against the baseline, so a model can be <code>improved</code> against the baseline and still share "
              "a group with it here")
    ties = (f"<p>{len(multi)} tied group(s): models in a group are not shown different from each other at this "
            f"level ({family}) - a tie here means <em>not distinguished</em>, not proven equal. "
            "A model can belong to several groups.</p>" + (f"<ul>{group_items}</ul>" if group_items else ""))
    shown = frame.sort("p_value", nulls_last=True).select(
        "model", "versus", "n_shared", "n_excluded", (pl.col("gap") * 100).alias("gap pp"),
        (pl.col("lower") * 100).alias("lower pp"), (pl.col("upper") * 100).alias("upper pp"),
        "p_value", "p_holm", "p_bh", "p_exact", "p_unpaired", (pl.col("mde") * 100).alias("MDE pp"), "verdict")
    if shown.height:
        # at a tie: which question and family decided it, and the one-pair command that asks the other question
        tie_rows = [tie.row_text(r["versus"], r["model"]) if r["verdict"] == "inconclusive" else None
                for r in shown.select("model", "versus", "verdict").iter_rows(named=True)]
        shown = shown.with_columns(pl.Series("tied: decided by; the other question", tie_rows, dtype=pl.String))
    tied_pairs = shown.filter(pl.col("verdict") == "inconclusive") if shown.height else shown
    if tied_pairs.height:
        ties += (f"<h3>Pairs not distinguished ({tied_pairs.height})</h3><p>Each tie is decided by the question and "
                 "the family of pairs named beside it; <code>benchcert compare</code> on one pair asks a family of "
                 "one, and can ask the other question: both answers are right for their own question.</p>"
                 + table_html(tied_pairs.select("model", "versus", "gap pp", "lower pp", "upper pp", "p_value",
                                                "tied: decided by; the other question"), float_digits=4,
                              max_rows=100))
    return Section(title="Model comparisons", anchor="comparisons",
                   html=intro + plot + ties + table_html(ranks.drop("groups"), float_digits=4)
                   + table_html(shown, float_digits=4, max_rows=100))
