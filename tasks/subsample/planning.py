"""The services of ``benchcert plan`` (evaluation-cost questions, docs/methods.md section 5) and
``benchcert subsample`` (draw and record a random subset of a benchmark's items).

The one home of their rules: where the benchmark size N comes from (``--N`` or a benchmark's
item count in the store), which options go together, the paired variance taken from the store
for ``plan compare``, and the guarantee a recorded subset carries.  The formulas are
stats/planning.py's and stats/subsample.py's; h* comes from the file kept beside the store
(tasks/subsample/hstar_cache.py), as in the audit.  Each service returns a frozen result the
command line renders.

A problem that is the user's is raised as :class:`~benchcert.tasks.errors.UsageError`
(options out of range or not going together), :class:`~benchcert.tasks.errors.NoDataError`
(the store does not hold what the question needs) or
:class:`~benchcert.tasks.errors.MissingStoreError` (no such store); a locked or unusable store
is the store's :class:`~benchcert.tasks.store.connection.StoreError`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from benchcert.tasks.store import DEFAULT_LOCK_TIMEOUT
from benchcert.tasks.errors import NoDataError, UsageError, unit_interval_option


@dataclass(frozen=True)
class SizeSource:
    """Where a plan's benchmark size N comes from: ``N`` given, or ``benchmark``'s items in ``db``."""

    N: int | None = None
    db: Path | str | None = None
    benchmark: str | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT


@dataclass(frozen=True)
class PlanResult:
    """A plan (stats.planning.Plan) and where its N (and a stored Var(D)) came from."""

    plan: object
    source: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {**self.plan.to_dict(), "source": dict(self.source)}


@dataclass(frozen=True)
class SubsetDraw:
    """A recorded subset (:class:`~benchcert.tasks.subsample.subsets.SubsetManifest`) and the
    guarantee its score carries for the full benchmark's."""

    manifest: object
    guarantee: dict


def check_alpha(alpha: float) -> float:
    unit_interval_option("--alpha", alpha)
    return alpha


def store_item_count(db, benchmark: str, lock_timeout: float) -> int:
    """The benchmark's item count in ``db``; NoDataError naming the stored benchmarks when it has none."""
    from benchcert.tasks.store.connection import open_store, require_store
    from benchcert.tasks.subsample.subsets import benchmarks_with_items, item_count

    require_store(db)
    with open_store(db, write=False, lock_timeout=lock_timeout) as con:
        N = item_count(con, benchmark)
        known = benchmarks_with_items(con)
    if not N:
        raise NoDataError(f"benchmark {benchmark!r} has no items in {db} (empty or unknown); benchmarks stored: "
                          f"{known}")
    return N


def resolve_N(source: SizeSource, *, required: bool) -> tuple[int | None, dict]:
    """N from ``source`` and how it was found; (None, {}) when nothing gives it and N is optional."""
    if source.db is not None or source.benchmark is not None:
        if source.db is None or source.benchmark is None:
            raise UsageError("--db and --benchmark go together")
        if source.N is not None:
            raise UsageError("give either --N or --db/--benchmark, not both")
        N = store_item_count(source.db, source.benchmark, source.lock_timeout)
        return N, {"db": str(source.db), "benchmark": source.benchmark}
    if source.N is None:
        if required:
            raise UsageError("give the benchmark size with --N or --db FILE --benchmark NAME")
        return None, {}
    if source.N < 1:
        raise UsageError(f"--N must be >= 1 (the benchmark's item count); got {source.N}")
    return source.N, {"N_from": "--N"}


def _answer(source: SizeSource, alpha: float, build, *, need_N: bool) -> PlanResult:
    """``build(N)``'s plan, N resolved from ``source``; the planner's ValueError is a usage error."""
    check_alpha(alpha)
    N, where = resolve_N(source, required=need_N)
    try:
        plan = build(N)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return PlanResult(plan=plan, source=where)


def worst_case_cached(db, n: int, N: int, alpha: float) -> tuple[float, int]:
    """h*(n, N, alpha) and its worst count K, kept beside the store ``db`` once computed."""
    from benchcert.tasks.subsample.hstar_cache import worst_cases

    return worst_cases([int(n)], N, alpha, db)[int(n)]


def plan_subsample(n: int, source: SizeSource, *, alpha: float, exact: bool) -> PlanResult:
    """The half-widths n items buy (stats.planning.plan_budget), h* from the cache beside a store."""
    from benchcert.stats.planning import plan_budget

    cached = None if source.db is None else (lambda n, N, alpha: worst_case_cached(source.db, n, N, alpha))
    return _answer(source, alpha, lambda N: plan_budget(n, N, alpha=alpha, exact=exact, worst_case=cached),
                   need_N=True)


def plan_estimate(eps: float, source: SizeSource, *, alpha: float, exact: bool) -> PlanResult:
    from benchcert.stats.planning import plan_one_model

    return _answer(source, alpha, lambda N: plan_one_model(eps, alpha=alpha, N=N, exact=exact), need_N=False)


def plan_models(eps: float, k: int, source: SizeSource, *, alpha: float, exact: bool) -> PlanResult:
    from benchcert.stats.planning import plan_k_models

    return _answer(source, alpha, lambda N: plan_k_models(eps, k, alpha=alpha, N=N, exact=exact), need_N=False)


