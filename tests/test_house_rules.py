"""Two house rules checked on the source with ``ast`` (nothing is imported, so this is fast).

a. A public function or method takes at most four positional parameters; the rest are
   keyword-only (after ``*``), so a call names what it passes.
b. No function is longer than 100 lines.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("bioviz", "trainer", "ui", "app_pages", "app.py")
MAX_POSITIONAL = 4
MAX_LINES = 100

Function = ast.FunctionDef | ast.AsyncFunctionDef


def source_files(root: Path = ROOT) -> list[Path]:
    """Every Python file the rules cover, in a stable order."""
    files: list[Path] = []
    for name in SOURCES:
        path = root / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else [])
    return files


def top_level_functions(tree: ast.Module) -> Iterator[tuple[Function, bool]]:
    """Module functions and methods of module-level classes (nested classes too), each with
    whether it is a method; functions and classes defined inside a function are local, not API."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_class = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child, in_class
            elif isinstance(child, ast.ClassDef):
                stack.append((child, True))
            elif isinstance(child, (ast.If, ast.Try)):
                # `if TYPE_CHECKING:` / `try: ... except ImportError:` definitions are still module-level
                stack.append((child, in_class))


def positional_count(function: Function, is_method: bool) -> int:
    """Positional parameters a caller may pass, ``self``/``cls`` not counted."""
    count = len(function.args.posonlyargs) + len(function.args.args)
    decorators = {d.id for d in function.decorator_list if isinstance(d, ast.Name)}
    if is_method and "staticmethod" not in decorators and count:
        count -= 1
    return count


def too_many_positionals(root: Path = ROOT) -> list[str]:
    """``file:line name`` of every public function or method with more than four positionals."""
    offenders = []
    for path in source_files(root):
        tree = ast.parse(path.read_text(), str(path))
        functions = sorted(top_level_functions(tree), key=lambda pair: pair[0].lineno)
        for function, is_method in functions:
            if function.name.startswith("_"):  # private, and dunders (their signature is Python's)
                continue
            count = positional_count(function, is_method)
            if count > MAX_POSITIONAL:
                offenders.append(f"{path.relative_to(root)}:{function.lineno} {function.name} ({count} positional)")
    return offenders


def too_long_functions(root: Path = ROOT) -> list[str]:
    """``file:line name`` of every function (nested ones too) over 100 lines, decorators excluded."""
    offenders = []
    for path in source_files(root):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_LINES:
                    offenders.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({lines} lines)")
    return offenders


def test_public_functions_take_at_most_four_positionals():
    offenders = too_many_positionals()
    assert not offenders, (
        f"public functions with more than {MAX_POSITIONAL} positional parameters "
        "(put `*` after the ones callers give positionally):\n" + "\n".join(offenders)
    )


def test_no_function_over_100_lines():
    offenders = too_long_functions()
    assert not offenders, f"functions over {MAX_LINES} lines:\n" + "\n".join(offenders)


def test_rules_can_fail(tmp_path):
    (tmp_path / "bioviz").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))  # with the def line: 101 lines
    (tmp_path / "bioviz" / "m.py").write_text(
        "def wide(a, b, c, d, e):\n    pass\n"
        "def fine(a, b, c, d, *, e):\n    pass\n"
        "def _private(a, b, c, d, e):\n    pass\n"
        "def outer():\n    def nested(a, b, c, d, e):\n        pass\n"
        "class C:\n"
        "    def __init__(self, a, b, c, d, e):\n        pass\n"
        "    def method(self, a, b, c, d):\n        pass\n"
        "    @staticmethod\n    def static(a, b, c, d, e):\n        pass\n"
        f"def long():\n{body}\n"
    )
    assert too_many_positionals(tmp_path) == ["bioviz/m.py:1 wide (5 positional)",
                                              "bioviz/m.py:16 static (5 positional)"]
    assert too_long_functions(tmp_path) == ["bioviz/m.py:18 long (101 lines)"]
