"""`ipctrace lab NAME`: a guided experiment of an OS course. Each lab is a small plan of runs
(run_workload, the same as `ipctrace run`), the figures it reads from their summaries and
explained iterations (model/lab.py), the claims computed from those figures, and a handout
(render/lab.py). The runs go into DIR/KEY, one results directory each, so that `ipctrace
compare`, `explain` and `report` work on them afterwards as on any run.

Counts: --quick is sized to finish in under a minute a lab on a 2-vCPU VM, the default in
under three (README, "For a course", has the times measured)."""

from __future__ import annotations

import dataclasses
import difflib
import fcntl
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.errors import UsageError
from analysis.model import explain as explain_mod
from analysis.model import heatmaps, sizefit
from analysis.model import lab as model
from analysis.render import lab as render
from analysis.render import plots
from analysis.render.htmlparts import Picture
from analysis.run import report, runner, sweep
from analysis.run.options import RunOptions, online_cpus
from analysis.run.validate import Hog
from analysis.store import safeio
from analysis.store.results import read_iterations, run_summary_file
from analysis.store.rundir import explain_inputs
from analysis.store.summaryfile import RunSummary

QUICK = {"iterations": 2000, "warmup": 200, "runs": 1}
DEFAULT = {"iterations": 10000, "warmup": 1000, "runs": 3}


@dataclass(frozen=True)
class Measure:
    """One run of a lab: the workload, its options beyond the counts, whether it is traced,
    a CPU hog of the given nice value on the peer's CPU, which iteration to explain, and how
    many iterations relative to the lab's count (at least 50)."""

    key: str
    label: str
    workload: str
    options: dict[str, Any] = field(default_factory=dict)
    trace: bool = True
    hog_nice: int | None = None
    explain: str | None = "median"
    scale: float = 1.0


@dataclass
class Done:
    """A measured run: where it is, its summary, its explained iteration, the hog's tid."""

    measure: Measure
    resdir: Path
    shown: Path
    summary: RunSummary
    explanation: Any = None
    hog_tid: int | None = None

    def figures(self) -> model.RunFigures:
        return model.run_figures(self.measure.label, self.summary, self.explanation)


@dataclass(frozen=True)
class Lab:
    name: str
    title: str
    question: str
    plan: Callable[[bool], list[Measure]]
    figures: Callable[[dict[str, Done]], Any]
    claims: Callable[[Any], list[model.Claim]]
    exercises: tuple[str, ...]
    evidence: str  # the key of the run whose explained iteration the handout shows


def _cpus() -> tuple[int, int]:
    """The measuring side's CPU and the peer's: the first and the last online CPU."""
    cpus = sorted(online_cpus())
    if len(cpus) < 2:
        raise UsageError("the labs compare one CPU with two: this machine has one online CPU")
    return cpus[0], cpus[-1]


def _pin(a: int, b: int | None = None) -> dict[str, Any]:
    return {"placement": "cpus", "cpus": (a,) if b is None else (a, b)}


# --- the labs' plans and figures ---------------------------------------------------------


def _same_cross_plan(quick: bool) -> list[Measure]:
    a, b = _cpus()
    return [
        Measure("same", "pipe, one CPU", "pipe", _pin(b, b)),
        Measure("cross", "pipe, two CPUs", "pipe", _pin(a, b)),
    ]


def _same_cross_figures(d: dict[str, Done]) -> model.SameCross:
    return model.SameCross(same=d["same"].figures(), cross=d["cross"].figures())


LADDER = [
    ("spin", "spinlock handoff", "spin-tas-threads", {"mode": "handoff"}),
    ("futex", "futex", "futex", {}),
    ("sem", "semaphore", "sem-threads", {}),
    ("pipe", "pipe", "pipe", {}),
    ("unix", "UNIX socket", "unix-stream", {}),
    ("tcp", "loopback TCP", "tcp", {}),
    ("zmq", "ZeroMQ over TCP", "zmq-tcp", {}),
]


def _primitives_plan(quick: bool) -> list[Measure]:
    a, b = _cpus()
    return [Measure(k, label, w, {**_pin(a, b), **o}, scale=0.5 if quick else 1.0) for k, label, w, o in LADDER]


def _primitives_figures(d: dict[str, Done]) -> model.Primitives:
    return model.Primitives(rungs=[d[k].figures() for k, *_ in LADDER])


