"""Host side of `make vmtest`: finish what each guest brought back the way
`ipctrace run` finishes a run, judge it, and print per kernel the attach mode of
every probe and the breakdown of `pipe`.

    .venv/bin/python tools/vmtest/report.py KERNEL_DIR...

KERNEL_DIR/results is the guest's /out (tools/vmtest/init): doctor.out (the
loader's feature report), auto/ and kprobe/ (traced pipe runs with the attach
modes the loader chose and with the kprobe fallback forced), NAME.rc and .err
per step, leftover_{progs,kprobes,ipc}.out (what the runs left behind),
release (the guest's kernel). Exit 0 when every check holds on every kernel.

The arm64 guests (tools/vmtest/run --arch arm64; params.json says which) also bring futex/ and
socketpair/ (ipcbench runs as the loader chooses) and rtt_{pipe,unix,tcp}/ (known_pingpong
traced as `ipctrace trace --rtt` traces it, its server spinning before every other answer):
their traces are finished here as `ipctrace trace` would and held to validate's rule for the
program (closure <= 1 %, the spin recovered as `user` within 10 %), the spin being what the server
timed by its own clock (rtt_CHANNEL.spun, known_pingpong --spun), not the nominal one, over the
spun round trips whose spin the host did not stretch (see CALM_SHARE). arm64 6.1 has no ftrace
direct calls (arm64 gained them in 6.4): fentry is refused there and the runs as chosen must
use kprobes instead. The short arm64 check (run --short; params.json's short) brings the doctor
and rtt_pipe only: that trace is also held to what the runs as chosen are (attach modes, probes
fired, copy measured, nothing lost).
"""

import dataclasses
import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from analysis.errors import IpctraceError
from analysis.model.breakdown import COMPONENTS
from analysis.run import analyse_run, runner, trace
from analysis.run import validate as cmd_validate
from analysis.run.options import RunOptions
from analysis.store import syscalls
from analysis.store.records import COPY_FUNC_IDS, FUNCS
from analysis.store.results import read_breakdown, read_json, write_json

# Guest step -> the case of `ipctrace validate` it runs (a cost into every other message;
# tools/vmtest/init), and how many null syscalls it injects. The costs are larger than
# validate's: under TCG a round trip takes ~300 us and varies by tens of microseconds. Each
# group is judged on its faster half: QEMU's host thread is now and then off its CPU for up
# to ~0.5 ms, which the guest cannot see (no steal clock under TCG) and which lands in
# whatever state a thread was in, in one gap of 150 between two traced calls here.
# Only the spin is judged here: the syscalls' verdict is printed, not judged, since under TCG
# the user time of each emulated call loop varies from run to run by ~10 % of the injected cost
# (6.1: syscall+entry +97.3 of +113.8 us in one run, +104.4 of +108.6 in another).
JUDGED = {"validate_peer_spin"}
VALIDATE = {
    "validate_peer_spin": (
        cmd_validate.Case("peer-spin", "the peer spins 1 ms before replying", "same", [], ("user",), 1_000_000),
        0,
    ),
    "validate_peer_syscalls": (
        cmd_validate.Case("peer-syscalls", "the peer makes 50 null syscalls", "same", [], ("syscall", "entry")),
        50,
    ),
}
# Run (as the guest named it) -> the attach mode its function probes must use (the runs as
# chosen: kprobe where the doctor found no fentry, which only arm64 6.1 may lack).
RUNS = {"auto": "fentry", "kprobe": "kprobe"}
# The arm64 guest's other ipcbench runs (as the loader chooses) and known_pingpong channels.
MORE_RUNS = ("futex", "socketpair")
RTT_CHANNELS = ("pipe", "unix", "tcp")
RUN_TITLES = {"auto": "as chosen", "kprobe": "kprobe forced"}
# The functions a pipe round trip passes through: each must attach and fire.
PIPE_FUNCS = ("pipe_write", "pipe_read")
FUNC_PROBES = frozenset(FUNCS)
# The tracepoints (probe: trace.json's event) every round trip passes through: each one attached
# must record. arm64 6.12 under TCG, once in seven short checks: sched_waking attached by tp_btf and
# recorded nothing while sched_wakeup recorded 436, and the wake-ups' time went to `blocked`.
ROUND_TRIP_EVENTS = {
    "sys_enter": "sys_enter",
    "sys_exit": "sys_exit",
    "sched_switch": "switch",
    "sched_waking": "waking",
    "sched_wakeup": "wakeup",
}
# A notrace function (the copy routines: lib/ is built without ftrace) is probed
# with kprobes around its calls, whatever the other function probes use.
AROUND_CALLS = "kprobe around"


