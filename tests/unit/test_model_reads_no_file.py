"""model/ computes from what store/ hands it, and render/ draws what it is handed: no module of
analysis/model or analysis/render opens, reads or writes a file, lists a directory or takes a
results directory (store/ reads and writes; run/ reads, computes with model/, has render/ make
the text and bytes, and writes them; cli/ wires them). Read from the source, as test_layers
reads the imports."""

import ast

import pytest

from conftest import HOME

MODEL = HOME / "analysis" / "model"
RENDER = HOME / "analysis" / "render"
# Calls that touch the file system: builtins, pathlib's and os's, tempfile's, and store's readers
# and writers of a results directory.
FILE_CALLS = {
    "open",
    "fdopen",
    "read_text",
    "write_text",
    "read_bytes",
    "write_bytes",
    "iterdir",
    "glob",
    "rglob",
    "exists",
    "lexists",
    "listdir",
    "scandir",
    "TemporaryFile",
    "NamedTemporaryFile",
    "SpooledTemporaryFile",
    "mkstemp",
    "mkdtemp",
    "TemporaryDirectory",
    "EventsFile",
    "check_results_dir",
    "read_parquet",
    "write_parquet",
    "read_json",
    "write_json",
    "read_summary",
    "read_workload",
    "read_iterations",
    "read_breakdown",
    "read_trace",
    "read_meta",
    "read_events_bin",
    "read_iterations_bin",
}
# events.parquet open (store.events.EventsFile) and what reads it: model/ names none of them, not
# even to hold the file. It says which row groups it needs (store.events.ColumnsRead,
# EventsRead) and is handed the tables (store.events.answer, ExplainInputs.answer).
EVENTS_FILE_NAMES = {"EventsFile", "_events", "read_groups"}  # any mention
EVENTS_FILE_READS = {"table", "frame", "groups_meeting", "answer"}  # called as methods
DIRECTORY_PARAMETERS = {"resdir", "out_dir", "outdir", "tmpdir", "dir"}


def file_uses(path):
    """(what, line) of each call that touches the file system, each use of events.parquet's
    open file (EVENTS_FILE_NAMES, EVENTS_FILE_READS) and each function parameter that names a directory or file,
    in the module at path."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in FILE_CALLS or (isinstance(f, ast.Attribute) and name in EVENTS_FILE_READS):
                found.append((f"{name}()", node.lineno))
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in EVENTS_FILE_NAMES:
                found.append((name, node.lineno))
        if isinstance(node, ast.alias) and node.name in EVENTS_FILE_NAMES:
            found.append((node.name, node.lineno))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            found += [(f"parameter {a.arg}", node.lineno) for a in args if a.arg in DIRECTORY_PARAMETERS]
    return found


@pytest.mark.parametrize(
    "path", sorted([*MODEL.glob("*.py"), *RENDER.glob("*.py")]), ids=lambda p: str(p.relative_to(HOME / "analysis"))
)
def test_model_and_render_touch_no_file(path):
    assert not file_uses(path), f"{path.relative_to(HOME)} touches files: {file_uses(path)}"


def test_the_check_sees_a_read(tmp_path):
    p = tmp_path / "m.py"
    p.write_text(
        "import tempfile\nfrom analysis.store import results\n"
        "def f(resdir):\n    return results.read_summary(resdir)\n"
        "def g():\n    with open('/proc/cpuinfo') as h:\n        return tempfile.TemporaryFile(), h\n"
    )
    assert sorted(file_uses(p)) == [
        ("TemporaryFile()", 7),
        ("open()", 6),
        ("parameter resdir", 3),
        ("read_summary()", 4),
    ]


def test_the_check_sees_the_events_file_held_or_read(tmp_path):
    """explain and leadin before issue 27: handed the open events.parquet, they read its row
    groups themselves."""
    p = tmp_path / "m.py"
    p.write_text(
        "from analysis.store.events import EventsFile\n"
        "from analysis.store import events as events_mod\n"
        "def read(f: events_mod.EventsFile, s, e):\n"
        "    narrow = f.table(columns=['ts'])\n"
        "    return f.frame(f.table(f.groups_meeting([(s, e)]))), len(f.read_groups)\n"
        "def explain(inputs):\n    return inputs._events, inputs.answer(None)\n"
    )
    assert sorted(file_uses(p)) == [
        ("EventsFile", 1),
        ("EventsFile", 3),
        ("_events", 7),
        ("answer()", 7),
        ("frame()", 5),
        ("groups_meeting()", 5),
        ("read_groups", 5),
        ("table()", 4),
        ("table()", 5),
    ]