def plan_zero_failure(eps: float, source: SizeSource, *, alpha: float) -> PlanResult:
    from benchcert.stats.planning import plan_zero_failure as plan

    return _answer(source, alpha, lambda N: plan(eps, alpha=alpha, N=N), need_N=False)


def stored_var_d(db, benchmark: str, models: list[str] | None, lock_timeout: float) -> dict:
    """Per-item variance of the paired difference D = x_B - x_A stored for ``benchmark``.

    For the pair ``models`` when given, else the largest over every pair of the benchmark's
    models (so the plan holds for any of them), on the items both answered, ddof = 1.
    """
    import itertools

    import numpy as np

    from benchcert.tasks.store.connection import open_store
    from benchcert.tasks.store.matrices import MatrixError, load_matrices

    try:
        with open_store(db, write=False, lock_timeout=lock_timeout) as con:
            m = load_matrices(con, benchmark)
    except MatrixError as exc:
        raise NoDataError(str(exc)) from None
    col = {name: j for j, name in enumerate(m.models)}
    if models is not None:
        unknown = [x for x in models if x not in col]
        if len(models) != 2 or unknown:
            raise UsageError(f"--models must name two models of {benchmark!r}"
                             + (f"; unknown: {unknown}" if unknown else f"; got {models}"))
        pairs = [tuple(models)]
    else:
        pairs = list(itertools.combinations(m.models, 2))
    if not pairs:
        raise NoDataError(f"benchmark {benchmark!r} has {len(m.models)} model(s); a paired variance needs two "
                          "(or give --var-d)")
    S = m.scores
    best = None
    for a, b in pairs:
        d = S[:, col[b]] - S[:, col[a]]
        d = d[~np.isnan(d)]
        if d.size < 2:
            continue
        v = float(np.var(d, ddof=1))
        if best is None or v > best["var_d"]:
            best = {"var_d": v, "pair": [a, b], "n_shared": int(d.size)}
    if best is None:
        raise NoDataError(f"no pair of models of {benchmark!r} shares two answered items; give --var-d")
    best["rule"] = "the pair given" if models is not None else f"the largest of {len(pairs)} model pair(s)"
    best["variant"] = m.variant
    return best


def plan_compare(eps: float, source: SizeSource, *, alpha: float, power: float, var_d: float | None,
                 models: list[str] | None) -> PlanResult:
    """Items to tell apart two models eps apart; Var(D) given, else from the store, else the worst case."""
    from benchcert.stats.planning import plan_two_models

    if models is not None and source.db is None:
        raise UsageError("--models needs --db and --benchmark")
    stored: dict = {}

    def build(N):
        v = var_d
        if v is None and source.db is not None:
            # The stored data say how variable the paired difference is; the worst case 1 - eps^2
            # is only for when nothing is known.
            stored.update(stored_var_d(source.db, source.benchmark, models, source.lock_timeout))
            v = stored["var_d"]
        plan = plan_two_models(eps, alpha=alpha, power=power, var_d=v, N=N)
        if stored:
            note = (f"Var(D) = {stored['var_d']:.6g} from the store: {stored['rule']} "
                    f"({stored['pair'][0]!r} vs {stored['pair'][1]!r}, {stored['n_shared']} shared items)")
            plan = dataclasses.replace(plan, notes=(*plan.notes, note))
        return plan

    result = _answer(source, alpha, build, need_N=False)
    if stored:
        result = dataclasses.replace(result, source={**result.source, "var_d_from_store": dict(stored)})
    return result


def draw_subset(db, benchmark: str, n: int, *, seed: int | None, stratified: bool, alpha: float,
                lock_timeout: float) -> SubsetDraw:
    """Draw and record a subset of ``n`` items (tasks/subsample/subsets.py) and its guarantee at ``alpha``."""
    from benchcert.stats.subsample import posthoc_interval, theorem_5_2_halfwidth
    from benchcert.tasks.store.connection import require_store
    from benchcert.tasks.subsample.subsets import NoSubsetItems, SubsetError, create_subset

    check_alpha(alpha)
    if n < 1:
        raise UsageError(f"--n must be >= 1 (a subset needs at least one item); got {n}")
    if seed is not None and not 0 <= seed < 2 ** 63:
        raise UsageError(f"--seed must be in [0, 2^63); got {seed}")
    require_store(db)
    try:
        man = create_subset(db, benchmark, n, seed=seed, stratified=stratified, lock_timeout=lock_timeout)
    except NoSubsetItems as exc:
        raise NoDataError(str(exc)) from None
    except SubsetError as exc:
        # n outside [1, N], or too few items for the strata: the options', not the data's.
        raise UsageError(str(exc)) from None
    guarantee = {"alpha": alpha}
    if man.n < man.N:
        guarantee["theorem_5_2_half_width"] = float(theorem_5_2_halfwidth(man.n, man.N, alpha=alpha).half_width)
        if not man.stratified:
            guarantee["exact_worst_case_half_width"] = worst_case_cached(db, man.n, man.N, alpha)[0]
            mid = posthoc_interval(man.n // 2, man.n, man.N, alpha=alpha)
            guarantee["posthoc_half_width_at_50pct"] = float(mid.half_width)
    return SubsetDraw(manifest=man, guarantee=guarantee)