def read_text(path):
    try:
        return Path(path).read_text()
    except OSError:
        return None


def step_ok(res, name, problems):
    """True when the guest step ran and exited 0; else a problem naming its error."""
    rc = (read_text(res / f"{name}.rc") or "").strip()
    if rc == "0":
        return True
    err = (read_text(res / f"{name}.err") or "").strip().splitlines()
    why = err[-1] if err else "no output"
    problems.append(f"{name}: exit {rc or 'unknown'}: {why}")
    return False


def guest_host(summary, release):
    """The run happened in the guest, not on this host: its kernel and machine (trace.json's)."""
    summary["host"] = {
        "kernel": release,
        "machine": (summary.get("host") or {}).get("machine") or "x86_64",
        "cpu_model": "QEMU TCG (emulated)",
        "cores": 2,
        "online_cpus": "0-1",
    }


def finish_run(rundir, release, iterations, problems, workload="pipe"):
    """The run's summary.json, made here as `ipctrace run` makes it, or None."""
    try:
        opts = RunOptions(iterations=iterations["iterations"], warmup=iterations["warmup"], runs=1)
        runner._finish(rundir, runner.workload_info(workload), opts, True, "complete", "", quiet=True)
        summary = read_json(rundir / "summary.json")
    except IpctraceError as e:
        problems.append(f"{rundir.name}: cannot analyse the guest's results: {e}")
        return None
    guest_host(summary, release)
    write_json(rundir / "summary.json", summary)
    return summary


def finish_rtt(rundir, channel, release, problems):
    """known_pingpong's trace finished as `ipctrace trace --rtt` finishes it: its summary or None."""
    target = trace.Target(
        command=["known_pingpong", channel],
        pids=[],
        comms=[],
        duration_s=0,
        iterations_from="rtt",
        marker_binaries=[],
        functions=[],
    )
    try:
        tj = analyse_run.read_trace_json(rundir)
        trace.analyse(rundir, target, tj, "complete", 0, lambda *a, **k: None)
        summary = read_json(rundir / "summary.json")
    except IpctraceError as e:
        problems.append(f"{rundir.name}: cannot analyse the guest's trace: {e}")
        return None
    guest_host(summary, release)
    write_json(rundir / "summary.json", summary)
    return summary


def func_counts(rundir):
    """{func name: (entries, exits)} from the run's events.parquet."""
    import pandas as pd

    ev = pd.read_parquet(rundir / "events.parquet", columns=["type", "aux"])
    out = {}
    for kind in ("func_entry", "func_exit"):
        aux = ev.loc[ev["type"] == kind, "aux"].to_numpy(np.int64)
        ids, n = np.unique(aux, return_counts=True)
        for i, c in zip(ids, n):
            name = FUNCS[i - 1] if 1 <= i <= len(FUNCS) else f"func {i}"
            e, x = out.get(name, (0, 0))
            out[name] = (e + c, x) if kind == "func_entry" else (e, x + c)
    return out


def check_run(run, summary, counts, problems, want):
    """The function probes used the run's mode (want) and the pipe functions fired."""
    attach = summary["trace"]["attach"]
    for probe, mode in attach.items():
        if probe in FUNC_PROBES and not mode.startswith(("absent", want, AROUND_CALLS)):
            problems.append(f"{run}: {probe} attached as '{mode}', expected {want}")
    for probe in PIPE_FUNCS:
        mode = attach.get(probe, "missing")
        if not mode.startswith(want):
            problems.append(f"{run}: {probe} is '{mode}', expected {want}")
        entries, exits = counts.get(probe, (0, 0))
        if not entries or not exits:
            problems.append(f"{run}: {probe} attached but recorded {entries} entries and {exits} exits")
    drops = summary["trace"]["drops"]["total"]
    if drops:
        problems.append(f"{run}: the tracer lost {drops} events")
    if summary.get("status") != "complete":
        problems.append(f"{run}: status {summary.get('status')}")
    measured, note = copy_note(summary, counts)
    if not measured:
        problems.append(f"{run}: {note}")


