"""The shape of the Python tools: no import circle anywhere in colibri_tools
(every import counts, relative or absolute, at the top of a module or inside a
function), and the ports sit directly on the core: no Python file under ports/
imports colibri_tools (what a port generates from a board file is a module of
colibri_tools.board that its .mk file runs with `python -m`)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"
PACKAGE = "colibri_tools"


def _module_name(path: Path) -> tuple[str, bool]:
    """(dotted name, is a package) of a .py file under tools/."""
    parts = list(path.relative_to(TOOLS).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _imported(tree: ast.AST, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """The modules of colibri_tools that a module imports, anywhere in its code.

    `from X import Y` imports X.Y when that is a module, else X (its __init__)."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules
                          else target)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    files = sorted((TOOLS / PACKAGE).rglob("*.py"))
    names = {path: _module_name(path) for path in files}
    modules = {name for name, _ in names.values()}
    return {name: _imported(ast.parse(path.read_text(), str(path)), name, is_package, modules)
            for path, (name, is_package) in names.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert len(graph) > 40
    assert "colibri_tools.board.boards" in graph["colibri_tools.board.fit"]  # relative, top
    assert "colibri_tools.board.fit" in graph["colibri_tools.board.board_cli"]  # inside a function
    assert "colibri_tools.board.qemu" in graph["colibri_tools.testing.pytest_plugin"]  # absolute
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_colibri_tools_has_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_python_file_under_ports_imports_colibri_tools():
    offenders = []
    for path in sorted((REPO / "ports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == PACKAGE or n.startswith(PACKAGE + ".") for n in names):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, "ports import the tools (move the code into colibri_tools): " + \
        ", ".join(offenders)
