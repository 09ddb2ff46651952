"""The import graph of bioviz/, trainer/ and ui/ has no cycles, and the library never imports streamlit.

Every module is parsed with ``ast`` (nothing is imported), so function-level imports count
exactly like module-level ones: a cycle hidden inside a function is still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bioviz", "trainer", "ui")
STREAMLIT_FREE = ("bioviz", "trainer")


def module_name(path: Path, root: Path = ROOT) -> str:
    """Dotted module name of a source file; a package's ``__init__.py`` is the package itself."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project packages, by dotted name."""
    paths = (path for package in PACKAGES if (root / package).is_dir() for path in sorted((root / package).rglob("*.py")))
    return {module_name(path, root): path for path in paths}


def imported_names(path: Path, name: str) -> set[str]:
    """Every dotted name a module imports, anywhere in it, relative imports resolved.

    ``from x import y`` yields ``x.y``: an edge to the submodule ``x.y`` where there is one, else to
    ``x`` (see ``owning_module``).
    """
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def owning_module(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported name refers to: itself, or its nearest enclosing module."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    """Directed graph of project modules; an edge a -> b means a imports b."""
    modules = project_modules(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for imported in imported_names(path, name):
            target = owning_module(imported, modules)
            if target is not None and target != name:
                graph.add_edge(name, target)
    return graph


def test_no_import_cycles():
    graph = import_graph()
    cycles = sorted(" -> ".join(cycle + [cycle[0]]) for cycle in nx.simple_cycles(graph))
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_library_never_imports_streamlit():
    offenders = sorted(
        name
        for name, path in project_modules().items()
        if name.split(".")[0] in STREAMLIT_FREE
        and any(imported.split(".")[0] == "streamlit" for imported in imported_names(path, name))
    )
    assert not offenders, f"these modules import streamlit: {offenders}"


def test_graph_sees_function_level_and_relative_imports(tmp_path):
    package = tmp_path / "bioviz"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import leaf\n")
    (package / "sub" / "leaf.py").write_text("def f():\n    from bioviz import top\n")
    (package / "top.py").write_text("from bioviz.sub import leaf\n")
    graph = import_graph(tmp_path)
    assert graph.has_edge("bioviz.sub.leaf", "bioviz.top")  # function-level
    assert graph.has_edge("bioviz.sub", "bioviz.sub.leaf")  # relative, from a package __init__
    assert graph.has_edge("bioviz.top", "bioviz.sub.leaf")  # `from package import submodule`
    assert {"bioviz.top", "bioviz.sub.leaf"} <= {n for cycle in nx.simple_cycles(graph) for n in cycle}