def silent_tracepoints(run, rundir, attach, problems):
    """A problem for each tracepoint of ROUND_TRIP_EVENTS that attached but recorded nothing."""
    events = read_json(rundir / "trace.json").get("events") or {}
    for probe, event in ROUND_TRIP_EVENTS.items():
        mode = attach.get(probe, "absent")
        if not mode.startswith("absent") and not events.get(event):
            problems.append(f"{run}: {probe} attached ({mode}) but recorded no event")


def copy_note(summary, counts):
    """(measured?, one line on where the copy component came from)."""
    attach = summary["trace"]["attach"]
    copy_probes = [FUNCS[i - 1] for i in COPY_FUNC_IDS]
    attached = [p for p in copy_probes if not attach.get(p, "absent").startswith("absent")]
    fired = sum(counts.get(p, (0, 0))[0] for p in copy_probes)
    bd = summary.get("breakdown", {}).get(summary.get("primary_metric"), {})
    source = bd.get("copy_source", "no breakdown")
    if source == "measured":
        return True, f"copy measured: {len(attached)} copy probes attached, {fired} copy calls recorded"
    return False, f"copy {source.split(':')[0]}, not measured: no copy probe attached"


def fmt_ns(v):
    return "-" if v is None else f"{v:,.0f}"


def print_kernel(kdir, doctor, summaries, counts, notes):
    release = (read_text(kdir / "results" / "release") or "?").strip()
    print(f"\n=== Linux {release} ({kdir.name}) ===")
    feats = {k: v for k, v in doctor.get("features", {}).items() if isinstance(v, dict)}
    print("features: " + ", ".join(f"{k} {'yes' if v.get('ok') else 'no'}" for k, v in feats.items()))
    for k in ("fentry", "kprobe"):
        if k in feats:
            print(f"  {k}: {feats[k].get('detail', '')}")
    runs = [r for r in RUNS if r in summaries]
    if not runs:
        return
    print_attach({r: summaries[r] for r in runs}, counts, RUN_TITLES)
    for r in runs:
        s = summaries[r]
        metric = s.get("primary_metric")
        bd = s.get("breakdown", {}).get(metric)
        lat = s["metrics"][metric]
        print(
            f"pipe {metric}, {RUN_TITLES[r]}: n={lat['n']}, median {fmt_ns(lat.get('median'))} ns, "
            f"drops {s['trace']['drops']['total']}; {notes[r][1]}"
        )
        if not bd:
            print("  no breakdown")
            continue
        comp = bd["components"]
        print("  ns         " + "".join(f"{c:>12}" for c in COMPONENTS))
        for stat in ("median", "mean"):
            print(f"  {stat:<9}  " + "".join(f"{fmt_ns(comp[c].get(stat)):>12}" for c in COMPONENTS))
        if isinstance(bd.get("closure_residual_pct"), (int, float)):
            print(f"  closure residual {bd['closure_residual_pct']:.1f} % of the latency")


def print_attach(summaries, counts, titles):
    """The attach mode of every probe in the runs {run: summary} (titled), with the calls each
    function probe recorded ({run: func_counts})."""
    runs = list(summaries)
    attach = {r: summaries[r]["trace"]["attach"] for r in runs}
    probes = list(dict.fromkeys(p for r in runs for p in attach[r]))
    tps = [p for p in probes if p not in FUNC_PROBES]
    print(f"tracepoints ({len(tps)}, {' and '.join(titles[r] for r in runs)}): {tracepoint_modes(attach, tps)}")
    print(f"  {'function probe':<20}  " + "  ".join(f"{titles[r]:<46}" for r in runs))
    absent = []
    for p in (p for p in probes if p in FUNC_PROBES):
        modes = [attach[r].get(p, "missing") for r in runs]
        calls = [counts[r].get(p, (0, 0)) for r in runs]
        for r, mode in zip(runs, modes):
            if mode.startswith("absent"):
                absent.append(f"{p} ({titles[r]}): {mode[len('absent: ') :]}")
        cells = ["absent" if m.startswith("absent") else f"{m}: {e}/{x} calls" for m, (e, x) in zip(modes, calls)]
        if len(set(modes)) == 1 and not modes[0].startswith(("fentry", "kprobe/")):
            # the same in every run (around calls, or absent): one line
            line = (
                modes[0]
                if modes[0].startswith("absent")
                else f"{modes[0]}: " + ", ".join(f"{e}/{x} calls" for e, x in calls)
            )
            print(f"  {p:<20}  {line if not line.startswith('absent') else 'absent'}")
        else:
            print(f"  {p:<20}  " + "  ".join(f"{c:<46}" for c in cells).rstrip())
    for line in absent:
        print(f"  absent: {line}")


