"""The whole trace for a person (render/activity.py): the terminal tables and the report's
section, whose wake-up graph is an SVG that parses and names every node."""

import math
import xml.etree.ElementTree as ET

import pytest
from scenarios import HOGGED, OTHER, TASKS, A, B, events

from analysis.model import activity
from analysis.render import activity as ra
from analysis.run import flamegraphs
from analysis.store.jsonfiles import tasks_from_json
from analysis.store.summaryfile import Activity, WakeEdge

SVG = "{http://www.w3.org/2000/svg}"
NAMES = tasks_from_json({str(A): {"comm": "ping", "pid": A}, str(B): {"comm": "pong", "pid": B}, **TASKS})


def hogged():
    return activity.summarize(events(HOGGED), NAMES, [A, B]).to_json()


def test_terminal_tables():
    # HOGGED's figures (tests/unit/model/test_activity.py) in us, shares of the span.
    lines = ra.activity_lines(Activity.from_json(hogged()))
    assert lines[0] == "whole trace: 1.80 us, 2 threads"
    header = lines[2].split()
    assert header == "thread span user syscall irq blocked runqueue preempted unknown off CPU".split()
    assert (
        lines[3].split()
        == "ping/100 1.80 0.61 33.9% 0.43 23.9% 0.01 0.6% 0.20 11.1% 0.12 6.7% 0.03 1.7% 0.40 22.2% 19.4%".split()
    )
    assert "  ping/100 preempted by: hog/999 0.03 us (1x)" in lines
    edges = lines[lines.index(next(x for x in lines if x.startswith("waker -> wakee"))) + 1 :]
    assert edges[0].split() == "ping/100 -> pong/200 1 0 0.25 0.25 0.25 0.25".split()
    calls = next(i for i, x in enumerate(lines) if x.startswith("syscall "))
    assert lines[calls + 1].split() == "read 2 1.93 0.96 1.38 1.47 1.48 10.9% 69.9% 19.2% 0.0%".split()
    assert [x.split()[0] for x in lines[calls + 1 : calls + 4]] == ["read", "write", "getpid"]


def test_empty_activity_says_so():
    empty = Activity("x86_64", None, None, [], [], [], 0).to_json()
    text = "\n".join(ra.activity_lines(Activity.from_json(empty)))
    assert "no followed thread has events" in text and "wake-ups: none recorded" in text
    assert ra.wake_graph_svg(Activity.from_json(empty)) == ""
    assert "No wake-ups were recorded" in ra.activity_section(Activity.from_json(empty))


def edge(waker, wakee, count, hardirq=0, comm="t"):
    d = 20_000.0
    return WakeEdge(waker, f"{comm}{waker}", wakee, f"{comm}{wakee}", count, hardirq, count, d, d, d, d)


GRAPHS = [
    ("ping-pong", hogged, {"ping/100", "pong/200"}, 2),
    # a dispatcher (1) waking six workers, three of which answer; a timer's wake-up of 3 in an
    # interrupt that hit 0; a thread whose recorded waker is itself; a comm that needs escaping
    (
        "dispatcher",
        lambda: Activity(
            "x86_64",
            0,
            1,
            [],
            [edge(1, k, 100 + k) for k in range(2, 8)]
            + [edge(k, 1, 90) for k in range(2, 5)]
            + [edge(0, 3, 12, 12), edge(9, 9, 3, 3), edge(1, 11, 1, comm="<a&b>")],
            [],
            0,
        ).to_json(),
        {f"t{k}/{k}" for k in (0, 1, 2, 3, 4, 5, 6, 7, 9)} | {"<a&b>11/11"},
        12,
    ),
]


@pytest.mark.parametrize("name,make,nodes,nedges", GRAPHS, ids=[g[0] for g in GRAPHS])
def test_wake_graph_svg_parses_and_names_every_node(name, make, nodes, nedges):
    svg = ET.fromstring(ra.wake_graph_svg(Activity.from_json(make())))
    assert svg.tag == SVG + "svg"
    groups = svg.findall(SVG + "g")
    node_labels = {g.find(SVG + "text").text for g in groups if g.get("class") == "node"}
    edge_groups = [g for g in groups if g.get("class") == "edge"]
    assert node_labels == nodes  # a node is named by the first edge that names it
    assert len(edge_groups) == nedges
    for g in edge_groups:
        assert g.find(SVG + "path").get("marker-end") == "url(#wake-arrow)"
    labels = [g.find(SVG + "text").text for g in groups if g.get("class") == "edge-label"]
    assert len(labels) + int(svg.get("data-labels-left-out")) == nedges
    assert all("x" in t for t in labels)  # "<count>x <p50> us"


