"""The loader on programs it did not start or that mark their own iterations (the tracer side
of `ipctrace trace`): --usdt and --uprobe marks, --pid with --duration, and the inputs it
refuses in one line. Needs root and the built loader and examples/marked_pingpong."""

import json
import os
import signal
import subprocess
import time

import pytest

from analysis import DRIVER, LOADER, OUTPUT
from analysis.store import events as ev
from analysis.store import records
from conftest import needs_tracing, orphaned_programs

PINGPONG = OUTPUT / "examples" / "marked_pingpong"
MARK = records.TYPES.index("mark") + 1

pytestmark = [
    needs_tracing,
    pytest.mark.skipif(not PINGPONG.exists(), reason=f"{PINGPONG} is not built: run 'make'"),
]


def loader(out, *args, timeout=120):
    return subprocess.run(
        [str(LOADER), "--out", str(out), *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def marks_of(out):
    recs, _, _ = ev.read_events_bin(out / "events.bin")
    m = recs[recs["type"] == MARK]
    return int((m["aux"] == 1).sum()), int((m["aux"] == 2).sum()), json.loads((out / "trace.json").read_text())


@pytest.mark.parametrize("how", ["usdt", "uprobe"])
def test_marks_count_each_round_trip(tmp_path, how):
    probe = ("--usdt", PINGPONG) if how == "usdt" else ("--uprobe", f"{PINGPONG}:round_trip")
    r = loader(tmp_path, *probe, "--", PINGPONG, 500)
    assert r.returncode == 0, r.stderr
    begin, end, tj = marks_of(tmp_path)
    assert (begin, end) == (500, 500)
    assert tj["mode"] == "command" and tj["stopped_by"] == "exit" and tj["marks"]["count"] == 1000
    assert len(tj["marks"]["probes"]) == 2 and tj["events"]["mark"] == 1000
    if how == "usdt":  # the name the example passes
        assert list(tj["marks"]["names"].values()) == ["round_trip"]
    else:
        assert tj["marks"]["names"] == {}


def test_no_marks_without_marker_options(tmp_path):
    r = loader(tmp_path, "--", PINGPONG, 50)
    assert r.returncode == 0, r.stderr
    begin, end, tj = marks_of(tmp_path)
    assert (begin, end) == (0, 0) and tj["marks"] is None


@pytest.mark.timing
def test_pid_for_a_duration(tmp_path):
    """A running process and the children it forks are traced for --duration, and it goes on."""
    sh = subprocess.Popen(["sh", "-c", "while :; do echo x | cat >/dev/null; sleep 0.01; done"])
    try:
        time.sleep(0.2)
        start = time.monotonic()
        r = loader(tmp_path, "--pid", sh.pid, "--duration", "1", timeout=60)
        took = time.monotonic() - start
        assert r.returncode == 0, r.stderr
        assert 1.0 <= took < 10, took
        assert sh.poll() is None
        tj = json.loads((tmp_path / "trace.json").read_text())
        assert tj["mode"] == "pid" and tj["stopped_by"] == "duration" and tj["root_pid"] == sh.pid
        assert sh.pid in tj["pids"] and len(tj["pids"]) > 2  # forked children
        recs, _, _ = ev.read_events_bin(tmp_path / "events.bin")
        assert (recs["pid"] == sh.pid).sum() > 0 and tj["events"]["fork"] > 0
    finally:
        sh.send_signal(signal.SIGKILL)
        sh.wait()


def test_pid_until_it_exits(tmp_path):
    p = subprocess.Popen(["sleep", "0.5"])
    r = loader(tmp_path, "--pid", p.pid, timeout=60)
    p.wait()
    assert r.returncode == 0, r.stderr
    tj = json.loads((tmp_path / "trace.json").read_text())
    assert tj["stopped_by"] == "exit" and tj["exit_code"] == 0


@pytest.mark.parametrize(
    "args, says",
    [
        (["--pid", "3999999"], "ipctrace-loader: pid 3999999 does not exist"),
        (
            ["--uprobe", f"{PINGPONG}:no_such_function", "--", PINGPONG, "10"],
            f"ipctrace-loader: no_such_function not found in {PINGPONG}",
        ),
        (
            ["--usdt", "/bin/true", "--", "true"],
            "ipctrace-loader: /bin/true has no ipctrace markers (USDT ipctrace:iteration_begin/iteration_end)",
        ),
    ],
)
def test_bad_inputs_say_one_line_and_leave_nothing(tmp_path, args, says):
    r = loader(tmp_path / "out", *args, timeout=60)
    assert r.returncode == 2 and r.stderr == says + "\n"
    assert orphaned_programs(("sys_enter", "sched_switch", "mark_")) == []
    assert os.path.exists(tmp_path) and not (tmp_path / "out" / "trace.json").exists()


@pytest.mark.parametrize("how", ["usdt", "uprobe"])
def test_calibration_probes_beside_the_programs(tmp_path, how):
    """--calibrate: the same programs on ipcbench's calibration windows, which `ipcbench exec`
    runs before it becomes the command (250 windows a phase, two phases of each kind: 1000
    marks); trace.json names them and the bytes the command's probes sit on."""
    probe = ("--usdt", PINGPONG) if how == "usdt" else ("--uprobe", f"{PINGPONG}:round_trip")
    r_fd, w_fd = os.pipe()
    try:
        r = subprocess.run(
            [
                str(LOADER),
                "--out",
                str(tmp_path),
                *map(str, probe),
                "--calibrate",
                str(DRIVER),
                "--",
                str(DRIVER),
                "exec",
                "--entry-fd",
                str(w_fd),
                "--",
                str(PINGPONG),
                "100",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            pass_fds=(w_fd,),
        )
        os.close(w_fd)
        w_fd = -1
        with os.fdopen(r_fd) as f:
            r_fd = -1
            cal = json.loads(f.read())
    finally:
        for fd in (r_fd, w_fd):
            if fd >= 0:
                os.close(fd)
    assert r.returncode == 0, r.stderr
    begin, end, tj = marks_of(tmp_path)
    assert (begin, end) == (100 + 500, 100 + 500)
    m = tj["marks"]
    want = (
        ["usdt ipctrace_cal:begin", "usdt ipctrace_cal:end"]
        if how == "usdt"
        else [
            f"{p} {f}"
            for f in ("ipcbench_probe_cal_fn", "ipcbench_probe_cal_fn_clock")
            for p in ("uprobe", "uretprobe")
        ]
    )
    assert m["calibration"] == {"binary": str(DRIVER), "probes": want, "error": None}
    site = "0f1f440000" if how == "usdt" else "55"  # a 5-byte no-op; push %rbp
    assert [s["kind"] for s in m["sites"]] == [how] and all(b.startswith(site) for b in m["sites"][0]["bytes"])
    p = cal["probes"]
    assert cal["entry"]["calls"] and p["windows"] == 200 and len(p["phases"]) == 4
    assert len(p["mid_usdt"]) == len(p["mid_function"]) == 200


def test_calibration_that_cannot_attach_is_no_error(tmp_path):
    r = loader(tmp_path, "--usdt", PINGPONG, "--calibrate", "/bin/true", "--", PINGPONG, 50)
    assert r.returncode == 0, r.stderr
    begin, end, tj = marks_of(tmp_path)
    assert (begin, end) == (50, 50)
    cal = tj["marks"]["calibration"]
    assert cal["probes"] == [] and "ipctrace_cal" in cal["error"], cal
