"""Deployment environments: the TOML file, sampling plans recorded in the store, and certificates.

An environments file names mixes of a benchmark's domains (``level = "domain"``) or subjects
(``level = "subject"``); items inside a domain or subject are equally likely, so each
environment is a distribution over the benchmark's items::

    level = "domain"
    [environments.clinic]
    weights = { health = 0.7, biology = 0.3 }
    [environments.legal]
    weights = { law = 1.0 }
    [family]                      # optional: every mix of these (convex hull)
    name = "care_mix"
    simplex = ["health", "biology", "psychology"]     # or: hull = ["clinic", "legal"]

A family is handled through its vertices: an environment's mean score is linear in its mix
(:math:`\\mu_\\theta = \\sum_j \\theta_j \\mu_{v_j}`), and every estimator used here is linear in
the vertex estimates, so bounds on the vertices hold for every mix at once and the worst mix
is a vertex. Theorem 3.8's total-variation cover (needed for families that are not mixtures)
is reported beside it for comparison.

``benchcert plan environments`` (:func:`plan_environments`) draws a seeded item sample from a
protocol's proposal and records it (tables ``environment_plans``, ``environment_plan_draws``);
``benchcert certify`` (:func:`certify`) reads a model's scores on it, or on the full benchmark,
and bounds every environment simultaneously. Plans are kept apart from ``benchcert subsample``'s
uniform subsets on purpose: their items are not a uniform sample, so the subsample guarantees
must not apply. These two services hold the commands' rules and return frozen results;
flows/cli/certify.py only parses and renders.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from benchcert.stats.certify import (draw_from_atoms, draw_stratified, importance_mom, per_environment_budget,
                                     per_environment_means, stratified_budget, stratified_means,
                                     theorem_3_4_budget)
from benchcert.stats.failure_rates import failure_rate_upper, failure_rate_upper_new_subjects
from benchcert.stats.environments import chi2_radius, chi2_radius_bounds, tv_cover
# The file's names stay importable from here, the certify service's public face (__all__).
from benchcert.tasks.certify.environments import (WEIGHT_TOL, EnvironmentsError, EnvironmentSpec,  # noqa: F401
                                                  parse_environments, read_environments, resolve)
from benchcert.tasks.errors import NoDataError, UsageError, unit_interval_option
from benchcert.tasks.store import plans
from benchcert.tasks.store.connection import DEFAULT_LOCK_TIMEOUT, open_store
from benchcert.tasks.store.items import benchmark_items, benchmarks_with_items

__all__ = ["EnvironmentsError", "UnknownPlanError",
           "EnvironmentSpec", "read_environments", "parse_environments", "Design",
           "build_design", "atom_sizes", "draw_plan", "record_plan", "load_plan", "certify_scores",
           "PROTOCOLS", "WEIGHT_TOL", "EnvironmentPlanRequest", "EnvironmentPlan",
           "plan_environments", "CertifyRequest", "Certificate", "certify", "plan_id_of"]

PROTOCOLS = {"theorem": "theorem_3_4", "naive": "per_environment", "stratified": "stratified"}


class UnknownPlanError(NoDataError):
    """``--subset`` names no environment plan this benchmark has in the store (exit code 1)."""


# --------------------------------------------------------------------------------------
# the design: radius, proposals, budgets


def atom_sizes(items: pl.DataFrame, level: str) -> tuple[list[str], np.ndarray]:
    """The benchmark's atoms at ``level`` (sorted) and their item counts."""
    counts = items.group_by(level).len().sort(level)
    return counts[level].to_list(), counts["len"].to_numpy().astype(np.int64)