def tracepoint_modes(attach, tps):
    """The tracepoints' attach modes in {run: {probe: mode}}, each with how many probes took it;
    those the kernel does not have (x86's irq vectors on arm64) by name, an _entry/_exit pair as one."""
    taken = Counter()
    lacking = []
    for p in tps:
        for mode in sorted({modes.get(p, "missing") for modes in attach.values()}):
            if re.fullmatch(r"absent: no tracepoint \S+ in this kernel", mode):
                lacking.append(p)
            else:
                taken[mode] += 1
    names = []
    for p in lacking:
        base = re.sub(r"_(entry|exit)$", "", p)
        name = f"{base}_entry/exit" if base != p and {f"{base}_entry", f"{base}_exit"} <= set(lacking) else p
        if name not in names:
            names.append(name)
    parts = [f"{mode} {n}" for mode, n in taken.items()]
    if lacking:
        parts.append(f"{len(lacking)} not in this kernel ({', '.join(names)})")
    return ", ".join(parts)


def validate(res, release, iterations, problems, arch="amd64"):
    """The verdicts of the guest's validation runs (cmd_validate's rules); failures are problems.
    The arm64 guest runs the judged one only."""
    verdicts = []
    for step, (case, calls) in VALIDATE.items():
        if arch == "arm64" and step not in JUDGED:
            continue
        if not step_ok(res, step, problems) or not finish_run(res / step, release, iterations, problems):
            continue
        if case.name == "peer-spin" and clock_is_a_syscall(res / step):
            # The spin reads the clock; where the guest's clocksource has no vDSO (6.1 under
            # TCG) each read is a clock_gettime() system call: the spin is the peer's own
            # work on its CPU, in user space and in those calls.
            case = dataclasses.replace(
                case, expected=("user", "entry", "syscall"), what=case.what + " (clock_gettime is a system call here)"
            )
        cost = cmd_validate.syscall_cost(res / step)
        if arch == "arm64":
            # by medians and against the spin itself, as the known_pingpong traces (see
            # CALM_SHARE): 6.1, loaded host, the faster halves' means moved user +966 us and
            # irq +166 us for the 1 ms spun, the medians user +1 005 us; and the median latency
            # moved by +1 048 us in one run, +1 393 us in the next (how TCG's vCPU threads wake)
            v = spin_verdict(case, *group_medians(res / step))
        elif case.injected_ns is not None:
            # against the spin, as on arm64, and each other component within the tolerance: the
            # latency also takes what QEMU's host thread stalls, unseen by the guest (6.12, CI:
            # latency +1 076 us, user +968 us for the 1 ms spun; the runs before, +1 021/+995)
            base, injected = cmd_validate.trimmed_means(res / step, every=2, group_percentile=50)
            v = spin_verdict(case, base, injected, others=True)
        else:
            base, injected = cmd_validate.trimmed_means(res / step, every=2, group_percentile=50)
            v = cmd_validate.verdict(case, [base], [injected], calls * cost if calls and cost is not None else None)
        verdicts.append(v)
        if not v.holds and step in JUDGED:
            problems.append(f"validate {case.name}: {v.why}")
    return verdicts


