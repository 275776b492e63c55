"""Records are picked by their type in store/ (the formats) and the decoded model
(model/decoded.py: its Events and its tables of a frame: forks, exits, the threads with calls);
every other module, in model/ too, reads those tables and helpers (Events.of, .at, .mask,
.kind_at, of_type, type_counts, ...). Read from the source: a frame's "type" column or a
decoded code compared or indexed is a record-type test."""

import re

import pytest

from conftest import HOME

PACKAGE = HOME / "analysis"
RECORD_TYPE = re.compile(r"""\[["']type["']\]|\.code\[|\bev\.type\b|\.type\[|\.type ==""")


# The decoded model: the one module above store/ that picks records by their type.
DECODED = PACKAGE / "model" / "decoded.py"


def outside_the_decoded_model():
    layers = ("model", "render", "run", "cli")
    return sorted(p for layer in layers for p in (PACKAGE / layer).glob("*.py") if p != DECODED)


def record_type_tests(text):
    return [n for n, line in enumerate(text.splitlines(), 1) if RECORD_TYPE.search(line)]


@pytest.mark.parametrize("path", outside_the_decoded_model(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_record_type_test_outside_the_decoded_model(path):
    found = record_type_tests(path.read_text())
    assert not found, (
        f"{path.relative_to(PACKAGE)} picks records by type (lines {found}): read model/decoded.py's tables"
    )


def test_the_model_is_checked_but_the_decoded_model():
    checked = outside_the_decoded_model()
    assert DECODED.exists() and DECODED not in checked
    assert PACKAGE / "model" / "activity.py" in checked


def test_the_check_sees_a_record_type_test():
    text = 'born = ev["other_tid"][(ev["type"] == "fork")]\nx = ev.code["switch"]\nok = decoded.forked_tids(ev)\n'
    assert record_type_tests(text) == [1, 2]
