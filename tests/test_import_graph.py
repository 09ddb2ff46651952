"""The import rules of bioviz/, trainer/ and ui/, checked on their source.

No import cycles; the library never imports streamlit; bioviz's subpackages only import
downwards (:data:`SUBPACKAGE_ORDER`); a function-level import of a light module (the standard
library, numpy, the project's own packages) says why on its line. Every module is parsed with
``ast`` (nothing is imported), so function-level imports count exactly like module-level ones:
a cycle hidden inside a function is still a cycle.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bioviz", "trainer", "ui")
STREAMLIT_FREE = ("bioviz", "trainer")
# bioviz's subpackages, lowest first: a module may import its own subpackage and earlier ones,
# never a later one. Top-level modules that reach no subpackage (paths, errors, ...) are below
# them all; the others (warmup, __main__) above them all.
SUBPACKAGE_ORDER = ("ontology", "models", "search", "evaluation", "views", "figures", "cli")
# Light: cheap to import, so a function-level import of one needs a reason. Heavy third-party
# packages (torch, pandas, plotly, ...) are imported in functions for start-up time, which goes without saying.
LIGHT = frozenset(sys.stdlib_module_names) | {"numpy", *PACKAGES}
APP_FILES = ("app.py", "app_pages")  # the router and pages: not packages, but held to the comment rule


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


def subpackage_layer(name: str) -> int | None:
    """Index of a bioviz module's subpackage in :data:`SUBPACKAGE_ORDER`; None for a top-level module."""
    parts = name.split(".")
    return SUBPACKAGE_ORDER.index(parts[1]) if len(parts) > 1 and parts[1] in SUBPACKAGE_ORDER else None


def back_arrows(root: Path = ROOT) -> list[str]:
    """``a -> b`` for each bioviz import that points up :data:`SUBPACKAGE_ORDER`, function-level ones included."""
    graph = import_graph(root)
    bioviz = [name for name in graph if name.split(".")[0] == "bioviz"]
    top = [name for name in bioviz if subpackage_layer(name) is None]
    base = {name for name in top if all(subpackage_layer(m) is None for m in nx.descendants(graph, name))}

    def layer(name: str) -> int:
        found = subpackage_layer(name)
        return found if found is not None else -1 if name in base else len(SUBPACKAGE_ORDER)

    return sorted(f"{a} -> {b}" for a, b in graph.subgraph(bioviz).edges if layer(a) < layer(b))


def test_no_back_arrows_between_bioviz_subpackages():
    arrows = back_arrows()
    assert not arrows, (f"imports against the order {' < '.join(SUBPACKAGE_ORDER)} "
                        "(a top-level module that imports a subpackage counts above them all):\n" + "\n".join(arrows))


def test_back_arrows_are_found_through_functions_and_top_level_modules(tmp_path):
    files = {"__init__.py": "", "paths.py": "", "runner.py": "from bioviz.cli import main\n",
             "cli/__init__.py": "", "cli/main.py": "",
             "models/__init__.py": "",
             "models/a.py": "from bioviz import paths\n\ndef f():\n    from bioviz.views import b\n",  # found
             "views/__init__.py": "", "views/b.py": "from bioviz.models import a\n",
             "ontology/__init__.py": "", "ontology/o.py": "from bioviz import runner\n"}  # runner is above all: found
    for relative, text in files.items():
        (tmp_path / "bioviz" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "bioviz" / relative).write_text(text)
    assert back_arrows(tmp_path) == ["bioviz.models.a -> bioviz.views.b", "bioviz.ontology.o -> bioviz.runner"]


def checked_files(root: Path = ROOT) -> list[Path]:
    """The project packages' modules and the app's files: those the comment rule reads."""
    paths = list(project_modules(root).values())
    for entry in APP_FILES:
        path = root / entry
        paths += sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.is_file() else []
    return paths


def uncommented_light_imports(root: Path = ROOT) -> list[str]:
    """``file:line: import`` for each function-level import of a light module with no comment on its lines."""
    found = []
    for path in checked_files(root):
        text = path.read_text()
        comments = {token.start[0] for token in tokenize.generate_tokens(io.StringIO(text).readline)
                    if token.type == tokenize.COMMENT}
        functions = [node for node in ast.walk(ast.parse(text, str(path)))
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
        imports = {node for function in functions for node in ast.walk(function)
                   if isinstance(node, (ast.Import, ast.ImportFrom))}  # a set: nested functions walk them twice
        for node in sorted(imports, key=lambda node: node.lineno):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [
                "bioviz" if node.level else node.module]  # a relative import is the project's own
            light = all(module.split(".")[0] in LIGHT for module in modules)
            if light and not comments & set(range(node.lineno, node.end_lineno + 1)):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_function_level_light_imports_say_why():
    found = uncommented_light_imports()
    assert not found, ("function-level imports of light modules without a comment on their line saying why "
                       "(hoist them to the module's top unless that makes a cycle or pulls a heavy package "
                       "into start-up; then name it):\n" + "\n".join(found))


def test_the_comment_rule_sees_functions_methods_and_the_app(tmp_path):
    (tmp_path / "bioviz").mkdir()
    (tmp_path / "bioviz" / "__init__.py").write_text("")
    (tmp_path / "bioviz" / "m.py").write_text(
        "import json\n\n"  # module level: fine
        "def f():\n    import json\n\n"  # light, no reason: found
        "def g():\n    import json  # why\n\n"
        "def h():\n    import torch\n\n"  # heavy: its reason goes without saying
        "class C:\n    def m(self):\n        from . import m\n\n"  # relative: the project's own, found
        "def k():\n    from bioviz import (\n        m,  # why\n    )\n")
    (tmp_path / "app.py").write_text("def f():\n    def inner():\n        import numpy as np\n")
    assert uncommented_light_imports(tmp_path) == [
        "bioviz/m.py:4: import json", "bioviz/m.py:14: from . import m", "app.py:3: import numpy as np"]
