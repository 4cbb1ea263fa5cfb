"""The package installs fuseci and nothing else at top level, at the version fuseci reports."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
from setuptools import find_packages

import fuseci

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_only_fuseci_is_installed_at_top_level() -> None:
    """A package named `kernels` exists on the public index: fuseci's example kernels must not
    be installed beside it (they stay in the repository, where its suites find them)."""
    found = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(where=str(ROOT), include=found["include"], exclude=found.get("exclude", ()))
    assert packages and "fuseci" in packages
    assert {p.split(".", 1)[0] for p in packages} == {"fuseci"}, packages
    assert (ROOT / "kernels").is_dir() and not any(p.startswith("kernels") for p in packages)


def test_the_version_has_one_source_and_the_installed_metadata_follows_it() -> None:
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fuseci.__version__"}
    try:
        installed = metadata.version("fuseci")
    except metadata.PackageNotFoundError:
        pytest.skip("fuseci is not installed (pip install -e .)")
    assert installed == fuseci.__version__
