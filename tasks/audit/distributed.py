"""Audit work on a Dask cluster, through Prefect's own integration (prefect-dask).

The single-process audit stays the default. With a cluster (``--dask-address tcp://...``,
or a ``LocalCluster`` of ``--dask-workers N`` processes), the audit flow submits its work as
Prefect tasks to a :class:`prefect_dask.DaskTaskRunner`. A worker reads its inputs from the
Parquet export of the store (tasks/store/export.py), never from the DuckDB file (one writing
process per file), and returns results to the flow, which assembles them, builds the summary
and report and writes the artifacts and the run record, as it does alone.

What goes out (:func:`analyses_on_cluster`):

* the per-model and pairwise work in **blocks of models** (``block_models``, default
  :data:`BLOCK_MODELS`): the hierarchical analysis' fits, bounds and comparator intervals one
  task per block of models (:func:`model_block`), and the paired comparisons one task
  per pair of model blocks (:func:`pair_block_from_export`), each reading only its blocks'
  columns of the export. The flow assembles them: multiplicity adjustment (Holm, Bonferroni,
  Benjamini-Hochberg), rank intervals and tied groups over the whole family tested, the
  subject correlation across all models, the tables and report;
* every other analysis (and the hierarchical analysis' split-half diagnostic, one random
  stream for all models) on the whole matrix: in the flow's process, on the matrix it holds
  already, when the benchmark is split into blocks (a worker would read and hold the whole
  matrix again: 2.4 GiB and about 20 CPU s at 320M responses); as one task each otherwise
  (small benchmarks: a nightly run's many audits then share the cluster).

Blocking changes no number: each block's numbers depend on its own columns only, and the
artifacts equal the single-process ones (tests/tasks/audit/test_dask_blocks.py, tests/tasks/audit/test_distributed.py).

Each worker process keeps the matrices it last read (the whole benchmark, and a few blocks),
so several tasks of one benchmark on one worker read the export once.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import threading
import time
import warnings

import numpy as np
from prefect import task
from prefect.cache_policies import NO_CACHE

from benchcert.tasks.audit.analyses import ANALYSES, SPECS, run_analysis
from benchcert.tasks.audit.contract import AnalysisOutput, AuditConfig
from benchcert.tasks.store.export import export_manifest, open_export
from benchcert.tasks.store.matrices import BenchmarkMatrices

#: LocalCluster settings: one thread per worker process (the analyses are numpy-bound and
#: set their own BLAS threads; see stats/_blas.py); the scheduler's HTTP server on a free
#: port, so two local clusters on one machine never collide on 8787.
LOCAL_CLUSTER_KWARGS = {"processes": True, "threads_per_worker": 1, "dashboard_address": ":0"}


def _quiet_scheduler() -> None:
    # The scheduler of a LocalCluster runs in this process and logs every worker at INFO;
    # keep a user's own setting if they chose one.
    logger = logging.getLogger("distributed")
    if logger.level == logging.NOTSET or logger.level < logging.WARNING:
        logger.setLevel(logging.WARNING)


def dask_task_runner(address: str | None = None, workers: int | None = None):
    """A DaskTaskRunner for a running scheduler (``address``) or a new LocalCluster of ``workers``."""
    from prefect_dask import DaskTaskRunner

    if address and workers:
        raise ValueError("give a Dask scheduler address or a number of local workers, not both")
    if address:
        if not address.startswith(("tcp://", "tls://", "inproc://", "ucx://")):
            raise ValueError(f"dask address must look like tcp://HOST:PORT; got {address!r}")
        return DaskTaskRunner(address=address)
    if not workers or workers < 1:
        raise ValueError(f"dask workers must be a positive integer; got {workers!r}")
    _quiet_scheduler()
    return DaskTaskRunner(cluster_class="distributed.LocalCluster",
                          cluster_kwargs={"n_workers": int(workers), **LOCAL_CLUSTER_KWARGS})


@contextlib.contextmanager
def dask_cluster(address: str | None = None, workers: int | None = None):
    """Yield a scheduler address: ``address`` itself, or a LocalCluster of ``workers`` closed on exit."""
    if address:
        dask_task_runner(address=address)  # validates it
        yield address
        return
    if not workers or workers < 1:
        raise ValueError(f"dask workers must be a positive integer; got {workers!r}")
    from distributed import LocalCluster

    _quiet_scheduler()
    with LocalCluster(n_workers=int(workers), **LOCAL_CLUSTER_KWARGS) as cluster:
        yield cluster.scheduler_address


#: The keyword each store input is passed to its analysis as (contract.INPUTS).
_INPUT_KEYWORDS = {"subsets": "subsets", "parse_flags": "flags", "option_probs": "frame"}


def read_export_inputs(export_dir: str, benchmark: str, variant: str | None, models, names) -> dict:
    """The store inputs ``names`` of the benchmark's variant and ``models``, read from the export on one
    connection by the readers the store's own read uses (tasks/audit/steps.py ``input_readers``). Unlike
    the store's read, an input that cannot be read raises: a worker has no store to fall back to."""
    from benchcert.tasks.audit.steps import input_readers

    con = open_export(export_dir, benchmark)
    try:
        readers = input_readers(con, benchmark, variant, models)
        return {name: readers[name]() for name in names}
    finally:
        con.close()


