"""The hierarchical analysis' settings as the command line and config files give them:
``--hierarchy`` and ``--weights FILE`` (AuditConfig.hierarchy and AuditConfig.subject_weights)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from benchcert.tasks.hierarchy import HIERARCHIES, LEVELS

#: Split-half settings: at most the paper's 500 splits, drawn in rounds of SPLIT_ROUND until each
#: (domain, model) mean's Monte-Carlo standard error is at most SPLIT_MC_TOL (split_half(mc_tol=):
#: the same estimand, the expectation over random splits, at a stated Monte-Carlo error; the table's
#: ``mc_se`` column carries it), and a fixed seed so a run is reproducible.
N_SPLITS = 500
SPLIT_ROUND = 50
SPLIT_MC_TOL = 0.01
SPLIT_SEED = 20240607

def parse_hierarchy(text: str) -> tuple[str, ...]:
    """``--hierarchy`` value -> AuditConfig.hierarchy.

    Accepts ``subject,domain`` (default), ``subject``, ``none``, and the explicit form
    ``subject=subject,domain=domain`` (levels name the canonical fields the store holds; to
    use another log column as a level, map it to ``subject``/``domain`` at ingest).
    """
    raw = (text or "").strip().lower()
    if raw in ("", "none", "()", "-"):
        return ()
    levels = []
    for part in raw.split(","):
        part = part.strip()
        level, _, col = part.partition("=")
        level, col = level.strip(), (col.strip() or level.strip())
        if level not in LEVELS or col != level:
            raise ValueError(f"--hierarchy: {part!r} is not a level; use subject,domain | subject | none "
                             "(to use another column as a level, map it with --map subject=COL or "
                             "--map domain=COL at ingest)")
        levels.append(level)
    out = tuple(levels)
    if out not in HIERARCHIES or not out:
        raise ValueError(f"--hierarchy must be subject,domain | subject | none; got {text!r}")
    return out


def read_subject_weights(path: str | Path) -> dict[str, float]:
    """Subject weights from a file: TOML (a ``[subject_weights]`` table or top-level
    ``subject = weight`` pairs), JSON (an object) or CSV (columns ``subject,weight``)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".toml", ".json", ".csv"):
        raise ValueError(f"{p}: weights file must be .toml, .json or .csv")
    text = p.read_text(encoding="utf-8")
    if suffix == ".toml":
        import tomllib

        data = tomllib.loads(text)
        data = data.get("subject_weights", data)
    elif suffix == ".json":
        data = json.loads(text)
    elif suffix == ".csv":
        frame = pl.read_csv(p, schema_overrides={"subject": pl.String, "weight": pl.Float64})
        if not {"subject", "weight"} <= set(frame.columns):
            raise ValueError(f"{p}: a weights CSV needs columns subject,weight; got {frame.columns}")
        data = dict(zip(frame["subject"].to_list(), frame["weight"].to_list()))
    if not isinstance(data, dict) or not data:
        raise ValueError(f"{p}: expected a non-empty mapping subject -> weight")
    out = {}
    for k, v in data.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise ValueError(f"{p}: weight of subject {k!r} must be a number >= 0; got {v!r}")
        out[str(k)] = float(v)
    return out
