"""Check benchcert as users install it: the wheel, not the checkout (``make wheel-check``, part of ``make test``).

The editable install of a checkout imports the source folders themselves, so it hid a package the
wheel left out (tasks/judge: an installed benchcert could not audit, issue #33).  This script:

1. builds the sdist and, from it, the wheel with the standard front end (``python -m build``, in
   an isolated environment holding [build-system]'s setuptools);
2. installs the wheel, not editable, into its own virtualenv (default ``.venv/wheel-check``) with the
   dependencies pinned by constraints.txt.  The dependencies are installed once and kept while
   constraints.txt, the wheel's requirements and the Python version stay the same (a full install
   takes 1-2 minutes); benchcert itself is reinstalled from the new wheel on every run, and the
   installed files are checked against the wheel's, so no module of an earlier build can answer
   for a missing one.  ``--fresh`` starts from an empty virtualenv;
3. from a working folder outside the checkout (a temporary one, so no checkout is on sys.path),
   runs ``benchcert demo``, a ``benchcert compare`` on the demo's store, imports every module of
   the installed package (pkgutil over benchcert.__path__; the failures are listed), checks that
   every module of the checkout's package folders was among them, and finds the bundled data;
4. runs the Python API's smoke check (see :func:`python_api_smoke`).

It exits 0 when every check passed and 1 at the first that failed, printing that step's output.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = "mmlu_pro"
#: The comparison run on the demo's store: two models of the README's tour.
COMPARE = ("Meta-Llama-3_1-70B", "Meta-Llama-3-70B")
#: Written into the virtualenv once its dependencies are installed: what they were installed for.
DEPS_STAMP = ".wheel-check-deps"


class CheckFailed(Exception):
    """A check failed; the message says which and why (the script exits 1)."""


@dataclass
class Context:
    """What the steps share: the virtualenv, the wheel, and a working folder outside the checkout."""

    venv: Path
    work: Path
    fresh: bool = False  # a new virtualenv even when the one there has the right dependencies
    wheel: Path | None = None

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def store(self) -> Path:
        return self.work / "demo" / "benchcert.duckdb"

    def env(self) -> dict[str, str]:
        # Nothing of the caller's that could put a checkout or another environment on sys.path, and a
        # Prefect home of its own (a profile there could name an API and change the run mode).
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PREFECT_HOME"] = str(self.work / "prefect-home")
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, *argv, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``argv`` from the working folder; raise CheckFailed with its output when it fails."""
        r = subprocess.run([str(a) for a in argv], cwd=self.work, env=self.env(), capture_output=True, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise CheckFailed(f"{_shown(argv)} exited {r.returncode}\n{_tail(r)}")
        return r


def _shown(argv) -> str:
    return " ".join("<script>" if "\n" in str(a) else str(a) for a in argv)


def _tail(r: subprocess.CompletedProcess, chars: int = 4000) -> str:
    # pip on some machines repeats a warning per package about its extra index: keep the end, where errors are
    return f"--- stdout (end)\n{r.stdout[-chars:]}\n--- stderr (end)\n{r.stderr[-chars:]}"


# --------------------------------------------------------------------------- the steps


def build(ctx: Context) -> str:
    """The sdist and, from it, the wheel, with ``python -m build`` (isolated, as pip builds)."""
    dist = ctx.work / "dist"
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        raise CheckFailed(f"python -m build failed\n{_tail(r)}")
    sdists, wheels = sorted(dist.glob("benchcert-*.tar.gz")), sorted(dist.glob("benchcert-*.whl"))
    if len(sdists) != 1 or len(wheels) != 1:
        raise CheckFailed(f"python -m build made {[p.name for p in dist.iterdir()]}, not one sdist and one wheel")
    ctx.wheel = wheels[0]
    with zipfile.ZipFile(ctx.wheel) as zf:  # the licence travels with the code (pyproject's license)
        if not any(n.split("/")[-1] == "LICENSE" and ".dist-info/" in n for n in zf.namelist()):
            raise CheckFailed(f"{ctx.wheel.name} holds no LICENSE in its .dist-info")
    return f"{ctx.wheel.name} ({ctx.wheel.stat().st_size / 1e6:.1f} MB, with its LICENSE), {sdists[0].name}"


def _deps_key(wheel: Path) -> str:
    """What the installed dependencies depend on: the base Python, constraints.txt, the wheel's requirements."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        # (an extra's requirements are not installed here)
        requires = sorted(line for line in zf.read(meta).decode().splitlines()
                          if line.startswith("Requires-Dist:") and "extra ==" not in line)
    h = hashlib.sha256()
    for part in (sys.version, (ROOT / "constraints.txt").read_text(), *requires):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def install(ctx: Context) -> str:
    """The wheel, not editable, in ctx.venv, its dependencies pinned by constraints.txt."""
    key = _deps_key(ctx.wheel)
    stamp = ctx.venv / DEPS_STAMP
    pip = [ctx.bin / "python", "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    reused = not ctx.fresh and stamp.is_file() and stamp.read_text() == key and (ctx.bin / "python").exists()
    if reused:
        ctx.run(*pip, "--no-deps", "--force-reinstall", ctx.wheel, timeout=600)
    else:
        shutil.rmtree(ctx.venv, ignore_errors=True)
        ctx.run(sys.executable, "-m", "venv", ctx.venv, timeout=300)
        ctx.run(*pip, "-c", ROOT / "constraints.txt", ctx.wheel, timeout=1800)
        stamp.write_text(key)
    ctx.run(ctx.bin / "python", "-m", "pip", "--disable-pip-version-check", "check", timeout=300)
    _same_files_as_the_wheel(ctx)
    return f"{ctx.venv} ({'dependencies kept, benchcert reinstalled' if reused else 'new virtualenv'})"


def _same_files_as_the_wheel(ctx: Context) -> None:
    r = ctx.run(ctx.bin / "python", "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    site = Path(r.stdout.strip())
    with zipfile.ZipFile(ctx.wheel) as zf:
        expected = {n for n in zf.namelist() if n.startswith("benchcert/") and not n.endswith("/")}
    installed = {p.relative_to(site).as_posix() for p in (site / "benchcert").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts}
    if installed != expected:
        raise CheckFailed(f"the installed benchcert is not the wheel's files: extra {sorted(installed - expected)[:20]}, "
                          f"missing {sorted(expected - installed)[:20]} (run again with --fresh)")


def demo(ctx: Context) -> str:
    """``benchcert demo`` into a new folder: exit 0, the store written, the report it names on disk."""
    r = ctx.run(ctx.bin / "benchcert", "demo", "--dir", ctx.store.parent, "--in-process", timeout=900)
    reports = [line.removeprefix("report: ") for line in r.stdout.splitlines() if line.startswith("report: ")]
    if len(reports) != 1 or not Path(reports[0]).is_file() or not ctx.store.is_file():
        raise CheckFailed(f"benchcert demo did not write its store and one report it names\n{_tail(r)}")
    return reports[0]


def compare(ctx: Context) -> str:
    """``benchcert compare`` of two models on the demo's store."""
    baseline, candidate = COMPARE
    r = ctx.run(ctx.bin / "benchcert", "compare", "--db", ctx.store, "--benchmark", BENCHMARK, baseline, candidate)
    rows = [line for line in r.stdout.splitlines() if line.startswith(candidate + " ")]
    if len(rows) != 1:
        raise CheckFailed(f"benchcert compare printed no row for {candidate}\n{_tail(r)}")
    return " ".join(rows[0].split())


#: Run by the installed Python (``-I``: no current folder, PYTHONPATH or user site on sys.path).
IMPORT_ALL = r"""
import importlib, importlib.resources, json, pkgutil, sys
import benchcert

failed, skipped, imported = [], [], ["benchcert"]

def walk(package):
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if info.name.rsplit(".", 1)[1] == "__main__":  # a program (python -m): importing it would run it
            skipped.append(info.name)
            continue
        try:
            module = importlib.import_module(info.name)
        except BaseException as exc:  # SystemExit included: a module that exits on import is broken too
            failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
            continue
        imported.append(info.name)
        if info.ispkg:
            walk(module)

walk(benchcert)
try:
    data = sorted(p.name for p in (importlib.resources.files("benchcert.data") / "mmlu_pro").iterdir() if p.is_file())
except Exception as exc:
    data = f"{type(exc).__name__}: {exc}"
# the perturbation test's shipped design table (tasks/perturbation/tables.py reads it as package data)
tables = (importlib.resources.files("benchcert.tasks.perturbation") / "calibrations.json").is_file()
print(json.dumps({"file": benchcert.__file__, "sys_path": sys.path, "imported": imported, "failed": failed,
                  "skipped": skipped, "data": data, "tables": tables}))
"""
DEMO_DATA = ["SOURCE.txt", "SOURCE.upstream.txt", "mapping.toml", "mmlu_pro_item_correctness_long.csv.gz"]


def import_everything(ctx: Context) -> str:
    """Every module of the installed package imports, from the virtualenv and nowhere else."""
    r = ctx.run(ctx.bin / "python", "-I", "-c", IMPORT_ALL, timeout=600)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if out["failed"]:
        raise CheckFailed(f"{len(out['failed'])} module(s) of the installed benchcert do not import:\n  "
                          + "\n  ".join(out["failed"]))
    # A module nothing imports at load time would not fail above when it is missing: compare with the tree.
    missing = sorted(checkout_modules() - set(out["imported"]) - set(out["skipped"]))
    if missing:
        raise CheckFailed(f"{len(missing)} module(s) of the checkout are not in the installed benchcert: {missing}")
    venv = ctx.venv.resolve()
    if not Path(out["file"]).resolve().is_relative_to(venv):
        raise CheckFailed(f"benchcert was imported from {out['file']}, not from {venv}")
    sources = [p for p in out["sys_path"] if p and Path(p).resolve().is_relative_to(ROOT)
               and not Path(p).resolve().is_relative_to(venv)]
    if sources:
        raise CheckFailed(f"the checkout is on the installed Python's sys.path: {sources}")
    if out["data"] != DEMO_DATA:
        raise CheckFailed(f"benchcert.data/mmlu_pro holds {out['data']}, not {DEMO_DATA}")
    if not out["tables"]:
        raise CheckFailed("benchcert.tasks.perturbation holds no calibrations.json (the shipped design table)")
    for main in out["skipped"]:  # the programs are checked by running them
        ctx.run(ctx.bin / "python", "-I", "-m", main.removesuffix(".__main__"), "--version")
    return f"{len(out['imported'])} modules imported, {len(out['skipped'])} program(s) run with --version"


def checkout_modules() -> set[str]:
    """The modules of the checkout's package folders (pyproject's package-dir roots), by installed name."""
    import tomllib

    roots = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    modules = set()
    for name, folder in roots.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            package = ".".join((name, *init.parent.relative_to(ROOT / folder).parts))
            modules.update(package if py.name == "__init__.py" else f"{package}.{py.stem}"
                           for py in init.parent.glob("*.py"))
    return modules


def python_api_smoke(ctx: Context) -> str | None:
    """The Python API of the installed package against its command line (tools/api_smoke.py).

    pandas comes with the ``pandas`` extra (pinned by constraints.txt), as a user who wants
    ``to_pandas()`` installs it; the check runs with the installed interpreter from the working
    folder outside the checkout, isolated (``-I``: no checkout, no user site on ``sys.path``).
    """
    ctx.run(ctx.bin / "python", "-m", "pip", "--disable-pip-version-check", "install", "--quiet", "-c",
            ROOT / "constraints.txt", f"{ctx.wheel}[pandas]", timeout=900)
    r = ctx.run(ctx.bin / "python", "-I", ROOT / "tools" / "api_smoke.py", "--bin", ctx.bin, timeout=900)
    return r.stdout.strip().splitlines()[-1]


STEPS = [("build", build), ("install", install), ("demo", demo), ("compare", compare),
         ("import every module", import_everything), ("python api", python_api_smoke)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tools/wheel_check.py", description=__doc__.split("\n\n")[0])
    # (inside .venv: what skips the developer's virtualenv, git and make clean included, skips it too)
    p.add_argument("--venv", type=Path, default=ROOT / ".venv" / "wheel-check",
                   help="virtualenv for the installed wheel (default .venv/wheel-check in the checkout)")
    p.add_argument("--fresh", action="store_true", help="start from an empty virtualenv (dependencies too)")
    p.add_argument("--keep", action="store_true", help="keep the temporary working folder (printed)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="benchcert-wheel-check-"))
    if work.resolve().is_relative_to(ROOT):
        print(f"wheel-check: the working folder {work} must lie outside the checkout {ROOT} (set TMPDIR)",
              file=sys.stderr)
        return 2
    ctx = Context(venv=args.venv.absolute(), work=work, fresh=args.fresh)
    start = time.monotonic()
    print(f"wheel-check: load average {_loadavg()}; working folder {work}", flush=True)
    try:
        for name, step in STEPS:
            t0 = time.monotonic()
            result = step(ctx)
            print(f"wheel-check: {name}: {'skipped (no check yet)' if result is None else result} "
                  f"[{time.monotonic() - t0:.1f} s]", flush=True)
    except (CheckFailed, subprocess.TimeoutExpired) as exc:
        print(f"wheel-check: FAILED at {name}: {exc}", file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"wheel-check: passed in {time.monotonic() - start:.1f} s; load average {_loadavg()}")
    return 0


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
