"""The probe calibration of marked iterations (model/marks.py): the in-window cost taken from
the calibration's empty windows, split by their clock reads, subtracted from the program's
windows only where its probes sit on what the calibration's do; on tables worked out by hand."""

import dataclasses

import pandas as pd

from analysis.model import marks, timeline
from analysis.store.jsonfiles import MarkCalibration, Marks

CAL, PROG = 7, 9  # the calibration's thread (it becomes the program), another of the program's


def frame(rows):
    """rows: (ts, tid, aux) marks -> the columns marks reads."""
    df = pd.DataFrame([(ts, "mark", tid, aux, 0) for ts, tid, aux in rows], columns=["ts", "type", "tid", "aux", "a0"])
    df["type"] = pd.Categorical(df["type"], categories=timeline.Events.TYPES)
    df["pid"], df["cpu"] = df["tid"], 0
    return df.sort_values("ts", kind="stable").reset_index(drop=True)


def calibrated(kind="usdt", empty=300, tail=100, head=200, n=20):
    """Rows and probes of a calibration whose empty windows last `empty` ns and whose timed
    windows read the clock `tail` ns after their begin and `head` ns before their end."""
    rows, mids, t = [], [], 1000
    for _ in range(3):  # warm-up windows before the phases: not counted
        rows += [(t, CAL, 1), (t + 5000, CAL, 2)]
        t += 10_000
    phases = []
    for timed in (False, True):
        start = t
        for _ in range(n):
            rows += [(t, CAL, 1), (t + (tail + head if timed else empty), CAL, 2)]
            if timed:
                mids.append(t + tail)
            t += 1000
        phases.append([start, t])
    k = "mid_usdt" if kind == "usdt" else "mid_function"
    phases = [[0, 1], [1, 2]] + phases if kind == "uprobe" else phases + [[t + 1, t + 2], [t + 3, t + 4]]
    probes = {"tid": CAL, "cpu": 0, "span": [0, t + 10], "phases": phases, k: mids}
    return rows, probes, t + 100


def marks_json(kind="usdt", site=None):
    site = site if site is not None else marks.CAL_SITES[kind][0]
    return Marks.from_json(
        {
            "names": {},
            "sites": [{"kind": kind, "target": "prog", "bytes": [site]}],
            "calibration": {"binary": "ipcbench", "probes": ["..."], "error": None},
        }
    )


def test_in_window_cost_and_its_split():
    for kind in ("usdt", "uprobe"):
        rows, probes, _ = calibrated(kind)
        c = marks.calibration(frame(rows), marks_json(kind), probes)
        assert c["mode"] == marks.MODES[kind]
        assert (c["probe_in_window_ns"], c["begin_tail_ns"], c["end_head_ns"], c["windows"]) == (300, 100, 200, 20)


def test_program_windows_narrowed_and_calibration_left_out():
    rows, probes, t = calibrated()
    # the program: its windows of 3000 and 250 ns (the latter shorter than the probes' share)
    rows += [(t, CAL, 1), (t + 3000, CAL, 2), (t + 5000, PROG, 1), (t + 5250, PROG, 2)]
    ev, mj = frame(rows), marks_json()
    c = marks.calibration(ev, mj, probes)
    it = marks.windows(ev, mj, probes=probes, cal=c).sort_values("tid")
    assert it["t_start_ns"].tolist() == [t + 100, t + 5075]  # (5100 + 5050) / 2
    assert it["latency_ns"].tolist() == [2700, 0]
    # without the calibration: the windows as traced (the calibration's marks still left out)
    raw = marks.windows(ev, mj, probes=probes).sort_values("tid")
    assert raw["latency_ns"].tolist() == [3000, 250]


def test_other_sites_are_not_calibrated():
    rows, probes, _ = calibrated("uprobe")
    for site, why in (("f30f1efa55", "bytes f30f1efa55"), ("", "could not be read")):
        c = marks.calibration(frame(rows), marks_json("uprobe", site), probes)
        assert c["probe_in_window_ns"] is None and c["mode"] == "function"
        assert why in c["source"] and "push %rbp" in c["source"]


def test_nothing_to_subtract_without_a_calibration():
    rows, probes, _ = calibrated()
    ev = frame(rows)
    assert "no calibration" in marks.calibration(ev, marks_json(), None)["source"]
    mj = dataclasses.replace(marks_json(), calibration=MarkCalibration(binary="ipcbench", error="cannot attach"))
    assert marks.calibration(ev, mj, probes)["source"] == "not calibrated: cannot attach"
    few = {**probes, "span": [0, 1]}  # its marks all outside: none traced
    assert "0 empty" in marks.calibration(ev, marks_json(), few)["source"]
    c = marks.calibration(ev, marks_json(), None)
    it = marks.windows(frame([(10, PROG, 1), (40, PROG, 2)]), marks_json(), cal=c)
    assert it["latency_ns"].tolist() == [30]
