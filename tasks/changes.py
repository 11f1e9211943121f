"""What changed since the previous run of a benchmark, and who is told about regressions.

The previous run is found through the artifacts (index.json and the run's summary.json),
not the live database, so this works wherever the artifacts are readable.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from benchcert.tasks.artifacts import inside, load_json, read_index, safe_component
from benchcert.tasks.schemas import RunChanges, ScoreMove, Summary

#: Interval used to judge a move, most defensible first (later analyses add "hierarchical").
MOVE_METHODS = ("hierarchical", "clustered_subject", "wilson", "iid_clt")


def previous_summary(root: str | Path, benchmark: str) -> dict | None:
    """summary.json of the latest completed run of ``benchmark`` under ``root``, if any."""
    root = Path(root)
    if not root.is_dir():
        return None
    index = read_index(root)  # rebuilt from the run directories when missing or damaged
    for entry in index.get("benchmarks", []):
        if entry.get("benchmark") == benchmark and entry.get("runs"):
            run_dir = inside(root, safe_component(benchmark), safe_component(entry["latest_run_id"]))
            if (run_dir / "summary.json").is_file():
                return load_json(run_dir / "summary.json")
    return None


def _interval(score: dict) -> dict | None:
    by = {i["method"]: i for i in score["intervals"]}
    return next((by[m] for m in MOVE_METHODS if m in by), None)


def run_changes(current: Summary, previous: dict | None) -> RunChanges | None:
    """New and removed models, and scores that left the previous run's interval (None for a first run)."""
    if previous is None:
        return None
    now = {m.model: m for m in current.models}
    before = {m["model"]: m for m in previous["models"]}
    moves = []
    for model in sorted(set(now) & set(before)):
        for metric in ("macro", "pooled"):
            old = before[model][metric]
            iv = _interval(old)
            if iv is None:
                continue
            new = getattr(now[model], metric).estimate
            if new < iv["lower"] or new > iv["upper"]:
                moves.append(ScoreMove(model=model, metric=metric, method=iv["method"], previous=old["estimate"],
                                       current=new, previous_lower=iv["lower"], previous_upper=iv["upper"],
                                       direction="down" if new < iv["lower"] else "up"))
    regressions = sorted({mv.model for mv in moves if mv.direction == "down"}
                         | {v.model for v in current.verdicts if v.verdict == "regressed"})
    return RunChanges(previous_run_id=previous["run_id"], new_models=sorted(set(now) - set(before)),
                      removed_models=sorted(set(before) - set(now)), moves=moves, regressions=regressions)


def notify_webhook(url: str, summary: Summary, run_dir: str, *, timeout: float = 10.0) -> str:
    """POST a JSON notice of the run's regressions; returns a short status for the run log.

    A failing webhook never fails the audit: the artifacts are already written.
    """
    changes = summary.changes
    body = {"event": "benchcert.regression", "benchmark": summary.benchmark, "run_id": summary.run_id,
            "run_dir": run_dir, "regressions": changes.regressions if changes else [],
            "moves": [m.model_dump() for m in changes.moves] if changes else [],
            "verdicts": [v.model_dump() for v in summary.verdicts if v.verdict == "regressed"]}
    req = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "benchcert"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return f"webhook {resp.status}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"webhook failed: {exc}"
