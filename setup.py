"""The package list, taken from the folder layout (the rest of the build is in pyproject.toml).

Each root of pyproject's ``[tool.setuptools.package-dir]`` (``benchcert.flows`` = ``flows/``, ...)
is installed with every folder below it that holds an ``__init__.py``, as a subpackage of that
root.  setuptools' own ``packages.find`` cannot do this: it names a package after its folder
(``flows.cli``), never after the root it is mapped to (``benchcert.flows.cli``).  A list written
by hand is what this replaces: it once left out tasks/judge, and an installed benchcert could not
audit (issue #33).  tests/project/test_wheel.py checks the wheel against the tree.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent


def layout_packages(root: Path = HERE) -> list[str]:
    """Every package of the tree: each mapped root, and each folder with an ``__init__.py`` below it.

    Parameters
    ----------
    root : Path
        The project folder holding pyproject.toml.

    Returns
    -------
    list of str
        Dotted package names, sorted (``benchcert.flows``, ``benchcert.flows.cli``, ...), and the
        data-only folders that package-data names.
    """
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    names = set()
    for name, folder in config["package-dir"].items():
        names.add(name)
        names.update(f"{name}.{sub}" for sub in find_packages(where=str(root / folder)))
    # A folder of data files only (benchcert.data.mmlu_pro) is a package too, named where package-data lists
    # its files; setuptools warns that such a folder would be left out if it were not in the list.
    names.update(config.get("package-data", {}))
    return sorted(names)


setup(packages=layout_packages())
