"""The seed reports' experiments and figures, for `ipctrace suite`.

The reports (../shared/seeds/*.txt, German OS course reports) measured IPC
latency on their authors' machines. EXPERIMENTS says how ipctrace reproduces
each experiment (workload, mode, metric); FIGURES holds every figure a report
gives for it, with the report file, the machine it ran on, and `quote`: the text
of the report the figure was read from, so a test can check it against the file.

Two conventions of the reports matter when comparing:
- 002 halved every round trip ("Approximation der One-Way Zeiten") and removed
  outliers beyond 1.5 IQR before averaging: its figures compare with one_way.
- 000 and 001 timed a whole loop or each iteration of two threads doing the
  same thing; where that is not the round trip ipctrace measures, `note` says so.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

SEED_DIR = Path(os.environ.get("IPCTRACE_SEEDS", Path(__file__).resolve().parents[3] / "shared" / "seeds"))

MACHINES = {
    "000_6716c315987b0d95.txt": "macOS, MacBook Pro",
    "001_58aa7d8e1e25a57e.txt": "WSL, Ubuntu on Windows 11",
    "002_460f2a7bc619b165.txt": "macOS, MacBook Air M2",
    "003_d26c918e84800f01.txt": "Linux, CachyOS 6.17 on an i5-4590",
    "004_dc97f491540bbac1.txt": "Linux (machine not named)",
}

# Each report by its title (its heading, or its first line where it has none) and what it
# measured: a reader without the seed files learns what is being cited.
TITLES = {
    "000_6716c315987b0d95.txt": "'Bericht zur Latenzen verschiedener IPC-Mechanismen' (N. Grigoryan): "
    "spinlocks, semaphores, ZeroMQ",
    "001_58aa7d8e1e25a57e.txt": "'Latenzen verschiedener IPC-Mechanismen' (Betriebssysteme Übung 2): "
    "spinlocks, semaphores, ZeroMQ",
    "002_460f2a7bc619b165.txt": "'Portfolioaufgabe 2' (mmaywald05/OS2): spinlock hand-offs, semaphores, ZeroMQ, "
    "one way = round trip / 2",
    "003_d26c918e84800f01.txt": "'Report Abgabe 1' (M. Mokelke): pipe latency in one process and between two",
    "004_dc97f491540bbac1.txt": "'ORWC - open read write close': file system calls, semaphore wake-up, "
    "kernel spinlock, non-blocking pipe",
}


def citation(report: str) -> str:
    """A report named for a reader: its number, title, what it measured and its machine."""
    return f"report {report[:3]}, {TITLES[report]}; on {MACHINES[report]}"


def cite_in(text: str) -> tuple[str, list[str]]:
    """text with each report's file name (as the workloads' seed notes give it) replaced by
    "report NNN", and the reports it cites: the file names mean nothing outside the seed folder,
    so a reader is given each cited report's citation() once, below what cites it."""
    cited = [report for report in MACHINES if report in text]
    for report in cited:
        text = text.replace(report, f"report {report[:3]}")
    return text, cited


@dataclasses.dataclass(frozen=True)
class Experiment:
    id: str
    title: str
    workload: str
    mode: str | None = None
    fresh: bool = False
    # Each iteration of kspin is already the mean of thousands of lock+unlock pairs
    # in the kernel: a few thousand iterations give a tight interval.
    max_iterations: int | None = None

    def options_text(self) -> str:
        return " ".join(
            [self.workload] + ([f"--mode {self.mode}"] if self.mode else []) + (["--fresh"] if self.fresh else [])
        )


@dataclasses.dataclass(frozen=True)
class Figure:
    experiment: str
    metric: str  # the ipctrace metric it compares with
    report: str  # file name in SEED_DIR
    value_ns: float
    quote: str  # verbatim text of the report holding the figure
    ci95_ns: tuple | None = None
    statistic: str = "mean"
    note: str = ""

    @property
    def machine(self) -> str:
        return MACHINES[self.report]

    @property
    def report_id(self) -> str:
        return self.report[:3]