@dataclass(frozen=True)
class Design:
    """Everything ``plan environments`` reports: radius, Example 4 bounds, budgets, cover."""

    spec: EnvironmentSpec
    atoms: list[str]
    sizes: np.ndarray
    names: list[str]
    P: np.ndarray
    is_vertex: np.ndarray
    epsilon: float
    delta: float
    radius: object
    bounds: object
    budgets: dict
    cover: object | None
    cover_budget: object | None

    def proposal(self, protocol: str) -> np.ndarray:
        """Atom probabilities of the draws each protocol makes."""
        if protocol == "theorem_3_4":
            return self.radius.proposal
        if protocol == "per_environment":
            return self.P.mean(axis=0)
        alloc = self.stratified_allocation()
        return alloc / alloc.sum()

    def stratified_allocation(self) -> np.ndarray:
        used = self.P.max(axis=0) > 0
        alloc = np.zeros(len(self.atoms), dtype=np.int64)
        alloc[used] = self.budgets["stratified"].allocation["per_atom"]
        return alloc

    def to_dict(self, protocol: str) -> dict:
        N = int(self.sizes.sum())
        out = {
            "level": self.spec.level, "atoms": len(self.atoms), "N": N,
            "environments": [{"environment": n, "family_vertex": bool(v),
                              "weights": {a: float(w) for a, w in zip(self.atoms, row) if w > 0},
                              "chi2_at_proposal": float(c)}
                             for n, v, row, c in zip(self.names, self.is_vertex, self.P, self.radius.divergences)],
            "epsilon": self.epsilon, "delta": self.delta,
            "chi2_radius": self.radius.value, "chi2_radius_lower": self.radius.lower,
            "chi2_radius_solver": {"method": self.radius.method, "tol": self.radius.tol,
                                   "converged": self.radius.converged, "iterations": self.radius.iterations,
                                   "gap": self.radius.gap},
            "chi2_radius_bounds": self.bounds.to_dict(),
            "chi2_radius_bounds_closed_form": {"mixture": self.bounds.mixture_closed_form,
                                               "uniform": self.bounds.uniform_closed_form,
                                               "shtarkov": self.bounds.shtarkov_closed_form},
            "protocol": protocol,
            "sampling_distribution": {a: float(p) for a, p in zip(self.atoms, self.proposal(protocol)) if p > 0},
            "budget": {k: b.n for k, b in self.budgets.items()},
            "budget_details": {k: {**b.to_dict(), "exceeds_benchmark": b.n > N} for k, b in self.budgets.items()},
        }
        if self.cover is not None:
            out["family"] = {"name": self.spec.family_name, "kind": self.spec.family_kind,
                             "vertices": self.spec.vertex_names(),
                             "tv_cover": {"size": self.cover.size, "log_size": self.cover.log_size,
                                          "radius": self.cover.radius, "resolution": self.cover.resolution,
                                          "theorem_3_8_budget": self.cover_budget.n},
                             "note": "mean scores are linear in the mix, so bounds on the vertices cover every mix; "
                                     "Theorem 3.8's cover (radius eps/2, Theorem 3.4 on the cover at eps/2) is "
                                     "shown for comparison"}
        return out


def build_design(spec: EnvironmentSpec, atoms: list[str], sizes, epsilon: float, delta: float) -> Design:
    sizes = np.asarray(sizes, dtype=np.int64)
    names, P, is_vertex = resolve(spec, atoms)
    radius = chi2_radius(P)
    bounds = chi2_radius_bounds(P, sizes=sizes)
    m = P.shape[0]
    used = P.max(axis=0) > 0
    budgets = {"theorem_3_4": theorem_3_4_budget(radius.value, m, epsilon, delta=delta),
               "per_environment": per_environment_budget(m, epsilon, delta=delta),
               "stratified": stratified_budget(sizes[used], epsilon, delta=delta)}
    cover = cover_budget = None
    if spec.family_kind is not None:
        k = len(spec.family_vertices)
        cover = tv_cover(k, epsilon)
        n_cover = math.comb(cover.resolution + k - 1, k - 1)
        n_named = len(spec.environments)
        cover_budget = theorem_3_4_budget(radius.value, n_named + n_cover, epsilon / 2, delta=delta)
    return Design(spec=spec, atoms=atoms, sizes=sizes, names=names, P=P, is_vertex=is_vertex, epsilon=epsilon,
                  delta=delta, radius=radius, bounds=bounds, budgets=budgets, cover=cover, cover_budget=cover_budget)


# --------------------------------------------------------------------------------------
# drawing and recording a plan


