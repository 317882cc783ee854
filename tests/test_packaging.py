"""The package metadata declares what the code imports, and ships its licence."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# import name -> distribution name, where they differ
DISTRIBUTION = {"dns": "dnspython", "zope": "zope.interface", "yaml": "pyyaml",
                "scrapy_redis": "scrapy-redis"}


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def _third_party_imports() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "scrapy_politeness").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # imports for type checkers only need no install
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
                node.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found
            if m not in sys.stdlib_module_names and m not in ("scrapy_politeness", "__future__")}


def test_every_imported_package_is_declared() -> None:
    project = PYPROJECT["project"]
    declared = _names(project["dependencies"])
    for extra in ("redis", "scrapy-redis", "plot"):  # optional features, imported lazily
        declared |= _names(project["optional-dependencies"][extra])
    missing = {DISTRIBUTION.get(m, m) for m in _third_party_imports()} - declared
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"


def test_licence_file_and_extras() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "BSD-3-Clause"
    assert "BSD 3-Clause License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert project["license-files"] == ["LICENSE"]
    extras = project["optional-dependencies"]
    assert _names(extras["dev"]) >= {"ruff", "mypy"}
    assert not _names(extras["test"]) & {"ruff", "mypy"}  # the linters live in `dev`
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    # `make test` runs ruff and mypy too, and every optional feature's tests
    assert ".[test,dev,redis,scrapy-redis,plot]" in makefile


# Standard-library names new in Python 3.11 (what a 3.10 interpreter fails to import).
NEW_IN_311 = {("enum", "StrEnum"), ("datetime", "UTC"), ("typing", "Self"),
              ("asyncio", "TaskGroup"), ("asyncio", "timeout")}


def _uses_311() -> list[str]:
    found = []
    for path in (ROOT / "scrapy_politeness").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                          if (node.module, a.name) in NEW_IN_311]
            elif isinstance(node, ast.Import):
                found += [f"{path.name}: {a.name}" for a in node.names if a.name == "tomllib"]
    return found


def test_the_python_versions_declared_are_the_ones_the_code_runs_on() -> None:
    """pip must refuse an interpreter the code cannot import on; docs and linters agree."""
    project = PYPROJECT["project"]
    minimum = re.fullmatch(r">=\s*3\.(\d+)", project["requires-python"])
    assert minimum is not None, project["requires-python"]
    minor = int(minimum.group(1))
    assert minor >= 11 or not _uses_311(), f"3.11 needed by {_uses_311()}"
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py3{minor}"
    assert f"Programming Language :: Python :: 3.{minor}" in project["classifiers"]
    started = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    assert f"Requires Python >= 3.{minor}," in started
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"Python 3.{minor} or later" in readme
    assert all(v not in readme + started for v in ("3.10", "3.9"))
