"""HELM run directories (``benchmark_output/runs/<suite>/<run name>/``).

Read: ``run_spec.json`` (``name``, ``scenario_spec.args``, ``adapter_spec.model``, ``groups``)
and ``per_instance_stats.json`` (a list of ``{instance_id, train_trial_index, perturbation?,
stats: [{name: {name, split, perturbation?}, count, sum, mean, ...}]}``).  The directory is one
source: its content hash covers both files.

Mapping to the canonical row:

* ``score`` = the chosen stat's per-instance ``mean`` (``sum / count`` when no mean) on one
  split: ``--stat NAME`` or ``--stat NAME:SPLIT``; default ``exact_match`` on the ``test`` split
  when the run has one (HELM's headline split), else on the run's only split.  Instances of
  other splits are counted in the report, not read;
* ``model`` = ``adapter_spec.model``; ``benchmark`` = ``--benchmark``, else the run's first group
  (``mmlu``, ``hellaswag``), else the scenario part of the run name;
* ``subject`` = ``scenario_spec.args.subject`` (or ``subject=`` in the run name), else ``all``;
  for MMLU subjects ``domain`` is the subject's group (stem / humanities / social_sciences /
  other) from lm-evaluation-harness' ``mmlu/_generate_configs.py``, else ``all``;
* ``item_id`` = the instance id, prefixed with the scenario arguments when there are some
  (``subject=philosophy/id147``): HELM numbers instances per scenario run, so the same id
  recurs across MMLU subjects;
* ``variant`` = the perturbation's name (``""`` for the original instance), with its parameters
  appended when one name occurs with several settings in the run; ``replicate`` =
  ``train_trial_index``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchcert.tasks.ingest.adapters.generic import Reject
from benchcert.tasks.ingest.adapters.native import (
    NativeError, NativeSource, Row, check_mapped, load_json, score_choice, sha256_files)
from benchcert.tasks.ingest.adapters import registry
from benchcert.tasks.ingest.mapping import ColumnMapping

FORMAT = "helm"
DEFAULT_STAT = "exact_match"
#: MMLU subject -> group, from EleutherAI/lm-evaluation-harness lm_eval/tasks/mmlu/_generate_configs.py
#: (SUBJECTS; MIT licence), the grouping lm-eval reports as mmlu_stem / _humanities / _social_sciences / _other.
MMLU_DOMAINS = {
    **dict.fromkeys((
        "abstract_algebra anatomy astronomy college_biology college_chemistry college_computer_science "
        "college_mathematics college_physics computer_security conceptual_physics electrical_engineering "
        "elementary_mathematics high_school_biology high_school_chemistry high_school_computer_science "
        "high_school_mathematics high_school_physics high_school_statistics machine_learning").split(), "stem"),
    **dict.fromkeys((
        "formal_logic high_school_european_history high_school_us_history high_school_world_history "
        "international_law jurisprudence logical_fallacies moral_disputes moral_scenarios philosophy prehistory "
        "professional_law world_religions").split(), "humanities"),
    **dict.fromkeys((
        "econometrics high_school_geography high_school_government_and_politics high_school_macroeconomics "
        "high_school_microeconomics high_school_psychology human_sexuality professional_psychology "
        "public_relations security_studies sociology us_foreign_policy").split(), "social_sciences"),
    **dict.fromkeys((
        "business_ethics clinical_knowledge college_medicine global_facts human_aging management marketing "
        "medical_genetics miscellaneous nutrition professional_accounting professional_medicine virology").split(),
        "other"),
}
_PERTURBATION_FLAGS = {"name", "robustness", "fairness", "computed_on"}


def _stat_name(stat: Any) -> dict:
    return stat.get("name") if isinstance(stat, dict) and isinstance(stat.get("name"), dict) else {}


def _value(stat: dict) -> tuple[float | None, str | None]:
    count = stat.get("count")
    if isinstance(count, (int, float)) and not isinstance(count, bool) and count == 0:
        return None, "the stat has no value for this instance (count 0)"
    mean = stat.get("mean")
    if isinstance(mean, (int, float)) and not isinstance(mean, bool):
        return float(mean), None
    if "mean" in stat:
        return None, f"expected a numeric mean, got {json.dumps(mean)[:60]}"
    total = stat.get("sum")
    if isinstance(total, (int, float)) and isinstance(count, (int, float)) and count:
        return float(total) / float(count), None
    return None, f"expected a numeric mean, got {json.dumps(mean)[:60]}"


def _perturbation_key(p: dict) -> str:
    params = {k: v for k, v in sorted(p.items()) if k not in _PERTURBATION_FLAGS}
    return json.dumps(params, sort_keys=True, default=str)


def _stat_and_split(stats_file: Path, instances: list, choice: str) -> tuple[str, str]:
    """The stat and split read (``--stat NAME[:SPLIT]``; the test split, or the only one, by default)."""
    stat, _, split = choice.partition(":")
    names: set[str] = set()
    splits: dict[str, int] = {}
    for inst in instances:
        for st in (inst.get("stats") or []) if isinstance(inst, dict) and isinstance(inst.get("stats"), list) else []:
            n = _stat_name(st)
            if isinstance(n.get("name"), str):
                names.add(n["name"])
                if n["name"] == stat and not n.get("perturbation"):
                    splits[str(n.get("split"))] = splits.get(str(n.get("split")), 0) + 1
    if not splits:
        raise NativeError(f"{stats_file}: unknown stat {stat!r}: this run has {sorted(names)}; "
                          "choose one with --stat NAME")
    if split:
        if split not in splits:
            raise NativeError(f"{stats_file}: stat {stat!r} has no split {split!r}; its splits are {sorted(splits)}")
    elif "test" in splits or len(splits) == 1:
        split = "test" if "test" in splits else next(iter(splits))
    else:
        raise NativeError(f"{stats_file}: stat {stat!r} is on splits {sorted(splits)} and none is 'test'; "
                          "choose one with --stat NAME:SPLIT")
    return stat, split


def open_source(run_dir: Path, mapping: ColumnMapping, benchmark: str | None) -> NativeSource:
    run_dir = Path(run_dir)
    check_mapped(run_dir, FORMAT, mapping, ())
    files = [run_dir / "per_instance_stats.json", run_dir / "run_spec.json"]
    for f in files:
        if not f.is_file():
            raise NativeError(f"{run_dir}: not a HELM run directory: {f.name} is missing")
    spec = load_json(files[1], "HELM run_spec.json")
    instances = load_json(files[0], "HELM per_instance_stats.json")
    if not isinstance(spec, dict):
        raise NativeError(f"{files[1]}: expected a JSON object, got {type(spec).__name__}")
    if not isinstance(instances, list):
        raise NativeError(f"{files[0]}: expected a JSON list of instances, got {type(instances).__name__}")
    adapter = spec.get("adapter_spec") if isinstance(spec.get("adapter_spec"), dict) else {}
    model = getattr(mapping, "model", None) or adapter.get("model") or adapter.get("model_deployment")  # --model first
    if not isinstance(model, str) or not model:
        raise NativeError(f"{files[1]}: adapter_spec.model is missing")
    name = spec.get("name") if isinstance(spec.get("name"), str) else run_dir.name
    scen = spec.get("scenario_spec") if isinstance(spec.get("scenario_spec"), dict) else {}
    args = scen.get("args") if isinstance(scen.get("args"), dict) else {}
    groups = [g for g in (spec.get("groups") or []) if isinstance(g, str)]
    bench = benchmark or (groups[0] if groups else name.split(":", 1)[0])
    m = re.search(r"(?:^|[:,])subject=([^,]+)", name)
    subject = str(args.get("subject") or (m.group(1) if m else "") or "all")
    is_mmlu = "mmlu" in groups or name.startswith("mmlu")
    domain = MMLU_DOMAINS.get(subject, "all") if is_mmlu else "all"
    prefix = ",".join(f"{k}={v}" for k, v in sorted(args.items()))

    stat, split = _stat_and_split(files[0], instances, score_choice(mapping, "stat") or DEFAULT_STAT)
    settings_by_name: dict[str, set[str]] = {}
    for inst in instances:
        p = inst.get("perturbation") if isinstance(inst, dict) else None
        if isinstance(p, dict) and isinstance(p.get("name"), str):
            settings_by_name.setdefault(p["name"], set()).add(_perturbation_key(p))

    def variant_of(p: dict) -> str:
        if len(settings_by_name.get(p["name"], ())) <= 1:
            return p["name"]
        params = json.loads(_perturbation_key(p))
        return p["name"] + "(" + ",".join(f"{k}={v}" for k, v in params.items()) + ")"

    def records() -> Iterator[Row | Reject]:
        for line, inst in enumerate(instances, start=1):
            raw = lambda inst=inst: json.dumps(_excerpt(inst, stat), default=str)  # noqa: E731
            if not isinstance(inst, dict):
                yield Reject(line, "<instance>", f"expected a JSON object, got {type(inst).__name__}", raw())
                continue
            iid = inst.get("instance_id")
            if not isinstance(iid, str) or not iid.strip():
                yield Reject(line, "instance_id", "missing" if iid is None else
                             f"expected a non-empty string, got {json.dumps(iid)[:40]}", raw())
                continue
            stats = inst.get("stats")
            if not isinstance(stats, list):
                yield Reject(line, "stats", "missing" if stats is None else
                             f"expected a list, got {type(stats).__name__}", raw())
                continue
            mine = [st for st in stats if _stat_name(st).get("name") == stat]
            here = [st for st in mine if str(_stat_name(st).get("split")) == split]
            if not here:
                if mine:
                    continue  # the instance belongs to another split (counted in the notes)
                yield Reject(line, f"stats.{stat}", f"stat {stat!r} missing for this instance", raw())
                continue
            here.sort(key=lambda st: (bool(_stat_name(st).get("sub_split")), bool(_stat_name(st).get("perturbation"))))
            score, why = _value(here[0])
            if why:
                yield Reject(line, f"stats.{stat}", why, raw())
                continue
            trial = inst.get("train_trial_index", 0)
            if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
                yield Reject(line, "train_trial_index",
                             f"expected an integer >= 0, got {json.dumps(trial)[:40]}", raw())
                continue
            p = inst.get("perturbation")
            if p is not None and not (isinstance(p, dict) and isinstance(p.get("name"), str)):
                yield Reject(line, "perturbation", "expected an object with a name", raw())
                continue
            yield Row(line=line, model=model, item_id=f"{prefix}/{iid}" if prefix else iid, score=score,
                      subject=subject, domain=domain, variant=variant_of(p) if p else "", replicate=trial,
                      src=inst)

    source = NativeSource(
        format=FORMAT, path=run_dir, sha256=sha256_files(run_dir, files), benchmark=bench,
        settings={"stat": stat, "split": split, **({"model": model} if getattr(mapping, "model", None) else {})},
        read={"run": name, "model": model, "stat": f"{stat} ({split} split)", "instances": len(instances),
              "perturbations": sorted(settings_by_name)},
        records=records, describe=lambda inst: json.dumps(_excerpt(inst, stat), default=str))
    n_other = sum(1 for inst in instances if isinstance(inst, dict) and isinstance(inst.get("stats"), list)
                  and any(_stat_name(st).get("name") == stat for st in inst["stats"])
                  and not any(_stat_name(st).get("name") == stat and str(_stat_name(st).get("split")) == split
                              for st in inst["stats"]))
    if n_other:
        source.notes.append(f"{n_other} instance(s) of other splits not read (choose with --stat {stat}:SPLIT)")
    return source


def _excerpt(inst: Any, stat: str) -> Any:
    if not isinstance(inst, dict):
        return inst
    out = {k: v for k, v in inst.items() if k != "stats"}
    if isinstance(inst.get("stats"), list):
        out["stats"] = [st for st in inst["stats"] if _stat_name(st).get("name") == stat] or "(no such stat)"
    else:
        out["stats"] = inst.get("stats")
    return out


# --- its entry in the adapter registry --------------------------------------------------------

HELM_FILES = ("per_instance_stats.json", "run_spec.json")


def is_helm_run(path: Path) -> bool:
    """Whether ``path`` is a HELM run directory (per_instance_stats.json and run_spec.json in it)."""
    return path.is_dir() and all((path / f).is_file() for f in HELM_FILES)


def sniff(probe: registry.Probe) -> str | None:
    """``helm`` for a run directory or its per_instance_stats.json, ``helm_part`` for another file of a run."""
    if probe.directory:
        return FORMAT if is_helm_run(probe.path) else None
    obj, text = probe.obj, (probe.prefix or "").lstrip()
    if isinstance(obj, dict):
        return "helm_part" if "adapter_spec" in obj and "scenario_spec" in obj else None
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        if "instance_id" in obj[0] and "stats" in obj[0]:
            return FORMAT
        return "helm_part" if isinstance(obj[0].get("name"), dict) and "count" in obj[0] else None
    if obj is not registry.NOT_JSON:
        return None
    if text.startswith("{"):
        return "helm_part" if registry.has_keys(text, "adapter_spec", "scenario_spec") else None
    if text.startswith("["):
        if registry.has_keys(text, "instance_id", "stats"):
            return FORMAT
        if re.search(r'"name"\s*:\s*\{', text) and registry.has_keys(text, "count"):
            return "helm_part"
    return None


def open_log(path: Path, mapping: ColumnMapping, benchmark: str | None, kind: str | None) -> NativeSource:
    """The run directory of ``path`` (itself, or the folder of its per_instance_stats.json)."""
    if kind == "helm_part" and mapping.format != FORMAT:
        raise NativeError(f"{path}: a file of a HELM run directory without per_instance_stats.json and run_spec.json "
                          "beside it; ingest the run directory (both files are needed)")
    return open_source(path.parent if path.is_file() else path, mapping, benchmark)


ADAPTER = registry.Adapter(
    name=FORMAT, sniff=sniff, open=open_log, options=("stat",),
    reads="a HELM run directory (`per_instance_stats.json` + `run_spec.json`)")