PIPE_SIZES = (1, 64, 4096, 16384, 65536, 262144, 1 << 20)
UNIX_SIZES = (1, 4096, 65536, 1 << 20)
EXPLAINED_SIZE = 256 << 10
STREAM_SIZES = (4096, 65536, 1 << 20)
QUICK_PIPE_SIZES = (1, 4096, 65536, 262144, 1 << 20)
QUICK_UNIX_SIZES = (1, 65536, 1 << 20)
QUICK_STREAM_SIZES = (4096, 65536)
BYTES_PER_RUN = 256 << 20  # a size's iterations are capped so that a run copies at most this much


def _size_plan(quick: bool) -> list[Measure]:
    a, b = _cpus()
    out = []
    # the default takes a third of its count each (eighteen runs within three minutes); --quick
    # fewer sizes, still two either side of the pipe's buffer
    few = 1.0 if quick else 0.3
    count = (QUICK if quick else DEFAULT)["iterations"]
    sizes = {
        "pipe": QUICK_PIPE_SIZES if quick else PIPE_SIZES,
        "unix": QUICK_UNIX_SIZES if quick else UNIX_SIZES,
        "bw-pipe": QUICK_STREAM_SIZES if quick else STREAM_SIZES,
        "bw-unix": (65536,) if quick else STREAM_SIZES,
    }
    for key, wl in (
        ("pipe", "pipe"),
        ("unix", "unix-stream"),
        ("bw-pipe", "pipe-bandwidth"),
        ("bw-unix", "unix-bandwidth"),
    ):
        for s in sizes[key]:
            what = f"{wl}, {model.B(s).show()}" + (" writes" if key.startswith("bw-") else "")
            out.append(
                Measure(
                    f"{key}-{s}",
                    what,
                    wl,
                    {**_pin(a, b), "size": s},
                    trace=False,
                    explain=None,
                    scale=few * min(1.0, BYTES_PER_RUN / (s * count)),
                )
            )
    # one size above the pipe's buffer traced, for an explained iteration: the turns of filling
    # and draining (its latencies stay out of the fit, which takes the untraced runs alone)
    out.append(
        Measure(
            "explained",
            f"pipe, {model.B(EXPLAINED_SIZE).show()}, traced",
            "pipe",
            {**_pin(a, b), "size": EXPLAINED_SIZE},
            scale=0.05,
        )
    )
    return out


def _pipe_buffer() -> int:
    """The default capacity of a pipe: 16 pages (pipe(7)); F_GETPIPE_SZ would read it."""
    r, w = os.pipe()
    try:
        return fcntl.fcntl(w, 1032)  # F_GETPIPE_SZ
    except OSError:
        return 65536
    finally:
        os.close(r)
        os.close(w)


def _size_figures(d: dict[str, Done]) -> model.SizeCopy:
    def points(name: str) -> list[model.SizePoint]:
        out = []
        for k, done in d.items():
            if k.startswith(name + "-"):
                m = done.summary.metrics[done.summary.primary_metric or "rtt"]
                ci = m.ci95_median
                assert m.median is not None  # a lab run measures its metric
                out.append(model.SizePoint(int(k.split("-")[1]), float(m.median), (ci[0], ci[1]) if ci else None))
        return sorted(out, key=lambda p: p.size)

    rows = []
    for k, done in d.items():
        if k.startswith("pipe-"):
            x, y, _, _ = sweep.size_points(done.resdir, done.summary.primary_metric or "rtt")
            rows.append({"size": int(k.split("-")[1]), "x": x, "y": y})
    fit = sizefit.fit(pd.DataFrame(rows), reps=500)

    def stream(name: str) -> list[model.StreamPoint]:
        out = []
        for k, done in d.items():
            if k.startswith(f"bw-{name}-"):
                write = done.summary.metrics["write"]
                assert write.mean is not None  # a stream's run measures its writes
                out.append(model.StreamPoint(int(k.rsplit("-", 1)[1]), float(write.mean)))
        return sorted(out, key=lambda p: p.size)

    return model.SizeCopy(
        pipe_stream=stream("pipe"),
        unix_stream=stream("unix"),
        pipe=points("pipe"),
        unix=points("unix"),
        pipe_buffer=_pipe_buffer(),
        ns_per_byte=fit["ns_per_byte"],
        ns_per_byte_ci=tuple(fit["ns_per_byte_ci95"]),
    )


