"""No import cycles in the package or the benchmark: a cycle says two modules are
one concern, or a dependency points the wrong way."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from importgraph import cycles, edges

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("tree", ["scrapy_politeness", "bench"])
def test_no_cycle_through_run_time_or_lazy_imports(tree: str) -> None:
    known, found = edges(ROOT / tree)
    assert cycles(known, [e for e in found if e[2] != "type"]) == []


def test_no_cycle_even_through_type_only_imports() -> None:
    known, found = edges(ROOT / "scrapy_politeness")
    assert cycles(known, found) == []


def test_the_graph_sees_each_kind_of_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.d import y\n")
    (pkg / "sub" / "d.py").write_text("from ..a import z\n")
    known, found = edges(pkg)
    assert sorted(found) == [("pkg.a", "pkg.b", "run"), ("pkg.b", "pkg.c", "lazy"),
                             ("pkg.c", "pkg.sub.d", "type"), ("pkg.sub.d", "pkg.a", "run")]
    assert cycles(known, found) == [["pkg.a", "pkg.b", "pkg.c", "pkg.sub.d"]]
    assert cycles(known, [e for e in found if e[2] != "type"]) == []


def test_the_package_shows_its_architecture_in_its_folders() -> None:
    """At most 12 modules at the top (the Scrapy glue), the rest in folders by
    concern, each with a docstring that says its role; no module over 300 lines."""
    package = ROOT / "scrapy_politeness"
    top = sorted(p.name for p in package.glob("*.py"))
    assert len(top) <= 12, top
    for folder in (p for p in package.iterdir() if (p / "__init__.py").exists()):
        assert ast.get_docstring(ast.parse((folder / "__init__.py").read_text())), folder.name
    long = {str(p.relative_to(package)): n for p in package.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 300}
    assert long == {}