def spin_verdict(case, base, injected, others=False):
    """validate's Verdict of a spin case (case.injected_ns spun) from its baseline and injected
    (latency, {component}) figures, judged against the spin: the expected components must move
    by it within validate's share of it (others: and no other component by more). The latency
    is shown."""
    (lat0, c0), (lat1, c1) = base, injected
    deltas = {c: c1[c] - c0[c] for c in COMPONENTS}
    carried = sum(deltas[c] for c in case.expected)
    spin = float(case.injected_ns)
    tol = cmd_validate.TOLERANCE_SHARE * spin
    problems = []
    if abs(carried - spin) > tol:
        problems.append(f"{'+'.join(case.expected)} moved {carried:+.0f} ns against the {spin:.0f} ns spun")
    moved = {c: d for c, d in deltas.items() if c not in case.expected and abs(d) > tol}
    if others and moved:
        worst = max(moved, key=lambda c: abs(moved[c]))
        problems.append(f"{worst} moved {moved[worst]:+.0f} ns")
    why = "; ".join(problems) or f"within {tol:.0f} ns of the {spin:.0f} ns spun"
    return cmd_validate.Verdict(
        case.name, case.what, spin, lat1 - lat0, deltas, "+".join(case.expected), tol, not problems, why
    )


def clock_is_a_syscall(rundir):
    """Whether the run's threads entered clock_gettime() (x86_64 nr 228, arm64 113) in the kernel."""
    import pandas as pd

    machine = (read_json(rundir / "summary.json").get("host") or {}).get("machine") or "x86_64"
    nr = list(syscalls.numbers(machine, ("clock_gettime",)))
    ev = pd.read_parquet(rundir / "events.parquet", columns=["type", "aux"])
    return bool(((ev["type"] == "sys_enter") & ev["aux"].isin(nr)).any())


def print_verdicts(verdicts):
    for v in verdicts:
        carried = sum(v.component_deltas_ns[c] for c in v.expected_component.split("+"))
        judged = "" if v.name == "peer-spin" else " (printed, not judged under TCG)"
        print(
            f"validate {v.name}{judged}: latency {v.latency_delta_ns:+,.0f} ns, {v.expected_component} "
            f"{carried:+,.0f} ns (tolerance {v.tolerance_ns:,.0f}): {'holds' if v.holds else 'falls short: ' + v.why}"
        )


def judge(kdir, iterations, arch="amd64", spin_ns=200_000, short=False):
    """Check one kernel's results; print what it showed; return its problems. short: the short
    arm64 check's (the doctor and rtt_pipe only)."""
    res = kdir / "results"
    release = (read_text(res / "release") or "?").strip()
    problems = []
    doctor = {}
    runs = dict(RUNS)
    if step_ok(res, "doctor", problems):
        try:
            doctor = json.loads(read_text(res / "doctor.out"))
        except (TypeError, ValueError):
            problems.append("doctor: printed no JSON")
        needed = ("btf", "fentry", "kprobe")
        if arch == "arm64" and not doctor.get("features", {}).get("fentry", {}).get("ok"):
            # no ftrace direct calls before 6.4 on arm64: the runs as chosen fall back to kprobes
            needed = ("btf", "kprobe")
            runs["auto"] = "kprobe"
        for k in needed:
            if not doctor.get("features", {}).get(k, {}).get("ok"):
                problems.append(
                    f"doctor: {k} not available on {release}: "
                    f"{doctor.get('features', {}).get(k, {}).get('detail', 'not reported')}"
                )
    summaries, counts, notes = {}, {}, {}
    for run in () if short else RUNS:
        if not step_ok(res, run, problems):
            continue
        s = finish_run(res / run, release, iterations, problems)
        if not s:
            continue
        summaries[run] = s
        counts[run] = func_counts(res / run)
        check_run(run, s, counts[run], problems, runs[run])
        silent_tracepoints(run, res / run, s["trace"]["attach"], problems)
        notes[run] = copy_note(s, counts[run])
    progs = (read_text(res / "leftover_progs.out") or "").strip()
    if progs:
        problems.append(f"BPF programs left loaded after the runs: {progs.splitlines()[0]} ...")
    kprobes = (read_text(res / "leftover_kprobes.out") or "").strip()
    if kprobes:
        problems.append(f"kprobe events left behind: {kprobes.splitlines()[0]} ...")
    ipc = [
        line
        for line in (read_text(res / "leftover_ipc.out") or "").splitlines()
        if line.strip() and not line.endswith(":")
    ]
    if ipc:
        problems.append(f"IPC objects left behind: {', '.join(ipc)}")
    verdicts = [] if short else validate(res, release, iterations, problems, arch)
    print_kernel(kdir, doctor, summaries, counts, notes)
    print_verdicts(verdicts)
    if short:
        more(res, release, iterations, spin_ns, problems, workloads=(), channels=("pipe",), attach_want=runs["auto"])
    elif arch == "arm64":
        more(res, release, iterations, spin_ns, problems)
    return problems


