"""The dashboard's one look: page frame, style sheet, tables and links, shared by every page kind.

Every page of the site (overview, benchmark, run, model, training run, checkpoint grid) is built
with :func:`page` and :func:`table`, so they share one style sheet, one Content-Security-Policy
(:data:`SITE_CSP`) and one rule for what is inserted verbatim: markup built here is wrapped in
:class:`Html`, and everything else -- every string that comes from an artifact -- is escaped with
:func:`~benchcert.tasks.render.escape.escape` (:func:`h`).

Looks: colours are the Okabe-Ito palette (:data:`PALETTE`, distinguishable with the common
colour-vision deficiencies), and a verdict is never told by colour alone (a symbol and the word
go with it, :mod:`benchcert.tasks.render.verdict_rows`).  The style sheet lays tables out in
scrolling wrappers and lets charts shrink, so a page reads at 1,400 px and at a phone's 390 px
without any script.
"""

from __future__ import annotations

import functools
from urllib.parse import quote

from benchcert.tasks.render.escape import escape

__all__ = ["SITE_CSP", "PALETTE", "METRIC_COLORS", "DASH", "Html", "h", "link", "href", "level", "page", "table"]

#: Same-origin frames are the only fetch a page may make (the embedded report.html).
SITE_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'; "
            "base-uri 'none'; form-action 'none'")

#: Okabe and Ito's colour-blind-safe palette (blue, vermillion, bluish green, reddish purple,
#: orange, sky blue, black, grey).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#8C8C8C")
#: The two weightings' colours in every dashboard chart.
METRIC_COLORS = {"macro": "#0072b2", "pooled": "#d55e00"}
DASH = "\u2014"


class Html(str):
    """Markup built here from escaped parts; inserted verbatim, everything else is escaped."""


def h(value) -> str:
    """``value`` as markup: itself when it is :class:`Html`, else escaped (a number's text needs no escaping;
    a string is escaped once per build, :func:`_escaped`: names and run ids recur on thousands of pages)."""
    kind = type(value)  # by exact type first: this runs for every cell of every page
    if kind is str:
        return _escaped(value)
    if kind is Html:
        return value
    if kind is int or kind is float:
        return str(value)
    return value if isinstance(value, Html) else escape(value)


@functools.lru_cache(maxsize=1 << 16)
def _escaped(text: str) -> str:
    return escape(text)


def link(target: str, text) -> Html:
    return Html(f'<a href="{escape(target)}">{h(text)}</a>')


def href(*parts: str) -> str:
    """A relative URL from path components, each percent-encoded (no component can add a '/')."""
    return "/".join(quote(p, safe="") for p in parts)


def level(alpha: float) -> str:
    return f"{100 * (1 - alpha):g}%"


CSS = """
:root{--fg:#1f2328;--muted:#59636e;--border:#d0d7de;--alt:#f6f8fa;--accent:#0969da;--bad:#b34700;
--good:#005a8c;--open:#59636e}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{font:15px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,Arial,sans-serif;color:var(--fg);margin:0 auto;
max-width:1320px;padding:20px 28px 48px}
a{color:var(--accent)}
h1{font-size:1.6em;margin:.3em 0 .2em;overflow-wrap:anywhere}
h2{font-size:1.25em;margin:1.6em 0 .5em;border-bottom:1px solid var(--border);padding-bottom:4px}
h3{font-size:1.05em;margin:1.2em 0 .4em;overflow-wrap:anywhere}
nav.crumbs{font-size:13px;color:var(--muted)}
nav.crumbs a{color:var(--muted)}
nav.site{font-size:13px;margin:2px 0 8px}
nav.site a{margin-right:14px}
p.note{color:var(--muted);font-size:13px}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums;margin:0 0 1em}
th,td{padding:3px 10px;border-bottom:1px solid var(--border);text-align:left;vertical-align:top;
overflow-wrap:anywhere}
th{overflow-wrap:normal;word-break:normal;hyphens:none}
thead th{background:var(--alt);font-weight:600}
td.num,th.num{text-align:right;white-space:nowrap}
td.iv,td.gap,td.fixed,td.verdict,td.pooled-iv,td.macro-iv{white-space:nowrap}
.table-wrap{overflow-x:auto;max-width:100%;position:relative}
caption{caption-side:top;text-align:left;color:var(--muted);font-size:12px;padding:0 0 4px}
.bad{color:var(--bad);font-weight:600}
.good{color:var(--good)}
.open{color:var(--open)}
ul.problems li{color:var(--bad)}
details{margin:.3em 0 1em}
summary{cursor:pointer;color:var(--muted);font-size:13px}
svg{max-width:100%;height:auto;display:block}
iframe.report{width:100%;height:80vh;border:1px solid var(--border);border-radius:4px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0 16px}
.card{border:1px solid var(--border);border-radius:6px;padding:8px 14px;min-width:150px}
.card b{display:block;font-size:1.6em;line-height:1.2}
table.grid td.cell{text-align:center;white-space:nowrap;font-weight:600}
td.v-improved{background:#d6e9f5;color:#003d66}
td.v-regressed{background:#f9dcc8;color:#7a2e00}
td.v-inconclusive{background:#eeeeee;color:#3d4349}
.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
footer{color:var(--muted);font-size:12px;border-top:1px solid var(--border);margin-top:40px;padding-top:8px}
@media (max-width:640px){body{padding:10px 10px 32px;font-size:14px}h1{font-size:1.3em}
th,td{padding:3px 6px;white-space:nowrap;overflow-wrap:normal}.card{min-width:0;flex:1 1 40%}}
""".strip()