def draw_plan(design: Design, protocol: str, items: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Seeded draws (draw, item_id, subject, domain, stratum) of a protocol over ``items``.

    ``items`` is the benchmark's item table sorted by item_id; the draw depends only on it,
    the design and the seed. theorem_3_4 and per_environment draw with replacement (i.i.d.);
    stratified draws without replacement inside each atom.
    """
    rng = np.random.default_rng(seed)
    index = {a: i for i, a in enumerate(design.atoms)}
    item_atoms = np.array([index[a] for a in items[design.spec.level].to_list()], dtype=np.int64)
    b = design.budgets[protocol]
    if protocol == "theorem_3_4":
        idx = draw_from_atoms(item_atoms, design.radius.proposal, b.n, rng=rng)
        s = b.allocation["block_size"]
        strata = [f"block {j // s}" for j in range(b.n)]
    elif protocol == "per_environment":
        n_i = b.allocation["per_environment"]
        parts, strata = [], []
        for name, row in zip(design.names, design.P):
            parts.append(draw_from_atoms(item_atoms, row, n_i, rng=rng))
            strata += [name] * n_i
        idx = np.concatenate(parts)
    elif protocol == "stratified":
        idx = draw_stratified(item_atoms, design.stratified_allocation(), rng=rng)
        strata = [design.atoms[a] for a in item_atoms[idx]]
    else:
        raise ValueError(f"protocol must be one of {sorted(PROTOCOLS.values())}; got {protocol!r}")
    picked = items[idx]
    return pl.DataFrame({"draw": np.arange(len(idx), dtype=np.int64), "item_id": picked["item_id"],
                         "subject": picked["subject"], "domain": picked["domain"],
                         "stratum": pl.Series(strata, dtype=pl.String)})


def _plan_id(benchmark: str, protocol: str, seed: int, spec: dict, epsilon: float, delta: float) -> str:
    h = hashlib.sha256(json.dumps([benchmark, protocol, seed, spec, epsilon, delta], sort_keys=True).encode())
    return "env-" + h.hexdigest()[:16]


def _design_record(design: Design, protocol: str) -> dict:
    b = design.budgets[protocol]
    return {"atoms": design.atoms, "sizes": design.sizes.tolist(), "proposal": design.radius.proposal.tolist(),
            "names": design.names, "P": design.P.tolist(), "allocation": b.allocation,
            "chi2_radius": design.radius.value}


def record_plan(db, benchmark: str, design: Design, protocol: str, seed: int, draws: pl.DataFrame, *,
                lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> dict:
    """Store the plan and its draws (idempotent: the same plan is stored once); return its header."""
    spec = design.spec.to_dict()
    pid = _plan_id(benchmark, protocol, seed, {k: v for k, v in spec.items() if k != "source"},
                   design.epsilon, design.delta)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None, microsecond=0)
    n_items = draws["item_id"].n_unique()
    with open_store(db, write=True, lock_timeout=lock_timeout) as con:
        now = plans.record_plan(con, {
            "plan_id": pid, "benchmark": benchmark, "level": design.spec.level, "protocol": protocol,
            "epsilon": design.epsilon, "delta": design.delta, "seed": int(seed),
            "spec": json.dumps(spec, sort_keys=True), "design": json.dumps(_design_record(design, protocol)),
            "n_draws": draws.height, "n_items": n_items, "created_at": now}, draws)
    return {"plan_id": pid, "benchmark": benchmark, "protocol": protocol, "seed": int(seed), "n_draws": draws.height,
            "n_items": n_items, "created_at": now.strftime("%Y-%m-%dT%H:%M:%SZ")}


@dataclass(frozen=True)
class Plan:
    plan_id: str
    benchmark: str
    level: str
    protocol: str
    epsilon: float
    delta: float
    seed: int
    spec: EnvironmentSpec
    design: dict
    draws: pl.DataFrame


def load_plan(con, plan_id: str, benchmark: str) -> Plan:
    """A recorded plan of this benchmark; :class:`UnknownPlanError` naming the plans stored if unknown."""
    r = plans.read_plan(con, plan_id)
    if r is None or r["benchmark"] != benchmark:
        known = plans.plan_ids(con, benchmark)
        raise UnknownPlanError(f"no environment plan {plan_id!r} for benchmark {benchmark!r} in the store; "
                                f"plans recorded: {known or 'none'} (draw one with benchcert plan environments)")
    return Plan(plan_id=r["plan_id"], benchmark=r["benchmark"], level=r["level"], protocol=r["protocol"],
                epsilon=r["epsilon"], delta=r["delta"], seed=r["seed"],
                spec=EnvironmentSpec.from_dict(json.loads(r["spec"])), design=json.loads(r["design"]),
                draws=plans.plan_draws(con, plan_id))


# --------------------------------------------------------------------------------------
# certificates


#: Printed under every certificate of the full benchmark at domain level (rows with question "same_subjects").
SUBJECTS_NOTE = ("items of a domain cluster by subject: score/lower/upper are item-weighted and hold for new items "
                 "from the same subjects; for new subjects of a domain see the new-subj columns (score_new_subjects, "
                 "lower_new_subjects, upper_new_subjects in --json and the tables): subjects are the sampling unit "
                 "and weigh the same whatever their size, so the score differs from the item-weighted one when sizes "
                 "are unequal, and a domain with few subjects gets a wide band - one subject gives nearly [0, 1]")


def failure_bound(scores: np.ndarray, alpha: float, sampling: str, *, subjects: np.ndarray | None = None,
             unequal_rates: bool = True) -> dict:
    """The failure-rate bound of a model, for the band's questions; the audit's ``failure_rate_bounds``
    table and the environment certificates both use this.

    ``upper``: question ``question`` - ``"same_subjects"`` (``unequal_rates``: items independent,
    rates may differ by subject or atom; also right for a stratified plan's draws) or
    ``"independent_items"`` (i.i.d. draws, as from a plan's proposal); ``estimate`` is the
    item-weighted failure rate. With ``subjects``: ``upper_new_subjects`` for a new subject's
    expected failure rate (subjects as the sampling unit, each weighing the same), whose point
    estimate is ``estimate_new_subjects`` (the subject-weighted failure rate) and
    ``effective_subjects`` the number of subjects, as the band's ``score_new_subjects``/
    ``lower_new_subjects``/``upper_new_subjects``; see :mod:`benchcert.stats.certify`.
    """
    failed = scores < 1.0
    fr = failure_rate_upper(int(np.sum(failed)), int(scores.size), alpha=alpha, unequal_rates=unequal_rates)
    out = {"failures": fr.failures, "n": fr.n, "estimate": fr.estimate, "upper": fr.upper, "alpha": fr.alpha,
           "method": fr.method, "question": fr.question, "sampling": sampling, "statement": fr.statement,
           "question_new_subjects": None, "estimate_new_subjects": None, "upper_new_subjects": None,
           "method_new_subjects": None, "effective_subjects": None}
    if subjects is not None:
        nb = failure_rate_upper_new_subjects(failed, subjects, alpha=alpha)
        out.update(question_new_subjects=nb.question, estimate_new_subjects=nb.estimate, upper_new_subjects=nb.upper,
                   method_new_subjects=nb.method, effective_subjects=nb.effective_subjects)
    return out


def _rows_for(model: str, names, is_vertex, bounds, spec: EnvironmentSpec, note: str,
              new_subjects=None) -> list[dict]:
    """One row per environment (and the family's worst mix). ``question`` names what the bounds are
    about; ``new_subjects`` (no plan, domain level) adds the band for new subjects of each domain
    with its own, subject-weighted, score."""
    question = bounds.details.get("question", "finite_population")
    rows = []
    for j, name in enumerate(names):
        rows.append({"environment": name, "model": model, "score": float(bounds.estimate[j]),
                     "lower": float(bounds.lower[j]), "upper": float(bounds.upper[j]),
                     "half_width": float(bounds.half_width[j]), "method": bounds.method, "delta": bounds.delta,
                     "n": bounds.n, "family_vertex": bool(is_vertex[j]), "worst_of_family": False, "note": note,
                     "question": question,
                     "score_new_subjects": None if new_subjects is None else float(new_subjects.estimate[j]),
                     "lower_new_subjects": None if new_subjects is None else float(new_subjects.lower[j]),
                     "upper_new_subjects": None if new_subjects is None else float(new_subjects.upper[j])})
    if spec.family_kind is not None:
        vnames = spec.vertex_names()
        idx = [names.index(v) for v in vnames]
        j = min(idx, key=lambda i: bounds.lower[i])
        worst = {**rows[j], "environment": f"{spec.family_name} (worst mix)", "family_vertex": False,
                 "worst_of_family": True,
                 "note": f"every mix of {', '.join(vnames)} has score >= {bounds.lower[j]:.4f}; the lowest "
                         f"lower bound is at the vertex {names[j]!r} (scores are linear in the mix)"}
        if new_subjects is not None:   # its worst vertex may be another one
            jn = min(idx, key=lambda i: new_subjects.lower[i])
            worst["score_new_subjects"] = float(new_subjects.estimate[jn])
            worst["lower_new_subjects"] = float(new_subjects.lower[jn])
            worst["upper_new_subjects"] = float(new_subjects.upper[jn])
        rows.append(worst)
    return rows


def certify_scores(spec: EnvironmentSpec, items: pl.DataFrame, models: list[str], scores: np.ndarray, *,
                   delta: float, plan: Plan | None = None) -> tuple[list[dict], dict[str, dict], list[str]]:
    """Per model and environment: score with bounds holding for all environments at once w.p. >= 1 - delta.

    ``items`` (item_id, subject, domain) are the rows of ``scores`` (items x models, NaN = not
    answered). Without a plan (stratified_superpopulation; the score itself is exact for the
    benchmark): at domain level the bounds are for new items from the same subjects (items
    independent given their subject; the score item-weighted) and ``score_new_subjects``/
    ``lower_new_subjects``/``upper_new_subjects`` for new subjects of each domain (each subject
    weighing the same; row key ``question``; see
    :func:`benchcert.stats.certify.stratified_means`); at subject level a subject's items are
    taken as independent draws from its task distribution. With a plan: the plan's protocol estimator on the plan's draws; a model must
    have answered every item of the plan. Returns (rows, failure_rate_upper per model, notes).

    The failure bound per model answers the same questions as the band: without a plan, ``upper``
    for new items from the same subjects (question ``same_subjects``, the exact bound made valid
    for subjects of different difficulty) and ``upper_new_subjects`` for a new subject's expected
    failure rate (subjects as the sampling unit, subject-weighted); with a plan, the plan's items (question ``finite_population``, for the mix
    of the benchmark the plan draws from). See :func:`benchcert.stats.certify.failure_rate_upper`.
    """
    if plan is None:
        return _certify_benchmark(spec, items, models, scores, delta)
    return _certify_plan(spec, items, models, scores, delta, plan)


def _certify_benchmark(spec: EnvironmentSpec, items: pl.DataFrame, models: list[str], scores: np.ndarray,
                       delta: float) -> tuple[list[dict], dict[str, dict], list[str]]:
    """:func:`certify_scores` without a plan: the benchmark's own items, stratified by atom."""
    level = spec.level
    notes: list[str] = []
    rows: list[dict] = []
    failure: dict[str, dict] = {}
    atoms, sizes = atom_sizes(items, level)
    names, P, is_vertex = resolve(spec, atoms)
    index = {a: i for i, a in enumerate(atoms)}
    item_atom = np.array([index[a] for a in items[level].to_list()])
    # Items of a domain cluster by subject: the bounds answer "new items from the same subjects"
    # (valid with subject effects), and a second band answers "new subjects" (subjects as the
    # sampling unit). At the subject level the items of a subject are taken as independent.
    # (domain, subject) pairs: a subject name reused in two domains is two subjects
    subject_all = np.unique((items["domain"].cast(pl.String).fill_null("") + "\x00"
                             + items["subject"].cast(pl.String).fill_null("")).to_numpy(), return_inverse=True)[1]
    subject = subject_all if level == "domain" else None
    for j, model in enumerate(models):
        col = scores[:, j]
        ok = ~np.isnan(col)
        samples = [col[ok & (item_atom == a)] for a in range(len(atoms))]
        need = [atoms[a] for a in range(len(atoms)) if P[:, a].max() > 0 and samples[a].size == 0]
        if need:
            notes.append(f"{model}: no answered items in {', '.join(need)}: no certificate")
            continue
        if subject is None:
            b = stratified_means(samples, sizes, P, delta=delta, finite_population=False)
            # Subjects are the atoms: per-subject exact intervals answer "new items from the same
            # subjects", the question the failure bound beside them names (one rate per atom, so
            # no unequal-rates correction is needed).
            rows += [{**r, "question": "same_subjects"} for r in _rows_for(
                model, names, is_vertex, b, spec,
                "score = the benchmark's mean under the environment (answered items); bounds: "
                "new items from each subject's task distribution (ASSUMPTION: the items of a "
                "subject are independent), per-subject exact intervals at delta/K")]
        else:
            groups = [subject[ok & (item_atom == a)] for a in range(len(atoms))]
            b = stratified_means(samples, sizes, P, delta=delta, finite_population=False, clusters=groups)
            bn = stratified_means(samples, sizes, P, delta=delta, finite_population=False, clusters=groups,
                                  new_clusters=True)
            rows += _rows_for(model, names, is_vertex, b, spec,
                              "score = the benchmark's mean under the environment (answered items); bounds: "
                              "new items from the same subjects (subjects fixed, items independent given "
                              "their subject), per-domain exact intervals at delta/K; score/lower/"
                              "upper_new_subjects: new subjects of each domain (subjects as the sampling unit, "
                              "each weighing the same; wide with few subjects)", new_subjects=bn)
        # The failure bound answers the band's two questions (subjects fixed / new subjects).
        failure[model] = failure_bound(col[ok], delta, "uniform over the benchmark's answered items",
                                  subjects=subject_all[ok])
    return rows, failure, notes



def _certify_plan(spec: EnvironmentSpec, items: pl.DataFrame, models: list[str], scores: np.ndarray, delta: float,
                  plan: Plan) -> tuple[list[dict], dict[str, dict], list[str]]:
    """:func:`certify_scores` with a plan: the plan's protocol estimator on the plan's draws."""
    level = spec.level
    notes: list[str] = []
    rows: list[dict] = []
    failure: dict[str, dict] = {}
    row_of = {iid: r for r, iid in enumerate(items["item_id"].to_list())}
    d = plan.design
    if plan.level != level:
        raise EnvironmentsError(f"{spec.source}: level: the plan {plan.plan_id} was drawn at level {plan.level!r}; "
                                f"the file says {level!r}")
    atoms, sizes = d["atoms"], np.asarray(d["sizes"], dtype=np.int64)
    names, P, is_vertex = resolve(spec, atoms)
    index = {a: i for i, a in enumerate(atoms)}
    draws = plan.draws
    missing = [i for i in draws["item_id"].unique().to_list() if i not in row_of]
    if missing:
        raise EnvironmentsError(f"plan {plan.plan_id}: {len(missing)} of its items are no longer in the benchmark "
                                f"(e.g. {missing[:3]})")
    draw_rows = np.array([row_of[i] for i in draws["item_id"].to_list()], dtype=np.int64)
    draw_atoms = np.array([index[a] for a in draws[level].to_list()], dtype=np.int64)
    for j, model in enumerate(models):
        x = scores[draw_rows, j]
        if np.isnan(x).any():
            continue  # not evaluated on this plan
        if plan.protocol == "theorem_3_4":
            q = np.asarray(d["proposal"])
            b = importance_mom(x, draw_atoms, P, q, blocks=int(d["allocation"]["blocks"]), delta=delta)
            uncovered = [names[i] for i in range(len(names)) if not np.isfinite(b.half_width[i])]
            if uncovered:
                raise EnvironmentsError(f"{spec.source}: environment(s) {uncovered} put weight where the plan's "
                                        "proposal has none; draw a plan for them")
            sampling = "i.i.d. draws from the plan's proposal q (not the benchmark's uniform distribution)"
            iid = True
        elif plan.protocol == "per_environment":
            plan_w = dict(zip(d["names"], [np.asarray(r) for r in d["P"]]))
            samples = []
            for name, row in zip(names, P):
                if name not in plan_w or not np.allclose(plan_w[name], row, atol=1e-9):
                    raise EnvironmentsError(f"{spec.source}: environment {name!r} was not drawn by the per-environment "
                                            f"plan {plan.plan_id} with these weights; certify the plan's environments "
                                            f"({', '.join(d['names'])}) or draw a new plan")
                samples.append(x[(draws["stratum"] == name).to_numpy()])
            b = per_environment_means(samples, delta=delta)
            sampling = "i.i.d. draws from each environment, pooled (target: the draws' mix of the environments)"
            iid = False   # environments fail at different rates
        else:
            samples = [x[draw_atoms == a] for a in range(len(atoms))]
            need = [atoms[a] for a in range(len(atoms)) if P[:, a].max() > 0 and samples[a].size == 0]
            if need:
                raise EnvironmentsError(f"{spec.source}: the stratified plan {plan.plan_id} sampled no items of "
                                        f"{', '.join(need)}; draw a plan that covers them")
            b = stratified_means(samples, sizes, P, delta=delta, finite_population=True)
            sampling = "uniform within atoms, pooled over the plan's allocation (target: the allocation's mix)"
            iid = False   # a sum of hypergeometric counts of atoms with different rates
        rows += _rows_for(model, names, is_vertex, b, spec,
                          f"plan {plan.plan_id} ({plan.protocol}); target: the environment's mean over the "
                          "benchmark's items")
        failure[model] = {**failure_bound(x, delta, sampling, unequal_rates=not iid), "question": "finite_population"}
    skipped = [m for m in models if m not in failure]
    if skipped:
        notes.append(f"{len(skipped)} model(s) did not answer every item of plan {plan.plan_id} and get no "
                     f"certificate from it: {', '.join(skipped[:5])}{' ...' if len(skipped) > 5 else ''}")
    return rows, failure, notes




def spec_for_audit(path, db, benchmark: str, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> dict:
    """Read an environments file and check its names against the benchmark's items (for ``audit``)."""
    spec = read_environments(path)
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        items = benchmark_items(con, benchmark)
    if items.height:  # an unknown benchmark is the audit's own error to report
        resolve(spec, atom_sizes(items, spec.level)[0])
    return spec.to_dict()


# --------------------------------------------------------------------------------------
# the services of `benchcert plan environments` and `benchcert certify`


@dataclass(frozen=True)
class EnvironmentPlanRequest:
    """What ``benchcert plan environments`` was asked."""

    envs: Path
    db: Path
    benchmark: str
    epsilon: float
    delta: float
    protocol: str = "stratified"
    seed: int | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT


@dataclass(frozen=True)
class EnvironmentPlan:
    """A drawn and recorded plan: its design, draws, report (``summary``) and notes."""

    request: EnvironmentPlanRequest
    spec: EnvironmentSpec
    atoms: list[str]
    N: int
    design: Design
    seed: int
    draws: pl.DataFrame
    summary: dict
    notes: tuple[str, ...]

    @property
    def item_ids(self) -> list[str]:
        return sorted(self.draws["item_id"].unique().to_list())


@dataclass(frozen=True)
class CertifyRequest:
    """What ``benchcert certify`` was asked (``subset``: a plan id or the file plan environments wrote)."""

    envs: Path
    db: Path
    benchmark: str
    subset: str | None = None
    delta: float | None = None
    variant: str | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT


@dataclass(frozen=True)
class Certificate:
    """Per model and environment the bounded scores, per model the failure-rate bounds."""

    request: CertifyRequest
    variant: str
    delta: float
    plan: Plan | None
    rows: list[dict]
    failure: dict[str, dict]
    notes: list[str]

    @property
    def protocol(self) -> str:
        return "full_benchmark" if self.plan is None else self.plan.protocol

    @property
    def subjects_note(self) -> str | None:
        """:data:`SUBJECTS_NOTE` where a row gives both the same-subjects and the new-subjects band."""
        both = any(r.get("question") == "same_subjects" and r.get("lower_new_subjects") is not None
                   for r in self.rows)
        return SUBJECTS_NOTE if both else None

    def to_dict(self) -> dict:
        from benchcert.stats.failure_rates import BLACK_BOX_SENTENCE

        return {"benchmark": self.request.benchmark, "variant": self.variant, "delta": self.delta,
                "envs": str(self.request.envs), "subset": None if self.plan is None else self.plan.plan_id,
                "protocol": self.protocol, "environments": self.rows, "failure_rate_upper": self.failure,
                "black_box": BLACK_BOX_SENTENCE, "notes": self.notes}


def _unit(value, name: str) -> float:
    unit_interval_option(f"--{name}", value)
    return float(value)


def _store_items(db, benchmark: str, lock_timeout: float) -> pl.DataFrame:
    """The benchmark's items (tasks/store/items.py); NoDataError naming the stored ones if none."""
    from benchcert.tasks.store.connection import require_store

    require_store(db)
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        items = benchmark_items(con, benchmark)
        known = benchmarks_with_items(con)
    if items.height == 0:
        raise NoDataError(f"benchmark {benchmark!r} has no items in {db} (empty or unknown); benchmarks "
                          f"stored: {known}")
    return items


def plan_environments(req: EnvironmentPlanRequest) -> EnvironmentPlan:
    """Design, draw and record a plan for ``req``'s environments (Theorem 3.4, Remark 3.2, stratified).

    Raises UsageError (options, environments file), NoDataError (no items), MissingStoreError or StoreError.
    """
    import secrets

    eps = _unit(req.epsilon, "epsilon")
    delta = _unit(req.delta, "delta")
    if req.seed is not None and not 0 <= req.seed < 2 ** 63:
        raise UsageError(f"--seed must be in [0, 2^63); got {req.seed}")
    spec = read_environments(req.envs)
    items = _store_items(req.db, req.benchmark, req.lock_timeout)
    atoms, sizes = atom_sizes(items, spec.level)
    design = build_design(spec, atoms, sizes, eps, delta)
    protocol = PROTOCOLS[req.protocol]
    seed = req.seed if req.seed is not None else secrets.randbits(63)
    draws = draw_plan(design, protocol, items, seed)
    head = record_plan(req.db, req.benchmark, design, protocol, seed, draws, lock_timeout=req.lock_timeout)
    N = int(sizes.sum())
    notes = [f"{k} needs {b.n:,} draws, more than the benchmark's {N:,} items: evaluating the whole "
             "benchmark once gives every environment's benchmark score exactly"
             for k, b in design.budgets.items() if b.n > N]
    cheapest = min(design.budgets, key=lambda k: design.budgets[k].n)
    notes.append(f"cheapest protocol here: {cheapest} ({design.budgets[cheapest].n:,} items)")
    summary = {**design.to_dict(protocol), **head, "envs": str(req.envs)}
    return EnvironmentPlan(request=req, spec=spec, atoms=atoms, N=N, design=design, seed=seed, draws=draws,
                           summary=summary, notes=tuple(notes))


def plan_id_of(subset: str) -> str:
    """The plan id ``--subset`` names: itself, or the ``plan_id`` of the manifest file it names."""
    p = Path(subset)
    if p.suffix.lower() == ".json" or (p.is_file() and not subset.startswith("env-")):
        try:
            return str(json.loads(p.read_text(encoding="utf-8"))["plan_id"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"--subset {subset}: not a plan manifest written by plan environments --out "
                             f"({exc})") from None
    return subset


def certify(req: CertifyRequest) -> Certificate:
    """Bound every model's score on every environment of ``req`` at once, on a plan or the full benchmark.

    Raises UsageError (options, environments file, a plan that does not fit them), NoDataError
    (unknown plan or benchmark, no model certified), MissingStoreError or StoreError.
    """
    from benchcert.tasks.store.connection import require_store
    from benchcert.tasks.store.matrices import load_matrices

    spec = read_environments(req.envs)
    if req.delta is not None:
        _unit(req.delta, "delta")
    require_store(req.db)
    plan = None
    # An unknown plan (UnknownPlanError) or benchmark (MatrixError) is a NoDataError; a plan that
    # does not fit the file (EnvironmentsError) a UsageError: each reaches the caller as raised.
    with open_store(req.db, write=False, lock_timeout=req.lock_timeout) as con:
        if req.subset is not None:
            plan = load_plan(con, plan_id_of(req.subset), req.benchmark)
        m = load_matrices(con, req.benchmark, req.variant)
    delta = req.delta if req.delta is not None else (plan.delta if plan is not None else 0.05)
    rows, failure, notes = certify_scores(spec, m.items, m.models, m.scores, delta=delta, plan=plan)
    if not rows:
        msg = "; ".join(notes) or "no model to certify"
        raise NoDataError(f"no model could be certified: {msg}")
    return Certificate(request=req, variant=m.variant, delta=delta, plan=plan, rows=rows, failure=failure,
                       notes=notes)
