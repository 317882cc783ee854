"""The import graph of a source tree, read with ``ast`` (nothing is imported).

Each edge is ``(importer, imported, kind)``: ``run`` (module level), ``lazy``
(inside a function: still a run-time dependency, only later) or ``type``
(under ``if TYPE_CHECKING:``). Only modules of the tree are nodes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

Edge = tuple[str, str, str]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, kind
        elif isinstance(child, ast.If) and _type_checking(child):
            for inner in child.body:
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    yield inner, "type"
                else:
                    yield from _imports(inner, "type")
            for inner in child.orelse:
                yield from _imports(inner, kind)
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from _imports(child, "lazy" if kind == "run" else kind)
        else:
            yield from _imports(child, kind)


def _nearest(name: str, known: set[str]) -> str:
    """The module itself, or its nearest enclosing package of the tree ('' if outside)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def edges(root: Path) -> tuple[set[str], list[Edge]]:
    """Every module under ``root`` (a package folder) and the imports between them."""
    paths = sorted(root.rglob("*.py"))
    known = {module_name(root, p) for p in paths}
    out: list[Edge] = []
    for path in paths:
        mod = module_name(root, path)
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        for node, kind in _imports(ast.parse(path.read_text(encoding="utf-8")), "run"):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package[:len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
                           for a in node.names]
            for name in targets:
                found = _nearest(name, known)
                if found and found != mod:
                    out.append((mod, found, kind))
    return known, out


def cycles(nodes: set[str], graph_edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b, _ in graph_edges:
        graph[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)