def _reading_export(name: str, fn, export_dir: str, benchmark: str, m: BenchmarkMatrices, subsets=None):
    """``fn`` given the inputs its registry entry declares, read from the export: config.db is never
    opened off the store's own process (recorded subsets, parse flags, option probabilities)."""
    wanted = [n for n in _INPUT_KEYWORDS if n in SPECS[name].inputs]
    inputs = {"subsets": subsets} if subsets is not None and "subsets" in wanted else {}
    unread = [n for n in wanted if n not in inputs]
    if unread:
        inputs.update(read_export_inputs(export_dir, benchmark, m.variant, m.models, unread))
    return functools.partial(fn, **{_INPUT_KEYWORDS[n]: v for n, v in inputs.items()}) if inputs else fn


_cache_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _cached_inputs(export_dir: str, benchmark: str, variant: str | None, export_id: str):
    from benchcert.tasks.audit.steps import read_benchmark

    m, _, seconds = read_benchmark(None, benchmark, variant, 0.0, export_dir=export_dir)
    return m, read_export_inputs(export_dir, benchmark, variant, m.models, ["subsets"])["subsets"], seconds


def analysis_from_export(export_dir: str, benchmark: str, variant: str | None, name: str,
                         config: AuditConfig) -> AnalysisOutput:
    """Run analysis ``name`` on the benchmark as exported (what a Dask worker does)."""
    stamp = export_manifest(export_dir)["export_id"]
    with _cache_lock:
        m, subsets, _ = _cached_inputs(export_dir, benchmark, variant, stamp)
    # The store's recorded subsets and parse flags come from the export too: config.db is never opened here.
    fn = _reading_export(name, ANALYSES[name], export_dir, benchmark, m, subsets)
    return run_analysis(name, fn, m, dataclasses.replace(config, db=None))


# ---------------------------------------------------------------------------------------------
# per-model-block work

#: Models per block of the per-model-block fan-out. A block's matrix is n_items x block x 8 bytes
#: (80 MB at 20,000 items); measured at 20,000 items (docs/scale.md), its hierarchical task costs
#: about 19 ms CPU per model and a pair of blocks (all pairs) about 0.14 ms CPU per pair, reads of
#: the export included: tasks of seconds to a minute, well above Prefect's orchestration per task.
BLOCK_MODELS = 500

