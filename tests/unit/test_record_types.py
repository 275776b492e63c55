"""Records are picked by their type in store/ (the formats) and the decoded model
(model/decoded.py: its Events and its tables of a frame: forks, exits, the threads with calls);
every other module reads those tables. Read from the source: a frame's "type" column or a
decoded code compared or indexed is a record-type test. model/ modules are the next step
(issue 36, point 2)."""

import re

import pytest

from conftest import HOME

PACKAGE = HOME / "analysis"
RECORD_TYPE = re.compile(r"""\[["']type["']\]|\.code\[|\bev\.type\b|\.type\[|\.type ==""")


def above_model():
    return sorted(p for layer in ("render", "run", "cli") for p in (PACKAGE / layer).glob("*.py"))


def record_type_tests(text):
    return [n for n, line in enumerate(text.splitlines(), 1) if RECORD_TYPE.search(line)]


@pytest.mark.parametrize("path", above_model(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_record_type_test_above_the_model(path):
    found = record_type_tests(path.read_text())
    assert not found, (
        f"{path.relative_to(PACKAGE)} picks records by type (lines {found}): read model/decoded.py's tables"
    )


def test_the_check_sees_a_record_type_test():
    text = 'born = ev["other_tid"][(ev["type"] == "fork")]\nx = ev.code["switch"]\nok = decoded.forked_tids(ev)\n'
    assert record_type_tests(text) == [1, 2]
