"""The analysis benchmark (ipctrace bench-analysis; cli/bench_analysis.py parses its arguments):
synthetic traced runs of the sizes asked, each analysed by each path in a fresh process
(bench_analysis.analyse) with its memory watched, the paths planned from the sizes measured
before so that none exhausts the machine's memory, and each size's figures printed against the
targets."""

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.errors import MeasureError, UsageError
from analysis.run import bench_analysis
from analysis.store import synthetic

PEAK_TARGET_BYTES = 3 << 29  # 1.5 GiB, at every size
WALL_TARGET_S = 20.0
WALL_TARGET_UP_TO = 5_000_000  # iterations: the 20 s target is the 5 M-iteration one
LINEAR_SLACK = 1.25  # ns per event at any size at most this times the smallest size's
RATIO_TARGET = 1.0  # streaming wall / whole wall, where both ran
# A path's stage is run where its peak, estimated from the sizes measured before, fits in this
# share of MemAvailable (else the report's stages are left out, or the whole path skipped);
# above CALIBRATION iterations the estimate needs a figure at a smaller size (one is made).
MEMORY_SHARE = 0.8
# The analysis' memory is also watched while it runs, this often (s), and it is stopped above that
# share: an estimate can be low (at 50 M iterations analyse_run.finish held 18.4 GiB where the line
# through 1 M and 5 M gave 15.3).
WATCH_S = 0.25
CALIBRATION = 1_000_000
# Disk per iteration while a size is analysed: events.bin (384 B), iterations.parquet (25 B), what
# the analysis writes (events.parquet 26 B, breakdown.parquet 30 B; measured at 1 M iterations)
# and the breakdown's temporary spill file (in the system's temporary directory; at most its 38
# columns uncompressed, 304 B), rounded up.
DISK_PER_ITERATION = 800
MAX_ITERATIONS = 100_000_000

DEFAULT_ROOT = "/var/tmp"
# The analysis keeps up with the tracer (issue 35): per event, at most this share of the time the
# tracer takes to produce one, measured first on a short traced same-CPU pipe of this many round
# trips (its round trips' summed time over the events recorded: the densest stream we trace).
PRODUCTION_TARGET = 0.3
PRODUCTION_ITERATIONS = 50_000

OUTPUTS = ("events.parquet", "breakdown.parquet", "breakdown.folded")

# a target checked: (whether it holds, what it says)
Check = tuple[bool, str]
# a size measured: (iterations, events, {path: result}, {path skipped: why})
Row = tuple[int, int, dict[str, dict[str, Any]], dict[str, str]]


def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise MeasureError("bench-analysis: /proc/meminfo has no MemAvailable")


def _check_disk(root: Path | str, n: int) -> tuple[int, int]:
    need, free = n * DISK_PER_ITERATION, shutil.disk_usage(root).free
    if need > free:
        raise UsageError(
            f"bench-analysis: {n:,} iterations need about {need / 1e9:.1f} GB in {root}, "
            f"which has {free / 1e9:.1f} GB free (--dir elsewhere, or fewer --iterations)"
        )
    return need, free


def _rss_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass  # it has ended
    return 0