def test_hub_sits_in_the_middle():
    data = GRAPHS[1][1]()
    svg = ET.fromstring(ra.wake_graph_svg(Activity.from_json(data)))
    circles = {
        g.find(SVG + "text").text: (float(g.find(SVG + "circle").get("cx")), float(g.find(SVG + "circle").get("cy")))
        for g in svg.findall(SVG + "g")
        if g.get("class") == "node"
    }
    hub = circles["t1/1"]
    ring = [math.dist(p, hub) for n, p in circles.items() if n != "t1/1"]
    assert max(ring) - min(ring) < 0.2 and min(ring) > 100


def test_report_section():
    assert ra.activity_section(None) == ""
    html = ra.activity_section(Activity.from_json(hogged()))
    start, end = html.index("<svg"), html.index("</svg>") + len("</svg>")
    ET.fromstring(html[start:end])
    for text in ("ping/100", "pong/200", "hog/999 0.03 us", "<td>read</td>", "ping/100 → pong/200"):
        assert text in html
    assert f"{OTHER}" in html


def test_long_names_fit_and_the_graph_scales_to_the_page():
    """A long comm (memfd:sealed-91 and its tid) keeps its label inside the picture, and a
    big graph scales to the page's width instead of being cut at the right edge (point 10)."""
    long = "memfd:sealed-91-with-a-long-name"
    data = Activity("x86_64", 0, 1, [], [edge(k, k + 1, 10 + k, comm=long) for k in range(1, 30)], [], 0).to_json()
    svg = ET.fromstring(ra.wake_graph_svg(Activity.from_json(data)))
    x0, y0, w, h = map(float, svg.get("viewBox").split())
    assert "max-width:100%" in svg.get("style") and float(svg.get("width")) == w
    for g in svg.findall(SVG + "g"):
        if g.get("class") == "node":
            t = g.find(SVG + "text")
            x, width = float(t.get("x")), 7 * len(t.text)
            left = {"start": x, "end": x - width, "middle": x - width / 2}[t.get("text-anchor")]
            assert x0 <= left and left + width <= x0 + w, (t.text, left, x0, w)


def crowded():
    """A 42-thread Python program's graph (issue 28, point 10): three wakers outside the program
    (grey) and the GIL's hand-overs, 24 edges among 24 nodes, most of them from three nodes."""
    wakers = [(900, "ipcbench"), (901, "ipcbench"), (902, "python")]
    edges = []
    for k in range(24):
        tid, comm = wakers[k % 3]
        edges.append(WakeEdge(tid, comm, 27000 + k, "python3", 120 - k, 50, 120 - k, 4e4, 4e4, 4e4, 4e4))
    return Activity("x86_64", 0, 1, [], edges, [], 0).to_json()


def boxes(svg):
    """(kind, text, box) of every text the graph draws, by the renderer's own estimate."""
    out = []
    for g in svg.iter(SVG + "g"):
        t = g.find(SVG + "text")
        if t is not None:
            out.append(
                (
                    g.get("class"),
                    t.text,
                    ra._text_box(float(t.get("x")), float(t.get("y")), t.text, t.get("text-anchor")),
                )
            )
    return out