def print_breakdown(bd):
    comp = bd["components"]
    print("  ns         " + "".join(f"{c:>12}" for c in COMPONENTS))
    for stat in ("median", "mean"):
        print(f"  {stat:<9}  " + "".join(f"{fmt_ns(comp[c].get(stat)):>12}" for c in COMPONENTS))


def more(res, release, iterations, spin_ns, problems, workloads=MORE_RUNS, channels=RTT_CHANNELS, attach_want=None):
    """The arm64 guest's futex and socketpair runs and known_pingpong's --rtt traces: printed,
    and judged (complete, nothing lost; the program's closure and spin as validate holds them).
    attach_want (the short check, where no other run shows the function probes; pipe only): each
    trace's attach modes printed and held to check_run's rule for the runs as chosen, that mode."""
    for wl in workloads:
        if not step_ok(res, wl, problems):
            continue
        s = finish_run(res / wl, release, iterations, problems, workload=wl)
        if not s:
            continue
        metric = s.get("primary_metric")
        bd = s.get("breakdown", {}).get(metric)
        lat = s["metrics"][metric]
        drops = s["trace"]["drops"]["total"]
        closure = bd.get("closure_residual_pct") if bd else None
        print(
            f"{wl} {metric}, as chosen: n={lat['n']}, median {fmt_ns(lat.get('median'))} ns, drops {drops}"
            + (f", closure residual {closure:.2f} %" if isinstance(closure, (int, float)) else "")
        )
        if bd:
            print_breakdown(bd)
        silent_tracepoints(wl, res / wl, s["trace"]["attach"], problems)
        if drops:
            problems.append(f"{wl}: the tracer lost {drops} events")
        if s.get("status") != "complete":
            problems.append(f"{wl}: status {s.get('status')}")
    n = iterations["iterations"]
    for ch in channels:
        step = f"rtt_{ch}"
        if not step_ok(res, step, problems):
            continue
        s = finish_rtt(res / step, ch, release, problems)
        if not s:
            continue
        silent_tracepoints(step, res / step, s["trace"]["attach"], problems)
        if attach_want:
            counts = func_counts(res / step)
            print_attach({step: s}, {step: counts}, {step: f"known_pingpong {ch} --rtt"})
            check_run(step, s, counts, problems, attach_want)
            print(f"  {copy_note(s, counts)[1]}")
        found = cmd_validate.round_trips_found(res / step)
        closure = cmd_validate.closure_pct(res / step)
        trip_problems = [] if found == n else [f"the trace found {found} of {n} round trips"]
        base, spun, known, calm = [], [], None, ""
        if not trip_problems:
            spins = spun_times(res / f"{step}.spun", trip_problems)
            if spins:
                known, b, i, calm = calm_medians(res / step, spins, spin_ns, trip_problems)
                base, spun = ([b], [i]) if known else ([], [])
        case = cmd_validate.ProgramCase(ch, "cross", "rtt", spin_ns=round(known or spin_ns))
        if clock_is_a_syscall(res / step):
            # as the guest's peer-spin validation: without a vDSO clock each read in the spin
            # is a clock_gettime() system call
            case = dataclasses.replace(case, expected=("user", "entry", "syscall"))
        v = cmd_validate.program_verdict(case, base, spun, [closure], trip_problems)
        bd = s.get("breakdown", {}).get("rtt") or {}
        wake = (bd.get("components") or {}).get("wakeup") or {}
        carried = sum(v.component_deltas_ns[c] for c in case.expected)
        print(
            f"known_pingpong {ch} --rtt across CPUs 0,1: {found} round trips, closure "
            f"{'-' if closure is None else f'{closure:.2f} %'}, {'+'.join(case.expected)} {carried:+,.0f} ns at the "
            f"median for {case.spin_ns:,} ns spun by the server's clock ({spin_ns:,} asked; {calm}; recovered "
            f"{100 * carried / case.spin_ns:.1f} %), "
            f"wakeup (IPI, idle exit) median {fmt_ns(wake.get('median'))} ns: "
            f"{'holds' if v.holds else 'falls short: ' + v.why}"
        )
        if bd:
            print_breakdown(bd)
        if s["trace"]["drops"]["total"] and not attach_want:  # (else check_run said so)
            problems.append(f"{step}: the tracer lost {s['trace']['drops']['total']} events")
        if not v.holds:
            problems.append(f"known_pingpong {ch}: {v.why}")


