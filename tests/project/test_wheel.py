"""The wheel holds the whole tree (issue #33): every package folder, every module, the demo's data.

A hand-written package list once left tasks/judge out of the wheel, and an installed benchcert
could not audit while the editable install of a checkout could.  The wheel is built here from a
copy of the checkout (the build writes build/ and *.egg-info next to the sources, and other
processes may be building in the checkout) with the pinned setuptools of the test extra.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

#: Each top-level folder that is installed, and the package it is installed as.
INSTALLED = {"benchcert": "benchcert", "flows": "benchcert.flows", "tasks": "benchcert.tasks",
             "stats": "benchcert.stats", "deployments": "benchcert.deployments", "data": "benchcert.data"}
#: Folders of the checkout that are not part of the package.
NOT_INSTALLED = {"tests", "benchmarks", "tools", "docs", "build", "dist"}
#: What `benchcert demo` reads from the installed package, with the licence notes of that data.
DEMO_DATA = ["mmlu_pro/mmlu_pro_item_correctness_long.csv.gz", "mmlu_pro/mapping.toml", "mmlu_pro/SOURCE.txt",
             "mmlu_pro/SOURCE.upstream.txt"]


def _skipped(top: str) -> bool:
    return top in NOT_INSTALLED or top.startswith(".") or top.endswith(".egg-info")


def source_packages(root: Path = ROOT) -> dict[str, Path]:
    """Every folder of the tree holding an ``__init__.py``, as ``{installed package name: folder}``."""
    found = {}
    tops = [p for p in root.iterdir() if p.is_dir() and not _skipped(p.name)]  # (not .venv's thousands)
    for init in (i for top in tops for i in top.rglob("__init__.py")):
        rel = init.parent.relative_to(root)
        assert rel.parts[0] in INSTALLED, (
            f"{rel}/ is a package folder outside the installed ones: map it in pyproject.toml's "
            f"[tool.setuptools.package-dir] (and INSTALLED here), or list it in NOT_INSTALLED")
        found[".".join((INSTALLED[rel.parts[0]], *rel.parts[1:]))] = init.parent
    return found


def _copy_of_checkout(dest: Path) -> Path:
    def ignore(folder, names):
        top = Path(folder) == ROOT
        return [n for n in names if n == "__pycache__" or ".duckdb" in n
                or (top and (_skipped(n) or n in ("demo-output", "bench-output", "serve-state")))]

    return Path(shutil.copytree(ROOT, dest / "src", ignore=ignore))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    tmp = tmp_path_factory.mktemp("wheel")
    src = _copy_of_checkout(tmp)
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"),
                        str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (path,) = (tmp / "dist").glob("benchcert-*.whl")
    with zipfile.ZipFile(path) as zf:
        yield zf


def test_every_package_folder_of_the_tree_is_in_the_wheel(wheel):
    names = set(wheel.namelist())
    packages = source_packages()
    assert {"benchcert", "benchcert.flows.cli", "benchcert.tasks.judge", "benchcert.data"} <= set(packages)
    missing = sorted(pkg for pkg in packages if pkg.replace(".", "/") + "/__init__.py" not in names)
    assert not missing, f"package folders left out of the wheel: {missing}"
    modules = sorted(f"{pkg.replace('.', '/')}/{py.name}" for pkg, folder in packages.items()
                     for py in folder.glob("*.py"))
    assert not [m for m in modules if m not in names], "modules left out of the wheel"


def test_the_wheel_holds_only_benchcert(wheel):
    tops = {n.split("/")[0] for n in wheel.namelist()}
    assert len(tops) == 2 and "benchcert" in tops and any(t.endswith(".dist-info") for t in tops), tops
    # a module in the wheel comes from a package folder of the tree (no stale build/ leftovers)
    wheel_packages = {n.rsplit("/", 1)[0].replace("/", ".") for n in wheel.namelist() if n.endswith(".py")}
    assert wheel_packages == set(source_packages())


def test_the_demo_data_and_its_licence_notes_are_in_the_wheel(wheel):
    for name in DEMO_DATA:
        inside = wheel.read(f"benchcert/data/{name}")
        assert hashlib.sha256(inside).digest() == hashlib.sha256((ROOT / "data" / name).read_bytes()).digest(), name
    data = sorted(n for n in wheel.namelist() if n.startswith("benchcert/data/") and not n.endswith(".py"))
    assert data == sorted(f"benchcert/data/{n}" for n in DEMO_DATA)  # and not the rest of data/


def test_the_perturbation_design_table_is_in_the_wheel(wheel):
    """tasks/perturbation/calibrations.json, package data read by tasks/perturbation/tables.py (issue #36)."""
    inside = wheel.read("benchcert/tasks/perturbation/calibrations.json")
    assert inside == (ROOT / "tasks" / "perturbation" / "calibrations.json").read_bytes()


def test_the_tests_build_with_the_setuptools_the_build_system_pins():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build_pin = [r for r in config["build-system"]["requires"] if r.startswith("setuptools")]
    test_pin = [r for r in config["project"]["optional-dependencies"]["test"] if r.startswith("setuptools")]
    assert build_pin == test_pin and build_pin[0].startswith("setuptools==")