def test_crowded_graph_labels_cover_nothing():
    """Every edge label is placed where it meets no node, no node label and no other label (or
    left out and counted); everything is inside the picture."""
    svg = ET.fromstring(ra.wake_graph_svg(Activity.from_json(crowded())))
    x0, y0, w, h = map(float, svg.get("viewBox").split())
    texts = boxes(svg)
    assert sum(k == "edge-label" for k, _, _ in texts) + int(svg.get("data-labels-left-out")) == 24
    circles = [
        (
            float(c.get("cx")) - ra.NODE_R,
            float(c.get("cy")) - ra.NODE_R,
            float(c.get("cx")) + ra.NODE_R,
            float(c.get("cy")) + ra.NODE_R,
        )
        for c in svg.iter(SVG + "circle")
    ]
    for i, (kind, text, box) in enumerate(texts):
        assert x0 <= box[0] and box[2] <= x0 + w and y0 <= box[1] and box[3] <= y0 + h, text
        for _other_kind, other, b in texts[i + 1 :]:
            assert not ra._meet(box, b, 0), (text, other)
        if kind == "edge-label":
            assert not any(ra._meet(box, c, 0) for c in circles), text


def test_crowded_graph_in_chromium_stays_in_the_boxes(tmp_path):
    """The boxes the layout reserves hold what Chromium draws: each text's getBBox() inside its
    estimate (a label wider than its box could still cover another)."""
    import html as html_mod
    import json
    import re
    import subprocess

    if flamegraphs.chromium() is None:
        pytest.skip("chromium is installed by tools/bootstrap --test")
    svg_text = ra.wake_graph_svg(Activity.from_json(crowded()))
    page = tmp_path / "g.html"
    page.write_text(
        "<!DOCTYPE html><html><body>" + svg_text + "<pre id='out'></pre><script>"
        "const r=[];for(const t of document.querySelectorAll('text')){const b=t.getBBox();"
        "r.push([t.textContent,b.x,b.y,b.x+b.width,b.y+b.height]);}"
        "document.getElementById('out').textContent=JSON.stringify(r);</script></body></html>"
    )
    r = subprocess.run(
        [flamegraphs.chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path}/p"]
        + ["--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    drawn = json.loads(html_mod.unescape(re.search(r"<pre id=\"out\">(.*?)</pre>", r.stdout, re.S).group(1)))
    estimated = [b for _, _, b in boxes(ET.fromstring(svg_text))]
    assert len(drawn) == len(estimated) > 24
    for (text, *got), box in zip(drawn, estimated):
        assert box[0] - 1 <= got[0] and got[2] <= box[2] + 1 and box[1] - 1 <= got[1] and got[3] <= box[3] + 1, (
            text,
            got,
            box,
        )


def test_many_threads_show_the_busiest_and_count_the_rest():
    """`trace -a` follows hundreds of threads: the table shows the busiest first, the rest counted."""
    from analysis.store.summaryfile import STATES, ThreadActivity

    def thread(tid, user_ns):
        states = dict.fromkeys(STATES, 0) | {"user": user_ns, "blocked": 1000 - user_ns}
        return ThreadActivity(tid, tid, f"t{tid}", 0, 1000, states, 0, [])

    act = Activity("x86_64", 0, 1000, [thread(k, k) for k in range(1, 286)], [], [], 0)
    lines = ra.thread_lines(act, top=20)
    assert "the 20 busiest (most time on a CPU) of 285" in lines[0]
    rows = [x.split()[0] for x in lines[2:22]]
    assert rows == [f"t{k}/{k}" for k in range(285, 265, -1)]
    # the other 265 threads' time on a CPU: 1 + 2 + ... + 265 ns = 35,245 ns
    assert "  ... and 265 more threads, 35.2 us on a CPU in all (summary.json's activity has every thread)" in lines
    assert len(lines) < 30


def test_a_whole_trace_is_not_told_of_0_of_0_iterations():
    import numpy as np
    import pandas as pd

    from analysis.model import tracesummary
    from analysis.store.jsonfiles import TraceFile

    tally = tracesummary.Tally(np.zeros(64, np.int64))
    tj = TraceFile.from_json({"drops": {"total": 0, "switches_missed": 7}, "events": {}})
    no_iterations = pd.DataFrame({"t_start_ns": pd.Series([], dtype="int64"), "t_end_ns": pd.Series([], dtype="int64")})
    r = tracesummary.summarize(tj, tally, 0, no_iterations, [])
    said = " ".join(r.warnings_first)
    assert "missed 7 context switches" in said and "0 of 0" not in said
    assert "the whole trace's per-thread times over those stretches are incomplete" in said