def _interference_plan(quick: bool) -> list[Measure]:
    a, b = _cpus()
    # A round trip that loses the CPU to the hog waits for its time slice, and the runs' analysis
    # shares the machine with it: the runs with a hog take fewer iterations.
    few = 0.5 if quick else 1.0
    return [
        Measure("alone", "pipe, alone", "pipe", _pin(a, b)),
        Measure(
            "hog",
            f"with a nice {model.HOG_NICE} hog on the peer's CPU",
            "pipe",
            _pin(a, b),
            hog_nice=model.HOG_NICE,
            explain="max",
            scale=0.2 * few,
        ),
        Measure("nice", f"with the hog at nice {model.NICE}", "pipe", _pin(a, b), hog_nice=model.NICE, scale=few),
        Measure(
            "fifo",
            f"nice {model.HOG_NICE} hog, workload SCHED_FIFO 50",
            "pipe",
            {**_pin(a, b), "priority": 50},
            hog_nice=model.HOG_NICE,
            scale=0.5 * few,
        ),
    ]


def _interference_figures(d: dict[str, Done]) -> model.Interference:
    h = d["hog"]
    trace = h.summary.trace

    def comm_of(tid: int | None) -> str:
        return (trace.file.comm(tid) if trace and tid is not None else None) or "?"

    x = h.explanation
    culprit, hog_path_ns, named = None, 0.0, None
    if x is not None:
        held, _ = model.path_holders(x.path)
        hog_path_ns = dict(held).get(h.hog_tid or -1, 0.0)
        if held:
            tid, ns = held[0]
            culprit = (comm_of(tid), tid, ns)
        named = culprit is not None and culprit[1] == h.hog_tid
    hog_comm = comm_of(h.hog_tid)
    return model.Interference(
        alone=d["alone"].figures(),
        hog=h.figures(),
        nice_hog=d["nice"].figures(),
        fifo=d["fifo"].figures(),
        hog_ns=model.preempted_ns(h.summary, h.hog_tid),
        nice_hog_ns=model.preempted_ns(d["nice"].summary, d["nice"].hog_tid),
        fifo_hog_ns=model.preempted_ns(d["fifo"].summary, d["fifo"].hog_tid),
        hog_comm=hog_comm if hog_comm != "?" else "ipcbench",
        hog_tid=h.hog_tid or 0,
        hog_named=named,
        culprit=culprit,
        hog_path_ns=hog_path_ns,
    )


INTERVAL_US = 1000


def _idle_plan(quick: bool) -> list[Measure]:
    a, b = _cpus()
    return [
        Measure("busy", "pipe, back to back", "pipe", _pin(a, b)),
        Measure(
            "paused",
            f"pipe, {INTERVAL_US} us pauses",
            "pipe",
            {**_pin(a, b), "interval_us": INTERVAL_US},
            scale=0.25 if quick else 0.1,
        ),
        Measure("poll", "shared-memory polling", "shm-poll", _pin(a, b)),
    ]


def _idle_figures(d: dict[str, Done]) -> model.IdlePolling:
    return model.IdlePolling(
        busy=d["busy"].figures(), paused=d["paused"].figures(), poll=d["poll"].figures(), interval_us=INTERVAL_US
    )


def _probe_plan(quick: bool) -> list[Measure]:
    a, b = _cpus()
    return [
        Measure("pipe", "pipe, one CPU, traced and untraced", "pipe", {**_pin(b, b), "calibrate": True}),
        Measure("null", "null system call, traced and untraced", "null-syscall", {**_pin(a), "calibrate": True}),
    ]


def _probe_figures(d: dict[str, Done]) -> model.ProbeEffect:
    p, n = d["pipe"].figures(), d["null"].figures()
    return model.ProbeEffect(pipe=p, null=n, pipe_syscalls=p.syscalls or 4, null_syscalls=n.syscalls or 1)


FIRST_N = 20


SLEEP_US = 50  # the usleep of the semaphore report the pitfalls lab repeats (50 us in its loop)


