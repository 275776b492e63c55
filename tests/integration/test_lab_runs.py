"""`ipctrace lab`: the list, a lab run end to end in quick mode (its JSON contract, its handout,
its runs readable by the other commands), and the words of its answer taken from its figures."""

import contextlib
import html
import json
import re

import pytest

from analysis.model.lab import Quantity
from analysis.run.lab import LABS
from conftest import needs_tracing

KINDS = ("time", "ratio", "percent", "bytes", "count", "per_byte", "rate", "plain", "factor", "id")


def numbers(text):
    """The numbers a text shows as written, not digits inside a name (L41, CPU0)."""
    return re.findall(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?!\w)", text)


def shown(values):
    """Every way a figure can read: each value through each of Quantity's kinds."""
    out = set()
    for v in values:
        for kind in KINDS:
            with contextlib.suppress(ValueError, OverflowError):
                out.update(numbers(Quantity(v, kind).show()))
    return out


def leaves(doc):
    """The numbers of a JSON document, at any depth."""
    if isinstance(doc, bool):
        return []
    if isinstance(doc, (int, float)):
        return [doc]
    if isinstance(doc, dict):
        return [x for v in doc.values() for x in leaves(v)]
    if isinstance(doc, list):
        return [x for v in doc for x in leaves(v)]
    return []


def test_the_list_names_seven_labs_one_a_line(ipctrace):
    p = ipctrace("lab")
    assert p.returncode == 0, p.stderr
    first_words = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    # what a script takes for a lab's name: a lower-case first word
    named = [w for w in first_words if re.fullmatch(r"[a-z][a-z0-9-]+", w)]
    assert named == [lab.name for lab in LABS] and len(named) >= 7


def test_an_unknown_lab_is_one_line_and_exit_2(ipctrace):
    p = ipctrace("lab", "same-vs-crosss", "--quick")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == "ipctrace: unknown lab 'same-vs-crosss'; did you mean 'same-vs-cross'? (ipctrace lab)"


def run_lab(ipctrace, out, name):
    """ipctrace lab NAME --quick --json --out out: its JSON, after the checks every lab must pass:
    the contract's keys, a verdict per claim, the handout with every claim in it, no INCOMPLETE,
    and every number of the text's answer and evidence table one of the JSON figures."""
    p = ipctrace("lab", name, "--quick", "--json", "--out", out, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert {"lab", "question", "figures", "claims", "exercises", "handout"} <= set(doc)
    assert doc["lab"] == name and doc["quick"] is True
    assert doc["claims"] and all(isinstance(c["holds"], bool) and c["text"] for c in doc["claims"])
    assert len(doc["exercises"]) >= 2
    page = (out / doc["handout"]).read_text()
    assert page.startswith("<!DOCTYPE html>") and "data:image/png;base64," in page
    assert all(html.escape(c["text"]) in page for c in doc["claims"])
    assert not (out / "INCOMPLETE").exists()
    text = (out / "lab.txt").read_text()
    allowed = shown(leaves(doc["figures"]))
    answer = text.split("Answer", 1)[1].split("One iteration explained", 1)[0].split("Exercises:", 1)[0]
    table = text.split("Measured", 1)[1].split("Answer", 1)[0].split("\n", 2)[2]  # below its header
    for part in (answer, table):
        stray = [n for n in numbers(part) if n not in allowed]
        assert not stray, f"{stray} are none of the lab's figures:\n{part}"
    assert len([line for line in answer.splitlines() if line.strip().startswith("[")]) == len(doc["claims"])
    return doc


@needs_tracing
def test_same_vs_cross_quick(ipctrace, tmp_path):
    out = tmp_path / "lab"
    doc = run_lab(ipctrace, out, "same-vs-cross")
    # the runs are ordinary results directories: both pipe, one CPU and two, 2000 iterations each
    for key in ("same", "cross"):
        s = json.loads((out / key / "summary.json").read_text())
        assert s["workload"] == "pipe" and s["metrics"]["rtt"]["n"] == 2000
        assert doc["figures"][key]["median_ns"] == s["metrics"]["rtt"]["median"]
    cpus = {
        k: {t["cpu"] for t in json.loads((out / k / "summary.json").read_text())["threads"]} for k in ("same", "cross")
    }
    assert len(cpus["same"]) == 1 and len(cpus["cross"]) == 2

    # compare reads the lab's runs as any others
    p = ipctrace("compare", out / "same", out / "cross", "--json")
    assert p.returncode == 0, p.stderr
    ratio = json.loads(p.stdout)["metrics"]["rtt"][1]["median_ratio"]
    assert ratio == pytest.approx(doc["figures"]["cross"]["median_ns"] / doc["figures"]["same"]["median_ns"])


OTHERS = [lab.name for lab in LABS if lab.name != "same-vs-cross"]


@needs_tracing
@pytest.mark.parametrize("name", OTHERS)
def test_every_lab_quick(ipctrace, tmp_path, name):
    run_lab(ipctrace, tmp_path / "lab", name)
