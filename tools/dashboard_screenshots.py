#!/usr/bin/env python
"""The dashboard screenshots of docs/production.md: each page kind of the test fixture store
(tests/dashboard_fixture.py) in headless Chromium at 1,400 px, the top of the page, scaled to about half.

    .venv/bin/python tools/dashboard_screenshots.py [--out docs/img]
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = ap.parse_args(argv)
    import dashboard_fixture as fx
    from benchcert.tasks.artifacts.folders import hashed_folder
    from benchcert.tasks.render.dashboard import build_site, make_server

    spec = importlib.util.spec_from_file_location("harness", ROOT / "tests/tasks/render/test_dashboard_browser.py")
    h = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(h)
    tmp = Path(tempfile.mkdtemp(prefix="dashboard-shots-"))
    _, arts = fx.build(tmp)
    build_site(arts, tmp / "site", now=fx.NOW)
    run = sorted(p.name for p in (tmp / "site" / "beta").iterdir() if p.is_dir())[-1]
    pages = {"overview": ("index.html", 1150), "checkpoints": ("_views/checkpoints.html", 520),
             "training-run": (f"_views/series-{hashed_folder(fx.FAMILY)}.html", 820),
             "model": (f"_views/model-{hashed_folder(fx.FAMILY + '@step-5000')}.html", 760),
             "benchmark": ("beta/index.html", 900), "run": (f"beta/{run}/index.html", 820)}
    srv = make_server(tmp / "site", port=0, quiet=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    args.out.mkdir(parents=True, exist_ok=True)
    with h.devtools(h._chromium(), tmp / "profile") as cdp:
        tab = h.Tab(cdp, f"http://127.0.0.1:{srv.server_address[1]}/")
        cdp.call("Emulation.setDeviceMetricsOverride", tab.session, width=1400, height=900, deviceScaleFactor=1,
                 mobile=False)
        for name, (path, height) in pages.items():
            problems, foreign = tab.open(path)
            if problems or foreign:
                raise SystemExit(f"{path}: {problems} {foreign}")
            shot = cdp.call("Page.captureScreenshot", tab.session, format="png", captureBeyondViewport=True,
                            clip={"x": 0, "y": 0, "width": 1400, "height": height, "scale": 0.55})
            (args.out / f"dashboard-{name}.png").write_bytes(base64.b64decode(shot["data"]))
            print(args.out / f"dashboard-{name}.png")
    srv.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