def _pitfalls_plan(quick: bool) -> list[Measure]:
    a, b = _cpus()
    return [
        Measure("null", "null system call, untraced", "null-syscall", _pin(a), trace=False, explain=None),
        Measure(
            "cold",
            "pipe, no warm-up, untraced",
            "pipe",
            {**_pin(a, b), "warmup": 0, "runs": 1, "iqr": True},
            trace=False,
            explain=None,
        ),
        Measure("sem", "semaphore ping-pong, untraced", "sem-procs", _pin(a, b), trace=False, explain=None, scale=0.5),
        Measure(
            "sem-sleep",
            f"the same with a usleep({SLEEP_US}) in the peer's loop, untraced",
            "sem-procs",
            {**_pin(a, b), "inject_peer_sleep": SLEEP_US},
            trace=False,
            explain=None,
            scale=0.5,
        ),
    ]


def _pitfalls_figures(d: dict[str, Done]) -> model.Pitfalls:
    null = read_iterations(d["null"].resdir)
    cold = read_iterations(d["cold"].resdir)
    cold = cold[cold["run"] == 0].sort_values("iteration")["latency_ns"].to_numpy(np.float64)
    return model.Pitfalls(
        clock_resolution_ns=time.clock_getres(time.CLOCK_MONOTONIC) * 1e9,
        step_ns=model.smallest_step(null["latency_ns"].to_numpy()),
        null_median_ns=float(np.median(null["latency_ns"])),
        first_median_ns=float(np.median(cold[:FIRST_N])),
        first_n=FIRST_N,
        rest_median_ns=float(np.median(cold[FIRST_N:])),
        pipe=d["cold"].figures(),
        sleep_us=SLEEP_US,
        sem_median_ns=d["sem"].figures().median_ns,
        sem_sleep_median_ns=d["sem-sleep"].figures().median_ns,
    )


LABS = [
    Lab(
        "same-vs-cross",
        "One CPU or two",
        "Is a pipe round trip faster when both processes share one CPU, or when each has its own? Where does the "
        "difference go?",
        _same_cross_plan,
        _same_cross_figures,
        model.same_vs_cross_claims,
        (
            "Predict, then measure: with --interval 1000 (a pause after each round trip) does the cross-CPU "
            "round trip get slower or faster? Why? (ipctrace run pipe --cross-cpu --interval 1000)",
            "Run the same two placements with unix-stream instead of pipe: does the ratio stay?",
            "Explain the slowest cross-CPU iteration (ipctrace explain DIR/cross --max): what made it slow?",
        ),
        "cross",
    ),
    Lab(
        "primitives",
        "The ladder of primitives",
        "What does one round trip cost with each primitive, from a spinlock in shared memory to ZeroMQ, and why: "
        "how many system calls, copies and wake-ups does each make?",
        _primitives_plan,
        _primitives_figures,
        model.primitives_claims,
        (
            "Count the system calls of one futex round trip by hand from the code (workloads/cases/futex.c), then "
            "check it against ipctrace explain DIR/futex.",
            "Run the spinlock on one CPU (ipctrace run spin-tas-threads --mode handoff --same-cpu): predict the "
            "result first.",
            "Where would a message queue (mqueue) or eventfd sit on the ladder? Measure them.",
        ),
        "futex",
    ),
    Lab(
        "size-and-copy",
        "Message size and the copy",
        "How does the round trip grow with the message size from 1 B to 1 MiB over a pipe and a UNIX socket; "
        "what does a byte cost, and where do the buffers bend the curve?",
        _size_plan,
        _size_figures,
        model.size_and_copy_claims,
        (
            "Predict the round trip of a 2 MiB pipe message from the fitted line, then measure it (--size 2M).",
            "Set the pipe's buffer larger (F_SETPIPE_SZ, /proc/sys/fs/pipe-max-size): where should the bend move?",
            "Run ipctrace sweep pipe --sizes 1,4096,65536,1048576 traced: how much of the slope is copying, how "
            "much the wake-ups of the turns?",
        ),
        "explained",
    ),
    Lab(
        "interference",
        "Sharing the CPU",
        "What happens to the round trip when a CPU hog runs on the peer's CPU; does nice help; does SCHED_FIFO?",
        _interference_plan,
        _interference_figures,
        model.interference_claims,
        (
            "Put the hog on the measuring side's CPU instead: which component should grow?",
            "Try SCHED_FIFO for the workload without any hog: what does it change, and what does it cost the "
            "rest of the machine?",
            "Read the preempted-by table of DIR/hog (ipctrace run's table, or the report): who else took the CPU?",
        ),
        "hog",
    ),
    Lab(
        "idle-and-polling",
        "Idle CPUs and busy polling",
        "Does a CPU that went idle wake more slowly, and what does polling shared memory buy and cost?",
        _idle_plan,
        _idle_figures,
        model.idle_and_polling_claims,
        (
            "Vary --interval (10, 100, 1000, 10000 us): at which pause does the wake-up jump? Compare with "
            "/sys/devices/system/cpu/cpu0/cpuidle/*/latency if the machine has idle states.",
            "Run shm-poll on one CPU (--same-cpu): predict what happens to the round trip.",
            "Who pays for polling? Measure another workload on the same CPUs while shm-poll runs.",
        ),
        "paused",
    ),
    Lab(
        "probe-effect",
        "The probe effect",
        "How much does tracing slow what it measures, per system call, and why does a measurement change what "
        "it measures?",
        _probe_plan,
        _probe_figures,
        model.probe_effect_claims,
        (
            "Which records does the tracer write per system call (ipctrace doctor lists the probes)? Predict the "
            "cost of a workload with twice the system calls.",
            "Compare the untraced twins with the traced runs in ipctrace compare DIR/pipe/untraced DIR/pipe.",
            "Trace with stack sampling (--sample-hz 999): how much more does it cost?",
        ),
        "pipe",
    ),
    Lab(
        "pitfalls",
        "Pitfalls of the lab reports",
        "What goes wrong when timing IPC by hand: the clock's resolution, warm-up, outliers and the 1.5 IQR "
        "rule, a usleep in the loop, and halving a round trip?",
        _pitfalls_plan,
        _pitfalls_figures,
        model.pitfalls_claims,
        (
            "Time a usleep(1) with clock_gettime in a loop: how long does it really sleep, and why (timer slack)?",
            "Compare ipctrace run sem-wakeup with a semaphore round trip: which is the wake-up alone?",
            "Re-run with --runs 5: how far do the runs' means move from each other, compared with the "
            "interval of one run's mean?",
        ),
        "cold",
    ),
]


