"""No function of bert/ or stages/ runs over 80 lines: a reader takes a function in at once, and a
longer one is split into pieces whose names say what they do (docs/development.md)."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 80


def function_lengths() -> dict[str, int]:
    """Every function of bert/ and stages/, methods and nested functions too, as
    "path:Class.method" or "path:outer.inner" -> its lines from `def` to its last line."""
    lengths = {}

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    lengths[f"{path}:{name}"] = child.end_lineno - child.lineno + 1
                visit(child, path, name + ".")
            else:
                visit(child, path, prefix)

    for folder in ("bert", "stages"):
        for file in sorted((REPO / folder).rglob("*.py")):
            path = file.relative_to(REPO).as_posix()
            visit(ast.parse(file.read_text(encoding="utf-8"), filename=path), path, "")
    return lengths


def test_no_function_runs_over_80_lines():
    too_long = {name: lines for name, lines in function_lengths().items() if lines > MAX_LINES}
    assert not too_long, f"functions over {MAX_LINES} lines; split them into named pieces:\n" + "\n".join(
        f"{name}: {lines} lines" for name, lines in sorted(too_long.items())
    )