def spun_times(path, problems):
    """{message: ns} of the spins a known_pingpong server timed (--spun: "MESSAGE NS" lines), or
    {} with a problem."""
    spins = {}
    for line in (read_text(path) or "").splitlines():
        m, ns = line.split()
        spins[int(m)] = int(ns)
    if not spins:
        problems.append(f"{path.name}: no spin the server timed (known_pingpong --spun)")
    return spins


# Under TCG the guest's clock runs on while QEMU's thread is off the host's CPU, and no steal
# clock tells the guest: a spin that time lands in takes longer than asked, the extra anywhere
# (user, the pending timer's irq; 6.1: 7-12 % of the spins, up to milliseconds). The spun round
# trips judged are those whose spin, as the server timed it, ran as asked (within CALM_SHARE),
# as validate leaves out the iterations with steal on their path; and by medians, as
# trace-truth judges: the means of the faster halves moved by tens of us with the host's load.
CALM_SHARE = 0.05


def medians(b, sel):
    """The median (latency, {component: ns}) of the breakdown rows b[sel]."""
    return float(np.median(b["latency_ns"].to_numpy()[sel])), {
        c: float(np.median(b[c].to_numpy()[sel])) for c in COMPONENTS
    }


def group_medians(rundir):
    """medians() of a run's baseline (even messages) and injected iterations (odd: --inject-every 2)."""
    b = read_breakdown(rundir, columns=["iteration", "latency_ns", *COMPONENTS])
    warmup = int(read_json(rundir / "summary.json").get("params", {}).get("warmup") or 0)
    injected = (warmup + b["iteration"].to_numpy(np.int64)) % 2 == 1
    return medians(b, ~injected), medians(b, injected)


def calm_medians(rundir, spins, asked, problems):
    """(known answer, baseline figures, spun figures, what was judged) of a known_pingpong trace
    whose server spun before every other answer: the median spin of the spun round trips whose
    spin ran as asked, and the median (latency, {component}) of those and of the baseline; the
    known answer None with a problem where no spun round trip ran as asked."""
    b = read_breakdown(rundir, columns=["iteration", "latency_ns", *COMPONENTS])
    message = b["iteration"].to_numpy(np.int64)
    spin = np.array([spins.get(int(m), -1) for m in message], np.float64)
    spun = message % 2 == 1
    calm = spun & (spin >= 0) & (spin <= (1 + CALM_SHARE) * asked)
    if not calm.any():
        problems.append(f"none of the {int(spun.sum())} spins ran within {CALM_SHARE:.0%} of the {asked} ns asked")
        return None, None, None, ""

    what = f"{int(calm.sum())} of {int(spun.sum())} spins within {CALM_SHARE:.0%} of it"
    return float(np.median(spin[calm])), medians(b, ~spun), medians(b, calm), what


def main(argv):
    if len(argv) < 2:
        print("usage: report.py KERNEL_DIR...", file=sys.stderr)
        return 2
    params = json.loads(read_text(Path(argv[1]).parent / "params.json") or "{}")
    iterations = {"iterations": params.get("iterations", 2000), "warmup": params.get("warmup", 200)}
    arch = params.get("arch", "amd64")
    failed = 0
    for d in argv[1:]:
        kdir = Path(d)
        problems = judge(kdir, iterations, arch, params.get("spin_ns", 200_000), bool(params.get("short")))
        for p in problems:
            print(f"vmtest: {kdir.name}: FAIL: {p}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
