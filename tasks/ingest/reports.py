"""What ingest says about each file and about the command: the file's report and the closing summary."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: Outcomes that are not failures; ``metadata`` = a file with no item rows that other files read
#: (lm-eval's aggregated results_<date>.json).
OK_STATUSES = ("ingested", "unchanged", "metadata")
#: Status of a file that was ingested inside an --atomic command whose transaction was rolled back.
ROLLED_BACK = "rolled-back"
#: Status of a file an --atomic command did not try after an earlier file failed.
NOT_TRIED = "not-tried"
MAX_REPORTED_REJECTS = 50


@dataclass
class FileReport:
    """One file's outcome: its status, counts, message (naming the file) and first rejects."""

    path: str
    status: str  # ingested | unchanged | metadata | rejected | conflict | error | locked | unusable (the store)
    #            | rolled-back | not-tried (--atomic)
    format: str | None = None
    sha256: str | None = None
    source_id: int | None = None
    rows_read: int = 0
    rows_accepted: int = 0
    rows_added: int = 0
    rows_already_stored: int = 0
    rows_rejected: int = 0
    duplicate_rows_in_file: int = 0
    message: str = ""
    rejects: list[dict] = field(default_factory=list)
    read: dict = field(default_factory=dict)  # native logs: what was read (model, task, metric, ...)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def as_dict(self) -> dict:
        return asdict(self)


def unchanged_message(path, source_id: int) -> str:
    """The report of a file whose content is stored already with the same settings."""
    return f"{path}: already ingested as source {source_id} (same content and settings); nothing added"


def command_summary(reports: list[dict]) -> dict:
    """The end-of-command summary: which files were stored and which refused, with counts.

    ``stored`` holds the files whose content is in the store after the command (ingested,
    already there, or metadata read by others); every other file is ``refused``.
    """
    stored = [r for r in reports if r["status"] in OK_STATUSES]
    refused = [r for r in reports if r["status"] not in OK_STATUSES]
    return {"n_stored": len(stored), "n_refused": len(refused),
            "rows_added": sum(r.get("rows_added", 0) for r in stored),
            "stored": [{"path": r["path"], "status": r["status"], "rows_added": r.get("rows_added", 0)} for r in stored],
            "refused": [{"path": r["path"], "status": r["status"]} for r in refused]}


def summary_text(summary: dict, db) -> str:
    """The summary as the lines the command prints last."""
    lines = [f"stored: {summary['n_stored']} file(s), {summary['rows_added']} row(s) added to {db}"]
    lines += [f"    {r['path']} ({r['status']}, {r['rows_added']} row(s) added)" for r in summary["stored"]]
    lines.append(f"refused: {summary['n_refused']} file(s)")
    lines += [f"    {r['path']} ({r['status']})" for r in summary["refused"]]
    return "\n".join(lines)