def by_name(name: str) -> Lab:
    for lab in LABS:
        if lab.name == name:
            return lab
    near = difflib.get_close_matches(name, [lab.name for lab in LABS], n=1)
    raise UsageError(f"unknown lab '{name}'" + (f"; did you mean '{near[0]}'?" if near else "") + " (ipctrace lab)")


# --- running one ---------------------------------------------------------------------


def options(m: Measure, quick: bool) -> RunOptions:
    counts = dict(QUICK if quick else DEFAULT)
    counts["iterations"] = max(50, int(counts["iterations"] * m.scale))
    counts["warmup"] = max(10, int(counts["warmup"] * m.scale))
    return RunOptions(**{**counts, **m.options})


def check(lab: Lab, quick: bool) -> None:
    """What the lab's runs cannot do here, before anything runs."""
    for m in lab.plan(quick):
        runner.check_options(runner.workload_info(m.workload), options(m, quick))


def measure(lab: Lab, quick: bool, work: Path, out: Path, quiet: bool) -> dict[str, Done]:
    """Every run of the lab's plan into work/KEY (shown as out/KEY)."""
    plan = lab.plan(quick)
    done = {}
    started = time.monotonic()
    for k, m in enumerate(plan, 1):
        if not quiet:
            print(
                f"lab {lab.name}: {k}/{len(plan)} {m.label} ({time.monotonic() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        opts = options(m, quick)
        hog = None
        if m.hog_nice is not None:
            assert opts.cpus  # a lab that runs a hog places its runs
            hog = Hog(opts.cpus[-1], nice=m.hog_nice)
        try:
            resdir = runner.run_workload(m.workload, opts, work / m.key, trace=m.trace, quiet=True, shown=out / m.key)
        finally:
            if hog:
                hog.__exit__(None, None, None)
        path = work / m.key
        summary = run_summary_file(path)
        x = None
        if m.trace and m.explain:
            try:
                with explain_inputs(path) as inputs:
                    x = inputs.answer(explain_mod.explain(inputs, which=m.explain))
            except UsageError as e:
                # the lab still answers from the summaries; the claims that need the
                # explained iteration say they have none
                print(f"ipctrace lab: {m.key}: no explained iteration: {e}", file=sys.stderr, flush=True)
        done[m.key] = Done(m, path, resdir, summary, x, hog.proc.pid if hog else None)
    return done


@dataclass
class Outcome:
    """A lab's answer: what render/lab.py shows and --json prints."""

    lab: Lab
    quick: bool
    figures: Any
    claims: list[model.Claim]
    done: dict[str, Done]
    seconds: float
    out: Path
    disturbed: list[model.Claim] = field(default_factory=list)  # what foreign tasks did to the runs

    def as_json(self) -> dict[str, Any]:
        claims = [c.as_json() for c in self.claims]
        disturbed = [c.as_json() for c in self.disturbed]
        return {
            "lab": self.lab.name,
            "title": self.lab.title,
            "question": self.lab.question,
            "quick": self.quick,
            "figures": {
                **model.figures_json(self.figures),
                # every run's own figures: what the evidence table shows, row by row
                "runs": {k: model.figures_json(d.figures()) for k, d in self.done.items()},
                "derived": {
                    **{f"claim{i + 1}.{k}": v for i, c in enumerate(claims) for k, v in c["figures"].items()},
                    **{f"disturbed{i + 1}.{k}": v for i, c in enumerate(disturbed) for k, v in c["figures"].items()},
                },
            },
            "claims": claims,
            "disturbed": disturbed,
            "exercises": list(self.lab.exercises),
            "runs": {
                k: {"dir": str(d.shown), "workload": d.measure.workload, "label": d.measure.label}
                for k, d in self.done.items()
            },
            "seconds": round(self.seconds, 1),
            "out": str(self.out),
            "handout": "handout.html",
        }


def run_lab(lab: Lab, quick: bool, work: Path, out: Path, quiet: bool) -> Outcome:
    started = time.monotonic()
    done = measure(lab, quick, work, out, quiet)
    figures = lab.figures(done)
    found = model.disturbances(
        {k: d.figures() for k, d in done.items()}, {k: {d.hog_tid} for k, d in done.items() if d.hog_tid}
    )
    claims = model.mark_beside(lab.claims(figures), found)
    disturbed = [model.disturbance_claim(x) for x in found]
    outcome = Outcome(lab, quick, figures, claims, done, time.monotonic() - started, out, disturbed)
    doc = outcome.as_json()
    safeio.write_text(work / "lab.json", json.dumps(doc, indent=1, default=json_default) + "\n")
    safeio.write_text(work / "lab.txt", render.text(outcome) + "\n")
    medians = report.saved(work, _medians_picture(outcome))
    histogram = _histogram_picture(render.shown_run(outcome))
    if histogram is not None:
        report.saved(work, histogram)
    safeio.write_text(work / "handout.html", render.handout(outcome, medians, histogram))
    return outcome


def _medians_picture(outcome: Any) -> Picture:  # noqa: ANN401
    """The size lab: latency against size; the others: each run's median with its interval."""
    done = outcome.done
    if outcome.lab.name == "size-and-copy":
        pipe = outcome.figures.pipe
        return plots.latency_by_size(
            [p.size for p in pipe],
            [p.median_ns for p in pipe],
            [(p.median_ci or (p.median_ns, p.median_ns))[0] for p in pipe],
            [(p.median_ci or (p.median_ns, p.median_ns))[1] for p in pipe],
            "pipe rtt",
            "lab-sizes.png",
        )
    figs = [d.figures() for d in done.values()]
    return plots.medians(
        [f"{k}: {f.label}" for k, f in zip(done, figs)],
        [f.median_ns for f in figs],
        [(f.median_ci or (f.median_ns, f.median_ns)) for f in figs],
        "lab-medians.png",
    )


def _histogram_picture(d: Any) -> Picture | None:  # noqa: ANN401
    it = read_iterations(d.resdir)
    metric = d.summary.primary_metric or "rtt"
    vals = it.loc[it["metric"].astype(str) == metric, "latency_ns"].to_numpy(np.float64)
    if not len(vals):
        return None
    return plots.histogram(heatmaps.histogram(vals, metric), "lab-histogram.png")


def json_default(x: Any) -> Any:  # noqa: ANN401
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    if isinstance(x, (np.integer, np.floating)):
        return x.item()
    raise TypeError(type(x).__name__)
