"""What changed since the previous run of a benchmark, and who is told about regressions.

The previous run is found through the artifacts (index.json and the run's summary.json),
not the live database, so this works wherever the artifacts are readable.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchcert.tasks.audit.regressions import regressed_models
from benchcert.tasks.artifacts.folders import benchmark_folder, inside, safe_component

from benchcert.tasks.artifacts.runs import load_json, read_index
from benchcert.tasks.errors import UsageError
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
            run_dir = inside(root, benchmark_folder(root, benchmark), safe_component(entry["latest_run_id"]))
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
    regressions = regressed_models((mv.model for mv in moves if mv.direction == "down"),
                                   ((v.model, v.verdict) for v in current.verdicts))
    return RunChanges(previous_run_id=previous["run_id"], new_models=sorted(set(now) - set(before)),
                      removed_models=sorted(set(before) - set(now)), moves=moves, regressions=regressions)


#: Overall deadline of one webhook delivery (connect, send, status line), in seconds.
WEBHOOK_DEADLINE_S = 10.0


class WebhookError(UsageError):
    """A webhook URL benchcert will not call (not http/https, no host, malformed): a usage error (exit 2)."""


def check_webhook_url(url: str) -> str:
    """The URL itself if benchcert may POST to it, else :class:`WebhookError` saying why.

    Only ``http`` and ``https`` with a host are accepted (no ``file:``, ``data:``, ``ftp:``);
    commands check this when they start, so a bad URL is a usage error, not a failed run.
    """
    import urllib.parse

    if not isinstance(url, str) or not url.strip():
        raise WebhookError("webhook URL is empty")
    if any(c in url for c in "\r\n\x00 "):
        raise WebhookError(f"webhook URL {url!r} contains whitespace or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebhookError(f"webhook URL {url!r} is malformed: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise WebhookError(f"webhook URL {url!r}: only http:// and https:// are allowed, not {parts.scheme or 'no'} "
                           "scheme")
    if not parts.hostname:
        raise WebhookError(f"webhook URL {url!r} has no host")
    del port
    return url


def notify_webhook(url: str, summary: Summary, run_dir: str, *, timeout: float = WEBHOOK_DEADLINE_S) -> str:
    """POST a JSON notice of the run's regressions; returns a short status for the run log.

    Delivered means a 2xx answer.  A redirect is not followed (following it would resend to
    another URL, or turn the POST into a GET that drops the body) and counts as a failure, as
    does any other status.  ``timeout`` is a deadline for the whole exchange (connect, send,
    status line), not per socket read, so a server that trickles bytes cannot hold the audit.
    A failing webhook never fails the audit: the artifacts are already written.
    """
    changes = summary.changes
    body = {"event": "benchcert.regression", "benchmark": summary.benchmark, "run_id": summary.run_id,
            "run_dir": run_dir, "regressions": changes.regressions if changes else [],
            "moves": [m.model_dump() for m in changes.moves] if changes else [],
            "verdicts": [v.model_dump() for v in summary.verdicts if v.verdict == "regressed"]}
    return post_status(url, body, timeout=timeout)


def post_status(url: str, body: dict, *, timeout: float = WEBHOOK_DEADLINE_S) -> str:
    """POST ``body`` as JSON once, within ``timeout``: a short status for the run log (never raises;
    the rules of :func:`notify_webhook`: 2xx delivered, a redirect not followed)."""
    import http.client  # here, not at import: only a webhook needs it (20 ms of every audit)

    try:
        status = post_json(url, body, deadline=timeout)
    except (OSError, ValueError, WebhookError, http.client.HTTPException) as exc:  # (a refused URL too)
        return f"webhook failed: {type(exc).__name__}: {exc}"
    if 200 <= status < 300:
        return f"webhook {status}"
    if 300 <= status < 400:
        return f"webhook failed: HTTP {status} redirect, not followed for a POST"
    return f"webhook failed: HTTP {status}"


#: Tries of one delivery, all inside the one deadline, and the pause between them (seconds).
WEBHOOK_TRIES = 3
WEBHOOK_PAUSE_S = 1.0


def deliver_webhook(url: str, summary: Summary, run_dir: str, *, deadline: float | None = None) -> str:
    """:func:`notify_webhook`, tried as :func:`deliver_with_retries` says."""
    return deliver_with_retries(lambda left: notify_webhook(url, summary, run_dir, timeout=left), deadline=deadline)


def deliver_json(url: str, body: dict, *, deadline: float | None = None) -> str:
    """POST ``body`` (e.g. a suite verdict's notice), tried as :func:`deliver_with_retries` says."""
    return deliver_with_retries(lambda left: post_status(url, body, timeout=left), deadline=deadline)


def deliver_with_retries(send, *, deadline: float | None = None) -> str:
    """``send(seconds_left)``, tried up to ``WEBHOOK_TRIES`` times, all within one ``deadline``.

    The deadline (default ``WEBHOOK_DEADLINE_S``) holds for the whole exchange including the
    retries and the pauses between them: each try gets the time that is left, and no try starts
    with less than a tenth of the deadline left.  A redirect or a 4xx answer is not retried (it
    would be answered the same way).  Returns the last try's status, with the number of tries.
    """
    import time

    total = WEBHOOK_DEADLINE_S if deadline is None else deadline
    end = time.monotonic() + total
    status = "webhook failed: no try"
    for attempt in range(1, WEBHOOK_TRIES + 1):
        left = end - time.monotonic()
        if left < total / 10:
            break
        status = send(left)
        if not status.startswith("webhook failed") or "redirect" in status or " HTTP 4" in status:
            return status if attempt == 1 else f"{status} (try {attempt})"
        time.sleep(max(0.0, min(WEBHOOK_PAUSE_S, end - time.monotonic())))
        status = f"{status} (after {attempt} tr{'y' if attempt == 1 else 'ies'} within the {total:g} s deadline)"
    return status


def post_json(url: str, body: dict, *, deadline: float) -> int:
    """POST ``body`` as JSON and return the status code; the whole exchange ends by ``deadline`` seconds."""
    import http.client
    import socket
    import threading
    import urllib.parse

    check_webhook_url(url)
    parts = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme.lower() == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=deadline)
    expired = threading.Event()

    def cut() -> None:  # unblocks any read or write in progress once the deadline passes
        expired.set()
        sock = conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timer = threading.Timer(deadline, cut)
    timer.daemon = True
    timer.start()
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", path, body=json.dumps(body).encode("utf-8"),
                     headers={"Content-Type": "application/json", "User-Agent": "benchcert"})
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException):
        if expired.is_set():
            raise TimeoutError(f"no answer within the {deadline:g} s deadline") from None
        raise
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():
        raise TimeoutError(f"no answer within the {deadline:g} s deadline")
    return status