def _measure(d: Path, path: str, report: bool = True, limit: float | None = None) -> dict[str, Any]:
    """analyse(d, path) in a fresh process, so that its peak memory is the analysis' alone.
    limit: bytes of resident memory at which the process is stopped (its memory is watched
    every WATCH_S), so that an estimate too low cannot exhaust the machine's memory; then
    {"stopped_at": bytes, "after_s": seconds}."""
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import json, sys; from analysis.run.bench_analysis import analyse; "
            "print(json.dumps(analyse(sys.argv[1], sys.argv[2], sys.argv[3] == 'report')))",
            str(d),
            path,
            "report" if report else "no-report",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    t0 = time.perf_counter()
    with p:
        try:
            while True:
                try:
                    out, err = p.communicate(timeout=WATCH_S)
                    break
                except subprocess.TimeoutExpired:
                    rss = _rss_of(p.pid)
                    if limit is not None and rss > limit:
                        p.kill()
                        p.communicate()
                        return {"stopped_at": rss, "after_s": time.perf_counter() - t0}
        except BaseException:
            p.kill()  # Ctrl-C, SIGTERM: the analysis ends with us
            raise
    if p.returncode != 0:
        if p.returncode < 0:
            last = f"killed by signal {-p.returncode}" + (" (out of memory?)" if p.returncode == -9 else "")
        else:
            last = (err.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise MeasureError(f"bench-analysis: the {path} analysis of {d.name} failed: {last}")
    r = json.loads(out.strip().splitlines()[-1])
    for name in OUTPUTS:  # the next path writes its own
        (d / name).unlink(missing_ok=True)
    return r


def production_ns_per_event(work: Path, iterations: int) -> tuple[float | None, str | None]:
    """(ns of traced round trip per event recorded, None) of `ipctrace run pipe --same-cpu`
    traced in work; (None, why) where it could not run (no tracer built, no root)."""
    from analysis.store.results import read_summary, trace_file

    out = work / "production"
    argv = [sys.executable, "-m", "analysis", "run", "pipe", "--same-cpu", "-n", str(iterations), "-w", "2000"]
    argv += ["-r", "1", "--no-calibrate", "--quiet", "--out", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True)
    try:
        if p.returncode != 0:
            return None, (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        rtt, events = read_summary(out)["metrics"]["rtt"], sum(trace_file(out).events.values())
        return (rtt["mean"] * rtt["n"] / events, None) if events else (None, "the trace recorded no events")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _synthesise(work: Path, n: int) -> tuple[Path, int, float, int]:
    d = work / f"n{n}"
    d.mkdir()
    t = time.perf_counter()
    nev = synthetic.write_synthetic(d, n)
    size = (d / "events.bin").stat().st_size
    return d, nev, time.perf_counter() - t, size


def _stage_table(results: dict[str, dict[str, Any]]) -> None:
    """The stages of each path side by side: wall, CPU, peak."""
    paths = list(results)
    stages = [s for s in bench_analysis.STAGES if any(s in r["times"] for r in results.values())]
    cumulative = not all(r["stage_peaks"] for r in results.values())
    peak = "peak so far" if cumulative else "peak"
    print(f"  {'':<38}" + "".join(f"  {p:^28}" for p in paths))
    print(f"  {'stage':<38}" + f"  {'wall':>8} {'cpu':>8} {peak:>10}" * len(paths))

    def cells(v: Sequence[float] | None, skipped: float | None = None) -> str:
        if skipped is not None:
            return f"  {'not run: needs ~' + _gib(skipped):>28}"
        return f"  {v[0]:7.2f}s {v[1]:7.2f}s {_gib(v[2]):>10}" if v else f"  {'-':>8} {'-':>8} {'-':>10}"

    stages += [
        s for s in bench_analysis.STAGES if s not in stages and any(s in r.get("skipped", {}) for r in results.values())
    ]
    stages.sort(key=bench_analysis.STAGES.index)
    for s in stages:
        print(
            f"  {s:<38}"
            + "".join(cells(results[p]["times"].get(s), results[p].get("skipped", {}).get(s)) for p in paths)
        )
    tot = [(*bench_analysis.total(results[p]), results[p]["peak_rss_bytes"]) for p in paths]
    print(f"  {'total (without imports), peak':<38}" + "".join(cells(t) for t in tot))


def _plan(path: str, nev: int, known: Sequence[tuple[int, dict[str, Any]]]) -> tuple[dict[str, float], bool]:
    """How to measure `path` for nev events, given its figures at smaller sizes: (report stages
    to leave out or whole path to skip) as ({stage: estimated peak} over the limit, whether the
    path is skipped). A path is skipped if a stage it cannot leave out would not fit."""
    if not known:
        return {}, False
    limit = MEMORY_SHARE * mem_available()
    over = {s: e for s, e in bench_analysis.peak_estimates(known, nev).items() if e > limit}
    return over, bool(set(over) - set(bench_analysis.REPORT_STAGES))


def run(iterations: Sequence[int], paths: Sequence[str], root: Path | None = None, production: int = 0) -> int:
    """Measure the analysis paths at each number of iterations (synthetic runs in a new directory
    under root, removed at the end), print the figures and the verdicts; 0 if every size is
    within the targets, else 1. production: round trips of the traced pipe whose time per event
    produced each path's time per event is held to (0: not measured)."""
    sizes = sorted(set(iterations))
    root = root or Path(DEFAULT_ROOT)
    if not root.is_dir():
        raise UsageError(f"bench-analysis: --dir {root} is not a directory")
    need, free = _check_disk(root, max(sizes))
    work = Path(tempfile.mkdtemp(prefix="ipctrace-bench-analysis-", dir=root))
    print(
        f"bench-analysis: {', '.join(f'{n:,}' for n in sizes)} iterations; paths {', '.join(paths)}; "
        f"in {work} ({free / 1e9:.0f} GB free, at most ~{need / 1e9:.1f} GB used at once; removed at the end)"
    )
    rows = []  # per size: (n, events, {path: result}, {path skipped: why, "needs ~X GiB"})
    known: dict[str, list[Any]] = {p: [] for p in paths}  # per path: [(events, result)] measured, ascending
    prod = None
    try:
        if production:
            prod, why = production_ns_per_event(work, production)
            print(
                f"production: the traced same-CPU pipe ({production:,} round trips) makes one event every "
                f"{prod:.0f} ns; each path is held to {PRODUCTION_TARGET:g} x that"
                if prod
                else f"production: not measured ({why}); no ratio to it"
            )
        for n in sizes:
            _check_disk(root, n)
            late = [p for p in paths if n > CALIBRATION and not known[p]]
            if late:
                # Nothing smaller to estimate this size's memory from: measure a smaller one first.
                d, cev, _, _ = _synthesise(work, CALIBRATION)
                for p in late:
                    r = _measure(d, p)
                    known[p].append((cev, r))
                    print(
                        f"\n{p} path at {CALIBRATION:,} iterations, to estimate its memory at {n:,}: peak "
                        f"{_gib(r['peak_rss_bytes'])}, {(r['peak_rss_bytes'] - r['base_rss_bytes']) / cev:.0f} B "
                        f"per event above the {_gib(r['base_rss_bytes'])} after the imports"
                    )
                shutil.rmtree(d)
            d, nev, synth_s, size = _synthesise(work, n)
            print(
                f"\n{n:,} iterations / {nev:,} events: synthesised in {synth_s:.1f} s (events.bin {size / 1e9:.2f} GB)"
            )
            results, skipped = {}, {}
            for path in paths:
                over, skip = _plan(path, nev, known[path])
                if path in ("streaming", "trace"):
                    # What is measured: its analysis runs at every size, its memory watched (an
                    # estimate from smaller sizes, linear, would take a bounded peak for a
                    # growing one); only the report's stages are left out where they would not fit.
                    over = {s: e for s, e in over.items() if s in bench_analysis.REPORT_STAGES}
                    skip = False
                if over:
                    avail = mem_available()
                    print(
                        f"  {path} path: "
                        + ("skipped" if skip else "without " + " and ".join(over))
                        + ": "
                        + ", ".join(f"{s} needs ~{_gib(e)}" for s, e in over.items())
                        + f" (estimated from {known[path][-1][0]:,} events), more than {MEMORY_SHARE:.0%} "
                        f"of the {_gib(avail)} available"
                    )
                if skip:
                    skipped[path] = f"needs ~{_gib(max(over.values()))}"
                    continue
                avail = mem_available()
                r = _measure(d, path, report=not over, limit=MEMORY_SHARE * avail)
                if "stopped_at" in r:
                    skipped[path] = f"stopped at {_gib(r['stopped_at'])}"
                    print(
                        f"  {path} path stopped after {r['after_s']:.0f} s: it held {_gib(r['stopped_at'])}, more "
                        f"than {MEMORY_SHARE:.0%} of the {_gib(avail)} available"
                    )
                    continue
                results[path] = r
                r["skipped"] = over
                known[path].append((nev, r))
            shutil.rmtree(d)
            if results:
                _stage_table(results)
            _path_lines(results, nev, prod)
            rows.append((n, nev, results, skipped))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _verdicts(rows, paths, prod)


def _path_lines(results: dict[str, dict[str, Any]], nev: int, prod: float | None = None) -> None:
    for p, r in results.items():
        wall, _ = bench_analysis.total(r)
        ns = wall * 1e9 / nev
        against = f"; {ns / prod:.2f} x the production's {prod:.0f} ns per event" if prod else ""
        print(f"  {p}: {ns:.0f} ns per event; closure residual {r['closure_residual_pct']:.2f} %{against}")
    if "trace" in results and "streaming" in results:
        s, t = results["streaming"], results["trace"]
        print(
            f"  trace / streaming: wall {bench_analysis.total(t)[0] / bench_analysis.total(s)[0]:.2f}, peak "
            f"{t['peak_rss_bytes'] / s['peak_rss_bytes']:.2f}"
        )
    if "whole" in results and "streaming" in results:
        w, s = results["whole"], results["streaming"]
        (ww, wc), (sw, sc) = bench_analysis.total(w), bench_analysis.total(s)
        same = "the same" if w["breakdown_digest"] == s["breakdown_digest"] else "DIFFERENT"
        print(
            f"  streaming / whole: wall {sw / ww:.2f}, CPU {sc / wc:.2f}, peak "
            f"{s['peak_rss_bytes'] / w['peak_rss_bytes']:.2f}; breakdown statistics {same}"
        )


def _production_checks(res: dict[str, dict[str, Any]], nev: int, prod: float | None) -> list[Check]:
    """Each path's time per event against the production's: [(holds, text)]."""
    if not prod:
        return []
    out: list[Check] = []
    for p in ("streaming", "trace"):
        if p in res:
            r = bench_analysis.total(res[p])[0] * 1e9 / nev / prod
            out.append((r <= PRODUCTION_TARGET, f"{p} {r:.2f} x the production (target <= {PRODUCTION_TARGET:g} x)"))
    return out


def _verdicts(rows: Sequence[Row], paths: Sequence[str], prod: float | None = None) -> int:
    print(
        f"\n{'iterations':>11} {'events':>12}  {'streaming wall':>14} {'cpu':>7} {'peak':>9} {'ns/event':>8}"
        f"  {'whole wall':>10} {'peak':>26}  {'ratio':>5}"
    )
    base_ns = None
    for n, nev, res, skipped in rows:
        s, w = res.get("streaming"), res.get("whole")
        cells = f"{n:>11,} {nev:>12,}  "
        if s:
            wall, cpu = bench_analysis.total(s)
            cells += f"{wall:13.1f}s {cpu:6.1f}s {_gib(s['peak_rss_bytes']):>9} {wall * 1e9 / nev:8.0f}"
        else:
            cells += f"{'-':>14} {'-':>7} {'-':>9} {'-':>8}"
        if w:
            cells += f"  {bench_analysis.total(w)[0]:9.1f}s {_gib(w['peak_rss_bytes']):>26}"
        elif "whole" in skipped:
            cells += f"  {'skipped':>10} {'(' + skipped['whole'] + ')':>26}"
        else:
            cells += f"  {'-':>10} {'-':>26}"
        cells += f"  {bench_analysis.total(s)[0] / bench_analysis.total(w)[0]:5.2f}" if s and w else f"  {'-':>5}"
        print(cells)
    ok = True
    for n, nev, res, skipped in rows:
        s, w = res.get("streaming"), res.get("whole")
        if s is None:
            checks = [(False, f"the streaming path {skipped['streaming']}")] if "streaming" in skipped else []
            checks += _trace_checks(res, skipped) + _production_checks(res, nev, prod)
            if checks:
                ok &= _verdict(n, nev, checks)
            else:
                print(f"{n:,} iterations: no streaming figure to hold to the targets")
            continue
        wall, _ = bench_analysis.total(s)
        ns = wall * 1e9 / nev
        checks = []  # (holds, text)
        peak = s["peak_rss_bytes"]
        over = [k for k, v in s["times"].items() if v[2] > PEAK_TARGET_BYTES]
        where = f" in {', '.join(over)}" if over and s["stage_peaks"] else ""
        checks.append((peak <= PEAK_TARGET_BYTES, f"peak {_gib(peak)}{where} (target <= {_gib(PEAK_TARGET_BYTES)})"))
        for stage, est in (s.get("skipped") or {}).items():
            checks.append((est <= PEAK_TARGET_BYTES, f"{stage} not run: it needs ~{_gib(est)} (estimated)"))
        if n <= WALL_TARGET_UP_TO:
            checks.append((wall <= WALL_TARGET_S, f"wall {wall:.1f} s (target <= {WALL_TARGET_S:g} s)"))
        if w:
            r = wall / bench_analysis.total(w)[0]
            checks.append((r <= RATIO_TARGET, f"streaming/whole wall {r:.2f} (target <= {RATIO_TARGET:g})"))
        if base_ns is None:
            base_ns, base_n = ns, n
        else:
            checks.append(
                (
                    ns <= LINEAR_SLACK * base_ns,
                    f"{ns:.0f} ns per event, {ns / base_ns:.2f} x {base_n:,} iterations' (target <= {LINEAR_SLACK:g} x)",
                )
            )
        ok &= _verdict(n, nev, checks + _trace_checks(res, skipped) + _production_checks(res, nev, prod))
    return 0 if ok else 1


def _trace_checks(res: dict[str, dict[str, Any]], skipped: dict[str, str]) -> list[Check]:
    """The trace path held to the same peak: [(holds, text)]."""
    t = res.get("trace")
    if t:
        peak = t["peak_rss_bytes"]
        text = f"with the whole-trace view (trace) peak {_gib(peak)}, wall {bench_analysis.total(t)[0]:.1f} s"
        return [(peak <= PEAK_TARGET_BYTES, text)]
    return [(False, f"the trace path {skipped['trace']}")] if "trace" in skipped else []


def _verdict(n: int, nev: int, checks: Sequence[Check]) -> bool:
    """Print one size's verdict on its checks [(holds, text)]; whether all hold."""
    held = all(c for c, _ in checks)
    print(
        f"{n:,} iterations / {nev:,} events: {'within target' if held else 'OVER TARGET'}: "
        + "; ".join(t if c else "OVER: " + t for c, t in checks)
    )
    return held
