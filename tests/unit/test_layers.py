"""analysis/ is layered along the data path and its imports only point down:
cli -> run -> render -> model -> store (errors and the package's paths below them all).
Read from the source: every import at any depth, also those inside functions."""

import ast

import pytest

from conftest import HOME

PACKAGE = HOME / "analysis"
LAYERS = ("cli", "run", "render", "model", "store")  # top to bottom
TOP = {"__init__", "__main__", "errors"}


def analysis_imports(path):
    """(name, line) of what a module imports from analysis: the sub-package, or a name of
    the package itself (HOME, errors...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "analysis":
                found += [(parts[1], node.lineno)] if len(parts) > 1 else [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name.split(".")[1], node.lineno) for a in node.names if a.name.startswith("analysis.")]
    return found


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE)


def test_the_layers_are_the_packages():
    assert {p.parent.name for p in PACKAGE.glob("*/__init__.py")} == set(LAYERS)
    assert {p.stem for p in PACKAGE.glob("*.py")} == TOP


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    layer = path.relative_to(PACKAGE).parts[0]
    below = set(LAYERS[LAYERS.index(layer) :])
    wrong = [
        (name, line)
        for name, line in analysis_imports(path)
        if name not in below and name not in {"errors", "HOME", "OUTPUT", "DRIVER", "LOADER", "freeze_imports"}
    ]
    assert not wrong, f"{path.relative_to(HOME)} imports a layer above its own: {wrong}"


def test_the_check_sees_an_upward_import(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("def f():\n    from analysis.cli import main\nimport analysis.run.runner\nfrom analysis import HOME\n")
    assert analysis_imports(p) == [("run", 3), ("HOME", 4), ("cli", 2)] or sorted(analysis_imports(p)) == [
        ("HOME", 4),
        ("cli", 2),
        ("run", 3),
    ]