def model_blocks(n_models: int, block_models: int) -> list[tuple[int, int]]:
    """[lo, hi) column ranges of ``block_models`` models; a last block of one model joins the one
    before it (every block has two columns or more: numpy sums a one-column array in another order)."""
    if isinstance(block_models, bool) or not isinstance(block_models, (int, np.integer)) or block_models < 2:
        raise ValueError(f"block_models must be an integer >= 2; got {block_models!r}")
    edges = list(range(0, n_models, int(block_models))) + [n_models]
    if len(edges) > 2 and edges[-1] - edges[-2] < 2:
        del edges[-2]
    return list(zip(edges[:-1], edges[1:]))


@functools.lru_cache(maxsize=1)
def _answered_items(export_dir: str, benchmark: str, variant: str, export_id: str) -> tuple:
    """Item keys answered in ``variant`` by any model: the rows of the whole matrix."""
    from benchcert.tasks.store.matrices import answered_item_keys

    con = open_export(export_dir, benchmark)
    try:
        return answered_item_keys(con, variant)
    finally:
        con.close()


@functools.lru_cache(maxsize=4)
def _cached_block(export_dir: str, benchmark: str, variant: str, models: tuple[str, ...], export_id: str):
    import polars as pl

    from benchcert.tasks.store.blocked import BlockedMatrices
    from benchcert.tasks.store.dense_read import plan_read
    from benchcert.tasks.store.matrices import RawResponses, matrices_from_raw, read_responses

    con = open_export(export_dir, benchmark)
    try:
        plan = plan_read(con, benchmark, variant)
        if plan is not None and set(models) <= set(plan.models):
            # The streamed read (tasks/store/dense_read.py): the whole matrix' rows, these models' columns,
            # read as the out-of-core audit reads a block.
            whole = BlockedMatrices(benchmark, variant, plan, lambda: contextlib.nullcontext(con), reopens=False)
            col = {name: j for j, name in enumerate(plan.models)}
            return BenchmarkMatrices(benchmark, variant, items=plan.rows, models=list(models),
                                     scores=whole.columns([col[x] for x in models]), n_replicates=None)
        raw = read_responses(con, benchmark, variant, list(models))
    finally:
        con.close()
    keys = _answered_items(export_dir, benchmark, variant, export_id)
    items = raw.items.filter(pl.col("item_code").is_in(pl.Series(keys, dtype=raw.items["item_code"].dtype)))
    m = matrices_from_raw(benchmark, variant, RawResponses(items=items, models=raw.models, cells=raw.cells),
                          keep_items=True)
    if m.models != list(models):
        raise RuntimeError(f"the export {export_dir} does not hold the models the flow asked for: "
                           f"{sorted(set(models) - set(m.models))[:5]} missing")
    return m


def read_block(export_dir: str, benchmark: str, variant: str, models: list[str], n_items: int) -> BenchmarkMatrices:
    """The matrix of ``models`` (columns, in that order) with every row of the whole matrix."""
    stamp = export_manifest(export_dir)["export_id"]
    with _cache_lock:
        m = _cached_block(export_dir, benchmark, variant, tuple(models), stamp)
    if m.n_items != n_items:
        raise RuntimeError(f"the export {export_dir} has {m.n_items} items for {benchmark!r}, the flow's matrix "
                           f"{n_items}: it changed since the flow read it")
    return m


def model_block(export_dir: str, benchmark: str, variant: str, name: str, models: list[str], n_items: int,
                config: AuditConfig):
    """Analysis ``name``'s per-model part (its registry entry's ``blocked.model_block``: the hierarchical
    analysis' fits, bounds and comparator intervals) of a block of models."""
    m = read_block(export_dir, benchmark, variant, models, n_items)
    return SPECS[name].blocked.model_block(m, config)