EXPERIMENTS = [
    Experiment("spin-lock-threads", "spinlock, two threads contending (lock+unlock)", "spin-tas-threads", mode="lock"),
    Experiment(
        "spin-lock-procs", "spinlock in shared memory, two processes (lock+unlock)", "spin-tas-procs", mode="lock"
    ),
    Experiment("spin-handoff-tas", "spinlock flag handoff, test-and-set", "spin-tas-threads", mode="handoff"),
    Experiment(
        "spin-handoff-ttas",
        "spinlock flag handoff, test-and-test-and-set with pause",
        "spin-ttas-threads",
        mode="handoff",
    ),
    Experiment("sem-threads", "semaphore between two threads", "sem-threads", mode="named"),
    Experiment("sem-wakeup", "wake-up of a thread blocked in sem_wait", "sem-wakeup"),
    Experiment("zmq-inproc", "ZeroMQ inproc, two threads", "zmq-inproc"),
    Experiment("zmq-ipc", "ZeroMQ ipc, two processes", "zmq-ipc"),
    Experiment("zmq-containers", "ZeroMQ tcp between two containers (network namespaces here)", "zmq-tcp-netns"),
    Experiment("kspin", "kernel spinlock lock+unlock", "kspin", max_iterations=5000),
    Experiment("pipe", "pipe round trip between two processes", "pipe"),
    Experiment("pipe-self", "pipe write+read in one process, new pipe each time", "pipe-self", fresh=True),
    Experiment("pipe-nonblock", "non-blocking pipe write and read, one thread", "pipe-nonblock"),
    Experiment("orwc", "open, read, write, close of /dev/null", "orwc"),
]

_R000, _R001, _R002, _R003, _R004 = sorted(MACHINES)
_IQR_HALF = "round trip halved, outliers beyond 1.5 IQR removed"

