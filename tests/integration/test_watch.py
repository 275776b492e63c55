"""`ipctrace watch` beside a real program, sending to a real Jaeger started here (issue 37):
examples/known_pingpong over TCP, its server spinning 2 ms before every 100th answer. The tests
assert what load cannot change: a spun request lasts at least 2 ms however busy the machine is,
so each one is slower than 1 ms and must arrive; the spans' structure, names and attributes;
what is kept can be explained; a receiver that is down costs nothing but the counted drops."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import HOME, cli_argv, cli_env, needs_tracing

pytestmark = [needs_tracing]

PINGPONG = HOME / ".output" / "examples" / "known_pingpong"
JAEGER_VERSION = "v1.76.0"
CACHE = Path("/var/cache/ipctrace-jaeger")
ITERATIONS, EVERY = 3000, 100
SPUN = ITERATIONS // EVERY
SPANS = {"user", "entry", "copy", "irq", "wakeup", "runqueue", "blocked", "preempted", "steal", "residual"}


def _jaeger_binary() -> tuple[str | None, str]:
    """(path of a jaeger binary, or None; why not) built once into CACHE as the acceptance check does."""
    for cand in (os.environ.get("IPCTRACE_JAEGER"), shutil.which("jaeger"), str(CACHE / "bin" / "jaeger")):
        if cand and os.access(cand, os.X_OK):
            return cand, ""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        return None, "no jaeger binary and no Go toolchain to build it"
    mod = CACHE / "mod"
    mod.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOBIN=str(CACHE / "bin"))
    steps = []
    if not (mod / "go.mod").exists():
        steps.append([go, "mod", "init", "jaegertool"])
    steps += [
        [go, "get", "-tool", f"github.com/jaegertracing/jaeger/cmd/jaeger@{JAEGER_VERSION}"],
        [go, "install", "tool"],
    ]
    for step in steps:
        r = subprocess.run(step, cwd=mod, env=env, capture_output=True, text=True, timeout=3600)
        if r.returncode:
            return None, f"building jaeger {JAEGER_VERSION} failed: {' '.join(step[1:3])}: {r.stderr.strip()[-300:]}"
    return str(CACHE / "bin" / "jaeger"), ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory):
    """A Jaeger of its own (ports of its own): (OTLP/HTTP base URL, query API base URL)."""
    binary, why = _jaeger_binary()
    if binary is None:
        pytest.skip(why)
    otlp, query, grpc = _free_port(), _free_port(), _free_port()
    log = tmp_path_factory.mktemp("jaeger") / "jaeger.log"
    sets = [
        f"--set=receivers.otlp.protocols.http.endpoint=127.0.0.1:{otlp}",
        f"--set=receivers.otlp.protocols.grpc.endpoint=127.0.0.1:{grpc}",
        f"--set=extensions.jaeger_query.http.endpoint=127.0.0.1:{query}",
        f"--set=extensions.jaeger_query.grpc.endpoint=127.0.0.1:{_free_port()}",
    ]
    with open(log, "w") as f:
        p = subprocess.Popen([binary, *sets], stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(150):
            try:
                _get(f"http://127.0.0.1:{query}/api/services")
                break
            except OSError:
                if p.poll() is not None:
                    pytest.fail(f"jaeger ended: {log.read_text()[-500:]}")
                time.sleep(0.2)
        else:
            pytest.fail(f"jaeger did not answer: {log.read_text()[-500:]}")
        yield f"http://127.0.0.1:{otlp}", f"http://127.0.0.1:{query}"
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(30)


def watch(*args, iterations=ITERATIONS, timeout=900):
    cmd = cli_argv("watch", "--rtt", "-q", *map(str, args), "--", PINGPONG, "tcp", "--cpus", "0,1")
    cmd += ["--iterations", str(iterations), "--spin-ns", "2000000", "--spin-every", str(EVERY)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=cli_env(), cwd=HOME)


def last_line(r) -> str:
    return [x for x in r.stderr.splitlines() if x.startswith("ipctrace watch:")][-1]


@pytest.fixture(scope="module")
def watched(jaeger, tmp_path_factory):
    """One watch into Jaeger, kept in a directory: (the run, the kept directory, Jaeger's traces)."""
    otlp, query = jaeger
    keep = tmp_path_factory.mktemp("watch") / "kept"
    r = watch("--slower-than", "1ms", "--otlp", otlp, "--keep", keep)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    traces = []
    for _ in range(20):  # Jaeger writes what it took a moment later
        traces = _get(f"{query}/api/traces?service=known_pingpong&limit=100000&lookback=1h")["data"]
        if traces:
            time.sleep(1)
            traces = _get(f"{query}/api/traces?service=known_pingpong&limit=100000&lookback=1h")["data"]
            break
        time.sleep(0.5)
    return r, keep, traces


def _root(tr):
    return next(s for s in tr["spans"] if not s.get("references"))


@pytest.mark.timing
def test_every_spun_request_arrives_with_its_critical_path(watched):
    """Each spun request (>= 2 ms whatever the load) is a trace in Jaeger: one root, children on
    the path that tile it, named by component or system call, on the thread where they ran."""
    r, _, traces = watched
    line = last_line(r)
    assert "known_pingpong exited with status 0" in line and "sent to" in line and "dropped" not in line
    slow = [tr for tr in traces if _root(tr)["duration"] >= 2000]  # us
    assert len(slow) >= SPUN * 0.95, line
    for tr in slow:
        root = _root(tr)
        assert root["operationName"] == "round trip"
        tags = {t["key"]: t["value"] for t in root["tags"]}
        assert {"thread.id", "thread.name", "ipctrace.latency_ns", "ipctrace.clock.offset_ns"} <= set(tags)
        proc = tr["processes"][root["processID"]]
        ptags = {t["key"]: t["value"] for t in proc["tags"]}
        assert proc["serviceName"] == "known_pingpong" and {"host.name", "process.pid"} <= set(ptags)
        top = sorted(
            (s for s in tr["spans"] if s.get("references") and s["references"][0]["spanID"] == root["spanID"]),
            key=lambda s: s["startTime"],
        )
        assert top, "a root without children"
        for s in top:
            st = {t["key"]: t["value"] for t in s["tags"]}
            assert s["operationName"] in SPANS or st.get("ipctrace.component") == "syscall"
            assert {"thread.id", "thread.name", "ipctrace.component"} <= set(st)
        # the children cover the round trip (Jaeger keeps microseconds: a microsecond a span)
        assert abs(top[0]["startTime"] - root["startTime"]) <= 1
        assert abs(top[-1]["startTime"] + top[-1]["duration"] - root["startTime"] - root["duration"]) <= 1


@pytest.mark.timing
def test_a_spun_request_shows_the_servers_user_time(watched):
    """The spin is the server's user time: a user span of the server's thread of >= 2 ms."""
    _, _, traces = watched
    slow = [tr for tr in traces if _root(tr)["duration"] >= 2000]
    with_spin = 0
    for tr in slow:
        root_tid = {t["key"]: t["value"] for t in _root(tr)["tags"]}["thread.id"]
        for s in tr["spans"]:
            st = {t["key"]: t["value"] for t in s["tags"]}
            if s["operationName"] == "user" and st.get("thread.id") != root_tid and s["duration"] >= 1990:
                with_spin += 1
                break
    # load can cut a spin by a preemption (two user spans then), never shorten it
    assert with_spin >= 1


def test_kept_requests_are_results_directories_explain_takes(watched):
    """Each kept directory (10 at most: an explain each, those the keeper left raw first) is one
    explain takes, written whole by then, and its explain.txt, written from the step's
    breakdown of the request, is what explain says of it."""
    r, keep, _ = watched
    kept = sorted((keep / "requests").iterdir(), key=lambda d: not (d / "kept.bin").exists())
    assert kept, last_line(r)
    tally = json.loads(next(keep.glob("watch-*.json")).read_text())["tally"]
    assert tally["kept"] + tally["keep_dropped"] + tally["keep_failed"] == tally["slow"], tally
    assert len(kept) == tally["kept"] - tally["disk_dropped"], tally
    for one in kept[:10]:
        raw = (one / "kept.bin").exists()
        e = subprocess.run(
            cli_argv("explain", one, "--iteration", "0"),
            capture_output=True,
            text=True,
            env=cli_env(),
            cwd=HOME,
            timeout=300,
        )
        assert e.returncode == 0, e.stderr
        assert ("kept raw; writing it whole first" in e.stderr) == raw, e.stderr
        assert not (one / "kept.bin").exists() and not (one / "events.bin").exists()
        for name in (
            "summary.json",
            "iterations.parquet",
            "events.parquet",
            "explain.txt",
            "critical_path.json",
            "watch.json",
        ):
            assert (one / name).exists(), (one.name, name)
        assert not (one / "INCOMPLETE").exists()
        assert list(one.glob("*.perfetto-trace"))
        assert e.stdout.strip() == (one / "explain.txt").read_text().strip(), one.name
        # every task it names is named (the watch's own threads as the tracer's): trace.json
        # names the tasks switched around the request, as the tracer's names those it recorded
        assert not re.search(r"\btask \d+", e.stdout), e.stdout
        assert json.loads((one / "trace.json").read_text())["tracer"]["tids"], one.name
        cp = json.loads((one / "critical_path.json").read_text())
        assert sum(seg["end_ns"] - seg["start_ns"] for seg in cp["path"]) == cp["latency_ns"]


def test_a_summary_row_a_minute_in_the_fleet_layout(watched):
    import pyarrow.dataset as ds

    _, keep, _ = watched
    assert json.loads((keep / "dataset.json").read_text())["format"] == "ipctrace-parquet-dataset"
    t = ds.dataset(keep / "minutes", format="parquet", partitioning="hive").to_table().to_pandas()
    assert len(t) >= 1 and set(t["metric"]) == {"rtt"}
    assert int(t["count"].sum()) > 0.9 * ITERATIONS
    assert {"median_ns", "p99_ns", "p999_ns", "mean_user_ns", "mean_runqueue_ns", "drops"} <= set(t.columns)


def test_a_receiver_that_is_down_costs_only_counted_drops(tmp_path):
    """Nothing listens: the watch ends as the program does, and says what it dropped."""
    port = _free_port()
    r = watch("--slower-than", "1ms", "--otlp", f"http://127.0.0.1:{port}", iterations=1000)
    assert r.returncode == 0, r.stderr[-2000:]
    line = last_line(r)
    assert "dropped" in line and "refused or timed out" in line


def test_max_disk_drops_the_oldest_and_counts_them(tmp_path):
    keep = tmp_path / "kept"
    """A bound below one kept request's size (how many the keeper writes depends on the load):
    each one written is then removed, the oldest first, and counted."""
    r = watch("--slower-than", "1ms", "--keep", keep, "--max-disk", "1K", iterations=1500)
    assert r.returncode == 0, r.stderr[-2000:]
    line = last_line(r)
    # each one written was removed; on a busy machine the keeper (SCHED_IDLE) may write none:
    # then every slow request is counted as not kept
    slow = int(re.search(r"([\d,]+) slower than", line).group(1).replace(",", ""))
    behind = re.search(r"([\d,]+) not kept: the keeper was behind", line)
    assert "removed for --max-disk" in line or (behind and int(behind.group(1).replace(",", "")) == slow), line
    used = sum(f.stat().st_blocks * 512 for f in (keep / "requests").rglob("*") if f.is_file())
    assert used <= 1024


def test_sigterm_keeps_what_was_kept(tmp_path):
    keep = tmp_path / "kept"
    cmd = cli_argv("watch", "--rtt", "-q", "--slower-than", "1ms", "--keep", keep, "--", PINGPONG, "tcp")
    cmd += ["--iterations", "100000000", "--spin-ns", "2000000", "--spin-every", "50"]
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=cli_env(), cwd=HOME)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any((keep / "requests").glob("*/explain.txt")):
        time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 128 + signal.SIGTERM
    lines = [x for x in err.splitlines() if x.startswith("ipctrace")]
    assert len(lines) == 1 and "stopped by SIGTERM" in lines[0], err
    kept = list((keep / "requests").iterdir())
    assert kept and not any((d / "INCOMPLETE").exists() for d in kept)
    # each one written whole, or raw (its events and what the watch found: explain writes it whole)
    assert all((d / "summary.json").exists() or (d / "kept.bin").exists() for d in kept)