NAV = (("index.html", "overview"), ("_views/checkpoints.html", "checkpoints"), ("_views/models.html", "models"))


def page(title: str, crumbs: list[tuple[str | None, str]], body: list[str], generated: str, *,
         root: str = "") -> str:
    """A whole page: CSP, one style sheet, the site's menu (``root`` is the relative path to the site's
    top, "" or "../" or "../../"), breadcrumbs, the title and ``body`` (markup)."""
    nav = " / ".join(link(target, text) if target else escape(text) for target, text in crumbs)
    menu = "".join(str(link(root + target, text)) for target, text in NAV)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(SITE_CSP)}">',
        '<meta name="referrer" content="no-referrer">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # An inline icon stops the browser from asking the server for /favicon.ico.
        '<link rel="icon" href="data:,">',
        f"<title>{escape(title)}</title>", f"<style>\n{CSS}\n</style>", "</head>", "<body>",
        f'<nav class="site" aria-label="site">{menu}</nav>',
        f'<nav class="crumbs">{nav}</nav>', f"<h1>{escape(title)}</h1>", *body,
        f"<footer>benchcert dashboard \u00b7 built {escape(generated)} from run artifacts \u00b7 "
        "static and offline: no scripts, no network</footer>", "</body>", "</html>", ""])


def table(headers: list, rows: list[list], *, cls: str = "", num: set[int] = frozenset(),
          cell_cls: list[str] | None = None, row_attrs: list[str] | None = None, caption: str = "") -> str:
    """An escaped table in a scrolling wrapper; ``cell_cls`` names each column's cells (tests read them),
    ``row_attrs`` adds known-safe attributes per body row."""
    # Each column's opening tag is built once per table, not once per cell (10,000 run pages).
    width = max(map(len, rows), default=0)
    opens = []
    for i in range(width):
        classes = " ".join(c for c in (("num" if i in num else ""), (cell_cls[i] if cell_cls else "")) if c)
        opens.append(f'<td class="{classes}">' if classes else "<td>")
    head = "".join(f'<th scope="col"{" class=num" if i in num else ""}>{h(x)}</th>' for i, x in enumerate(headers))
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    attrs = row_attrs or [""] * len(rows)
    # One list of parts and one join for the whole body, h() inlined for the common cells (a str, once escaped
    # per build; markup): a call per cell of 10,000 run pages' tables was a tenth of a cold build.
    parts: list[str] = []
    add = parts.append
    for r, a in zip(rows, attrs):
        add(f"<tr{a}>")
        for o, v in zip(opens, r):
            kind = type(v)
            add(o)
            add(_escaped(v) if kind is str else v if kind is Html else h(v))
            add("</td>")
        add("</tr>")
    body = "".join(parts)
    if not rows:
        body = f'<tr><td colspan="{len(headers)}">none</td></tr>'
    attr = f' class="{escape(cls)}"' if cls else ""
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return (f'<div class="table-wrap"><table{attr}>{cap}'
            f"{thead}<tbody>{body}</tbody></table></div>")
