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


def type_checking_blocks(tree):
    """The nodes under `if TYPE_CHECKING:` (imports for annotations only: no circle at run time)."""
    return {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        for stmt in node.body
        for n in ast.walk(stmt)
    }


def module_imports(path, home=HOME):
    """The analysis modules (dotted names) that the module at path imports at any depth, those
    for annotations only left out: `from analysis.x import name` counts analysis.x.name when
    that is a module, else analysis.x."""
    tree = ast.parse(path.read_text())
    typing_only = type_checking_blocks(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("analysis"):
            names = [f"{node.module}.{a.name}" for a in node.names]
            if not any(home.joinpath(*n.split(".")).with_suffix(".py").is_file() for n in names):
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("analysis")]
        found |= {n for n in names if home.joinpath(*n.split(".")).with_suffix(".py").is_file()}
    return found


def import_circles(files, home=HOME):
    """Circles of imports among the modules {dotted name: path}, each a list of modules that
    starts and ends with the same one (every module in some circle is in at least one)."""
    graph = {name: sorted(module_imports(path, home) & files.keys()) for name, path in files.items()}
    circles, state = [], {}

    def visit(name, stack):
        state[name] = "open"
        stack.append(name)
        for dep in graph[name]:
            if state.get(dep) == "open":
                circles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    return circles


def analysis_modules(home=HOME):
    return {".".join(p.relative_to(home).with_suffix("").parts): p for p in (home / "analysis").rglob("*.py")}


def test_no_import_circle():
    """No module of analysis/ imports (at any depth, also inside a function) one that imports
    it back: a circle through private names is how render/activity.py and report.py were tied."""
    assert import_circles(analysis_modules()) == []


def test_the_check_sees_a_circle(tmp_path):
    pkg = tmp_path / "analysis" / "render"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("def f():\n    from analysis.render.b import g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nfrom analysis.render import a\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from analysis.render.a import f\n"
    )
    (pkg / "d.py").write_text("from analysis.render.c import x\n")
    assert import_circles(analysis_modules(tmp_path), tmp_path) == [
        ["analysis.render.a", "analysis.render.b", "analysis.render.a"]
    ]