def pair_block_from_export(export_dir: str, benchmark: str, variant: str, models_i: list[str], models_j: list[str],
                           n_items: int, group, codes, colstats, settings: dict):
    """One group of the paired comparisons (pairs of models in blocks i and j), from those blocks'
    columns of the export; returns the group's result and the warnings it raised."""
    from benchcert.stats.comparisons import PairBlock, pair_block

    group = PairBlock(**group)  # sent as a dict of arrays
    s = read_block(export_dir, benchmark, variant, models_i, n_items).scores
    if models_j:
        s = np.concatenate([s, read_block(export_dir, benchmark, variant, models_j, n_items).scores], axis=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        part = pair_block(s, codes, group, colstats, **settings)
    return part, [(w.category, w.message) for w in caught]  # the warnings themselves: their Ref fields travel


#: What the last tasks of this worker process cost (benchmarks/scale.py reads it with Client.run);
#: bounded, for a worker that lives through many nights.
BLOCK_COSTS: collections.deque = collections.deque(maxlen=100_000)


class _costed:  # noqa: N801 - a callable that records what its calls cost
    """``fn``, recording each call's wall and CPU seconds in this worker's :data:`BLOCK_COSTS`."""

    def __init__(self, kind: str, fn):
        self.kind, self.fn = kind, fn

    def __call__(self, *args, **kwargs):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return self.fn(*args, **kwargs)
        finally:
            BLOCK_COSTS.append({"kind": self.kind, "wall_s": time.perf_counter() - wall,
                                "cpu_s": time.process_time() - cpu})


def _analysis_costed(export_dir: str, benchmark: str, variant: str | None, name: str,
                     config: AuditConfig) -> AnalysisOutput:
    return _costed(f"analysis:{name}", analysis_from_export)(export_dir, benchmark, variant, name, config)


analysis_from_export_task = task(name="analysis", cache_policy=NO_CACHE)(_analysis_costed)
def _model_block_costed(export_dir, benchmark, variant, name, models, n_items, config):
    return _costed(f"{name}-block", model_block)(export_dir, benchmark, variant, name, models, n_items, config)


def _pair_block_costed(export_dir, benchmark, variant, models_i, models_j, n_items, group, codes, colstats, settings):
    return _costed("comparisons-block", pair_block_from_export)(export_dir, benchmark, variant, models_i, models_j,
                                                                 n_items, group, codes, colstats, settings)


# (module-level functions: a worker runs them from its own import of this module, so BLOCK_COSTS is its own)
# named "<analysis>-block" where it is submitted (e.g. "hierarchical-block")
model_block_task = task(name="model-block", cache_policy=NO_CACHE)(_model_block_costed)
pair_block_task = task(name="comparisons-block", cache_policy=NO_CACHE)(_pair_block_costed)


class _PairBlocksOnCluster:
    """The groups of a blocked pairwise computation as Prefect tasks (stats/comparisons/blocks.py pair_block_runner)."""

    def __init__(self, export_dir: str, benchmark: str, variant: str, models: list[str], n_items: int,
                 scores):
        """``scores``: the flow's matrix, or a function giving it (read only if a group over every
        model comes here: a 0/1 benchmark's comparisons compute that group from its bits instead)."""
        self.where = (export_dir, benchmark, variant)
        self.models, self.n_items, self._scores = models, n_items, scores

    @property
    def scores(self) -> np.ndarray:
        return self._scores() if callable(self._scores) else self._scores

    def _here(self, g, codes, colstats, settings):
        """A group over every model (a few pairs among many: leaderboard or baseline family) is computed
        on the flow's own matrix: sending it out would make a worker read the whole matrix again."""
        from benchcert.stats.comparisons import pair_block

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            part = pair_block(self.scores, codes, g, tuple(c[g.cols] for c in colstats), **settings)
        return part, [(w.category, w.message) for w in caught]

    def __call__(self, groups, codes, colstats, **settings):
        futures = []
        for g in groups:
            i, j = g.blocks
            bm = g.block_models
            models_i = self.models[i * bm:(i + 1) * bm]
            models_j = self.models[j * bm:(j + 1) * bm] if j != i else []
            if len(models_i) == len(self.models):
                futures.append(self._here(g, codes, colstats, settings))
                continue
            # (arrays: Prefect does not walk them element by element, so no quote() is needed)
            group = {f.name: getattr(g, f.name) for f in dataclasses.fields(g)}
            futures.append(pair_block_task.submit(*self.where, models_i, models_j, self.n_items, group, codes,
                                                  tuple(c[g.cols] for c in colstats), settings))
        for f in futures:
            part, caught = f if isinstance(f, tuple) else f.result()
            for category, message in caught:  # raised here, inside the analysis' own warning capture
                warnings.warn(message, category, stacklevel=2)  # (a Warning instance is raised as itself)
            yield part


def analyses_on_cluster(export_dir: str, benchmark: str, variant: str, names: list[str], config: AuditConfig,
                        matrices: BenchmarkMatrices, *, block_models: int | None = None) -> list[AnalysisOutput]:
    """Every analysis of ``names`` on the flow's task runner; those with a blocked form (their registry
    entry's ``blocked``: the hierarchical analysis' per-model work, the comparisons' pairs) by blocks of
    ``block_models`` models, assembled here.  Outputs in the order of ``names``."""
    from benchcert.stats.comparisons import pair_block_runner

    bm = BLOCK_MODELS if block_models is None else block_models
    blocks = model_blocks(len(matrices.models), bm)
    remote = dataclasses.replace(config, db=None)  # workers never open the store
    n_items = matrices.n_items
    blocked = len(blocks) > 1
    forms = {name: SPECS[name].blocked if blocked else None for name in names}
    per_model = [name for name in names if forms[name] is not None and forms[name].model_block is not None]
    by_pairs = [name for name in names if forms[name] is not None and forms[name].pairs]
    futures: dict = {}
    for name in names:
        if name in per_model:
            submit = model_block_task.with_options(name=f"{name}-block").submit
            futures[name] = [submit(export_dir, benchmark, variant, name, matrices.models[lo:hi], n_items, remote)
                             for lo, hi in blocks]
        elif not blocked:
            futures[name] = analysis_from_export_task.submit(export_dir, benchmark, variant, name, remote)
    outputs = {}
    wholes: dict = {}
    if blocked:
        # A benchmark large enough for blocks runs its whole-matrix work here, on the matrix the flow
        # holds already, while the workers fit the blocks: on a worker each such task read the whole
        # matrix from the export again and held it (at 320M responses: about 20 CPU s and 2.4 GiB a
        # worker, docs/scale.md). Small benchmarks still send it out (a nightly run's many audits
        # then share the cluster).
        for name in names:
            if name not in per_model and name not in by_pairs:
                fn = _reading_export(name, ANALYSES[name], export_dir, benchmark, matrices)
                outputs[name] = run_analysis(name, fn, matrices, remote)
        for name in per_model:
            whole = forms[name].whole
            try:
                wholes[name] = None if whole is None else whole(matrices, remote)
            except Exception as exc:  # noqa: BLE001 - raised where the analysis assembles, as a task's error was
                wholes[name] = exc
    for name in by_pairs:
        # The analysis runs here, on the flow's matrix (pairs chosen, family adjusted, ranks); its pairs
        # go to the workers by pairs of model blocks.
        runner = _PairBlocksOnCluster(export_dir, benchmark, variant, matrices.models, n_items,
                                      lambda: matrices.scores)

        def by_blocks(m, c, runner=runner, fn=ANALYSES[name]):
            with pair_block_runner(lambda *a, **k: list(runner(*a, **k)), bm):
                return fn(m, c)

        outputs[name] = run_analysis(name, by_blocks, matrices, remote)
    for name, fut in futures.items():
        if name in per_model:

            def assemble(m, c, block_futures=fut, whole=wholes[name], form=forms[name]):
                if isinstance(whole, BaseException):
                    raise whole
                return form.assemble(m, c, [f.result() for f in block_futures], whole)

            outputs[name] = run_analysis(name, assemble, matrices, remote)
        else:
            outputs[name] = fut.result()
    return [outputs[n] for n in names]