def test_slowest_per_minute_sends_and_keeps_each_minutes_slowest(jaeger, tmp_path):
    """--slowest 3/min: of each minute (by the requests' ends) the three slowest, no more, are
    sent and kept; the slowest of them is the minute's slowest (its Parquet row's max), and a
    minute of 400 round trips or more holds 4 spun ones, so its three are spun (>= 2 ms)."""
    import pyarrow.dataset as ds

    otlp, query = jaeger
    keep = tmp_path / "kept"
    began = time.time_ns() // 1000
    r = watch("--slowest", "3/min", "--otlp", otlp, "--keep", keep)
    ended = time.time_ns() // 1000
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    line = last_line(r)
    assert "among the 3 slowest a minute" in line and "dropped" not in line, line
    traces = []
    run = json.loads(next(keep.glob("watch-*.json")).read_text())
    for _ in range(20):  # Jaeger writes what it took a moment later
        got = _get(f"{query}/api/traces?service=known_pingpong&limit=100000&lookback=1h")["data"]
        traces = [tr for tr in got if began <= _root(tr)["startTime"] <= ended]
        if len(traces) >= run["otlp"]["sent"]:
            break
        time.sleep(0.5)
    assert len(traces) == run["otlp"]["sent"] == run["tally"]["slow"], line
    by_minute: dict[int, list[int]] = {}
    kept_tags = set()
    for tr in traces:
        tags = {t["key"]: t["value"] for t in _root(tr)["tags"]}
        latency = int(tags["ipctrace.latency_ns"])
        start_ns = _root(tr)["startTime"] * 1000 - int(tags["ipctrace.clock.offset_ns"])  # CLOCK_MONOTONIC
        by_minute.setdefault((start_ns + latency) // 60_000_000_000, []).append(latency)
        if tags.get("ipctrace.kept"):
            kept_tags.add(Path(tags["ipctrace.kept"]).name)
    rows = ds.dataset(keep / "minutes", format="parquet", partitioning="hive").to_table().to_pandas()
    rows = {int(m) // 60_000_000_000: row for m, row in zip(rows["minute_start_ns"], rows.to_dict("records"))}
    assert set(by_minute) <= set(rows), (by_minute, list(rows))
    for minute, row in rows.items():
        sent = sorted(by_minute.get(minute, []), reverse=True)
        assert len(sent) == min(3, row["count"]), (minute, sent, row["count"])
        assert sent[0] == row["max_ns"]
        if row["count"] >= 400:
            assert sent[-1] >= 2_000_000, sent
    # what is kept is of what was sent (those pushed out by a slower one are gone, written or
    # not), and each one sent is kept or counted as not kept
    tally = run["tally"]
    dirs = {d.name for d in (keep / "requests").iterdir()}
    assert dirs <= kept_tags and len(dirs) == tally["kept"], (dirs, kept_tags, line)
    assert len(traces) == tally["kept"] + tally["keep_dropped"] + tally["keep_failed"], line


def test_a_shell_wrapper_s_subshells_are_no_side_of_a_kept_request(tmp_path):
    """Issue 34's pyenv shim, watched: a bash script whose $(...) subshells talk to it through
    pipes, then runs the ping-pong and waits. Every kept request's sides are the ping-pong's two
    threads, no subshell (the wake-ups of the step's round trips only, as trace --rtt takes them)."""
    shim = tmp_path / "pingpong"
    shim.write_text(
        '#!/bin/bash\nset -e\nversion=$(echo 3.11 | cut -d. -f1-2)\nroot=$(dirname "$(readlink -f "$0")")\n'
        f'[ -n "$version" ] && [ -n "$root" ]\n{PINGPONG} pipe --cpus 0,1 --iterations 600 '
        "--spin-ns 2000000 --spin-every 20\nexit $?\n"
    )
    shim.chmod(0o755)
    keep = tmp_path / "kept"
    cmd = cli_argv("watch", "--rtt", "-q", "--slower-than", "1ms", "--keep", str(keep), "--", str(shim))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=cli_env(), cwd=HOME)
    assert r.returncode == 0, r.stderr[-2000:]
    kept = sorted((keep / "requests").iterdir())
    assert kept, last_line(r)
    for one in kept:
        threads = json.loads((one / "workload.json").read_text())["threads"]
        tasks = json.loads((one / "trace.json").read_text())["tasks"]
        comm = {t["tid"]: tasks[str(t["tid"])]["comm"] for t in threads}
        assert [t["role"] for t in threads] == ["measuring", "peer"], (one.name, threads, comm)
        # a name is known where /proc still showed the thread when the step took the request
        # (a busy machine's late step after the program ended: none; the last step's come from
        # the tracer's trace.json)
        assert set(comm.values()) - {""} <= {"known_pingpong"}, (one.name, comm)