FIGURES = [
    Figure(
        "spin-lock-threads",
        "lock_unlock",
        _R000,
        37.64,
        "37,64 ns\t[36,05 ns, 39,23 ns]",
        (36.05, 39.23),
        note="mean of 7 runs; each thread timed 1M lock+unlock around the whole loop",
    ),
    Figure(
        "spin-lock-threads",
        "lock_unlock",
        _R001,
        43.02,
        "Thread 1 - Mittelwert der Zeit: 43.020100",
        (42.919250, 43.120950),
        note="thread 1; thread 0: 44.1 ns [41.9, 46.3]",
    ),
    Figure(
        "spin-lock-procs",
        "lock_unlock",
        _R000,
        41.4,
        "41.4 ns\t[39,3 ns, 43,6 ns]",
        (39.3, 43.6),
        note="mean of 7 runs, spinlock in shm_open memory, parent and child",
    ),
    Figure(
        "spin-handoff-tas",
        "one_way",
        _R002,
        113.53,
        "Spinlock\t113.45\t113.53\t113.61",
        (113.45, 113.61),
        note=_IQR_HALF,
    ),
    Figure(
        "spin-handoff-ttas",
        "one_way",
        _R002,
        88.2,
        "Besseres Spinlock\t88.16\t88.2\t88.24",
        (88.16, 88.24),
        note=_IQR_HALF + "; after rigtorp.se/spinlock",
    ),
    Figure(
        "sem-threads",
        "rtt",
        _R000,
        3217.3,
        "3217,3 ns\t[3200,9 ns, 3233,7 ns]",
        (3200.9, 3233.7),
        note="sem_wait+sem_post of two threads contending for one named semaphore (initial value 1), not a ping-pong",
    ),
    Figure(
        "sem-threads",
        "rtt",
        _R001,
        76.89,
        "Thread 1 - Mittelwert der Zeit: 76.889200",
        (66.601818, 87.176582),
        note="sem_wait+sem_post per iteration; at 77 ns no thread slept: no wake-up is in this figure",
    ),
    Figure(
        "sem-threads",
        "one_way",
        _R002,
        1261.98,
        "Semaphore\t1261.93\t1261.98\t1262.03",
        (1261.93, 1262.03),
        note=_IQR_HALF,
    ),
    Figure(
        "sem-wakeup",
        "wakeup",
        _R004,
        63818.73,
        "Mean: 63818.73 ns",
        (63759.01, 63878.45),
        note="the poster slept usleep(50) inside the timed window; minimum -49230 ns",
    ),
    Figure(
        "zmq-inproc",
        "rtt",
        _R000,
        24010.0,
        "Berechneter Mittelwert: 24.01",
        (23490.0, 24530.0),
        note="mean of 7 runs; the closing table gives 22.5 us [20.9, 24.1]",
    ),
    Figure(
        "zmq-inproc",
        "rtt",
        _R001,
        27958.91,
        "Thread 1 - Mittelwert der Zeit: 27958.913000",
        (27769.006327, 28148.819673),
    ),
    Figure(
        "zmq-inproc",
        "one_way",
        _R002,
        8868.49,
        "ZMQ Intraproc\t8866..19\t8868.49\t8870.80",
        (8866.19, 8870.80),
        note=_IQR_HALF,
    ),
    Figure(
        "zmq-ipc",
        "rtt",
        _R000,
        49500.0,
        "Berechneter Mittelwert: 49.50",
        (48840.0, 50160.0),
        note="mean of 7 runs, ipc:///tmp/test",
    ),
    Figure(
        "zmq-ipc",
        "rtt",
        _R001,
        97816.87,
        "Sender - Mittelwert der Zeit: 97816.867400",
        (90353.054253, 105280.680547),
        note="sender and receiver started separately from the shell",
    ),
    Figure(
        "zmq-ipc",
        "one_way",
        _R002,
        28168.28,
        "ZMQ Interproc\t28163.27\t28168.28\t28173.29",
        (28163.27, 28173.29),
        note=_IQR_HALF,
    ),
    Figure(
        "zmq-containers",
        "rtt",
        _R000,
        113980.0,
        "- 113.98 µs",
        (110110.0, 117850.0),
        note="two Docker containers (Docker Compose bridge network)",
    ),
    Figure(
        "zmq-containers",
        "rtt",
        _R001,
        186760.77,
        "Sender - Mittelwert der Zeit: 186760.765900",
        (5897.180638, 367624.351162),
        note="two Docker containers on a user network",
    ),
    Figure(
        "zmq-containers",
        "one_way",
        _R002,
        17781.39,
        "Docker Container\t17779.21\t17781.39\t17783.56",
        (17779.21, 17783.56),
        note=_IQR_HALF + "; two Docker containers",
    ),
    Figure(
        "kspin",
        "lock_unlock",
        _R004,
        59.53,
        "Mean: 59.53 ns",
        (59.44, 59.62),
        note="kernel module, uncontended spin_lock+spin_unlock, ktime_get_ns around each pair",
    ),
    Figure("pipe", "rtt", _R003, 6710.0, "| icp-pipe.cpp                  | 6.71 | 5.49 ", note="median 5.49 us"),
    Figure(
        "pipe-self",
        "write_read",
        _R003,
        1200.0,
        "| pipe.cpp                      | 1.2  | 1.09 ",
        note="median 1.09 us",
    ),
    Figure("pipe-nonblock", "write", _R004, 347.13, "Mean: 347.13 ns", (346.89, 347.37)),
    Figure("pipe-nonblock", "read", _R004, 341.61, "Mean: 341.61 ns", (341.41, 341.81)),
    Figure("orwc", "open", _R004, 2046.62, "Mean: 2046.62 ns", (2045.85, 2047.38)),
    Figure("orwc", "read", _R004, 191.70, "Mean: 191.70 ns", (191.57, 191.82)),
    Figure("orwc", "write", _R004, 211.50, "Mean: 211.50 ns", (211.34, 211.66)),
    Figure("orwc", "close", _R004, 560.68, "Mean: 560.68 ns", (560.37, 560.98)),
]


def figures_for(experiment_id: str) -> list[Figure]:
    """The reports' figures of one experiment, in report order."""
    return [f for f in FIGURES if f.experiment == experiment_id]


def metrics_for(experiment_id: str) -> list[str]:
    """The metrics the reports' figures of an experiment compare with, in first-seen order."""
    return list(dict.fromkeys(f.metric for f in figures_for(experiment_id)))
