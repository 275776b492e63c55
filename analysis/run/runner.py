"""Running one workload: the driver (optionally under the tracer) into a results directory.

run_workload() is what run, suite, sweep and bench share. The directory holds
INCOMPLETE until everything is written; after a failure it keeps the marker
and meta.json says "failed". SIGINT/SIGTERM are passed to the driver, which
stops and writes what it measured; we then finish the directory, mark it
"interrupted" and raise Interrupted (exit 130/143). A driver whose count of
timed iterations stands still for IPCTRACE_STALL_S seconds (default 60; before the first
one, at least START_S: the tracer's start and the warm-up) hangs:
it is stopped and the run fails (exit 1). Under sudo the workload runs as the
invoking user (SUDO_UID/SUDO_GID), unless it needs root (flag needs_root); the
results directory is made (or checked) with that user's rights, and every file we
make in it is theirs (analysis.store.safeio: made anew through the directory's descriptor,
never through a name a user could have planted). Two runs never share a directory:
the second is refused before it touches anything (a lock on the directory).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import difflib
import fcntl
import functools
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from analysis import DRIVER, HOME, LOADER, OUTPUT
from analysis.errors import Interrupted, IpctraceError, MeasureError, UsageError, unmasked
from analysis.run import broker, cleanup, privilege
from analysis.run.options import online_cpus
from analysis.store import safeio
from analysis.store.host import host_info

if TYPE_CHECKING:  # the analysis is imported where a run is analysed, not at start-up
    from analysis.run.options import RunOptions
    from analysis.run.progress import Progress, Stage
    from analysis.store.itercolumns import IterationColumns
    from analysis.store.summaryfile import RunSummary

# The analysis (model.summary, store.results: numpy, pandas, pyarrow) and the progress bar
# (threads) are imported by the functions that measure and analyse, not here: list and
# --version read this module too.

POLL_S = 0.2
STALL_S = 60  # default: no timed iteration finished for this long = the workload hangs
# Before its first timed iteration a run may take at least this long: the tracer loads and
# attaches its programs, and the warm-up runs (seconds on a busy machine), which a short
# IPCTRACE_STALL_S must not take for a hang.
START_S = 30
STOP_GRACE_S = 5  # after SIGTERM, how long a hung driver gets to write what it measured


def require_driver() -> None:
    if not os.access(DRIVER, os.X_OK):
        raise UsageError(f"the workload driver {DRIVER} is not built; run 'make' in {HOME}")


@functools.cache
def catalog() -> list[dict[str, Any]]:
    """The driver's workload table: [{"name", "summary", "metrics", "primary_metric", ...}]."""
    require_driver()
    try:
        p = subprocess.run([str(DRIVER), "list"], capture_output=True, text=True)
    except OSError as e:
        raise UsageError(f"cannot run the workload driver {DRIVER}: {e.strerror}; rebuild with 'make'") from None
    if p.returncode != 0:
        line = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise UsageError(f"ipcbench list failed: {line}")
    try:
        return json.loads(p.stdout)["workloads"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise UsageError("ipcbench list printed no workload table; rebuild with 'make'") from None


def workload_info(name: str) -> dict[str, Any]:
    """The catalog entry of name; an unknown name suggests the closest one."""
    table = {w["name"]: w for w in catalog()}
    if name in table:
        return table[name]
    close = difflib.get_close_matches(name, table, n=1, cutoff=0.5)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise UsageError(f"unknown workload '{name}'; {hint}(ipctrace list)")


def check_options(info: dict[str, Any], opts: RunOptions) -> None:
    """What the workload cannot do with opts, as a UsageError before anything starts."""
    name, flags = info["name"], set(info.get("flags", []))
    if "single" in flags and opts.placement == "cross-cpu":
        raise UsageError(f"{name} runs one thread: --cross-cpu does not apply (--cpus A pins it)")
    if opts.size is not None:
        if "size" not in flags:
            raise UsageError(f"{name} sends no messages of a chosen size; --size does not apply")
        if info.get("max_size") and opts.size > info["max_size"]:
            raise UsageError(f"--size {opts.size}: {name} carries at most {info['max_size']} bytes per message")
    for flag in ("procs", "fresh", "containers"):
        if getattr(opts, flag) and flag not in flags:
            raise UsageError(f"{name} has no --{flag} variant")
    if opts.injections() and "inject" not in flags:
        takes = ", ".join(w["name"] for w in catalog() if "inject" in w.get("flags", []))
        raise UsageError(f"{name} has no injection points: {next(iter(opts.injections()))} applies to {takes}")
    modes = info.get("modes") or []
    if opts.mode and opts.mode not in modes:
        raise UsageError(f"{name} has no mode '{opts.mode}'" + (f"; modes: {', '.join(modes)}" if modes else ""))
    if opts.placement == "cross-cpu" and len(online_cpus()) < 2:
        raise UsageError("--cross-cpu needs two online CPUs")


def version() -> str:
    """The checkout's version, recorded by make at build time (OUTPUT/version): no git runs
    here, under anyone's rights or configuration."""
    try:
        return (OUTPUT / "version").read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def default_outdir(name: str) -> Path:
    base = Path("results") / f"{name}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    path, k = base, 1
    while os.path.lexists(path):
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


class RunDir:
    """The results directory one run (or sweep, or suite) writes: opened once, its
    descriptor locked against every other run for as long as we hold it. We and the
    programs we start write through `path`, /proc/self/fd/N of that descriptor, so
    swapping the directory's name for another (or for a link) changes nothing; `shown`
    is the name the user gave, for messages."""

    def __init__(self, shown: Path | str, fd: int, created: bool) -> None:
        self.shown, self.fd, self.created = Path(shown), fd, created
        self.path = Path(safeio.proc_path(fd))

    def show(self, text: str) -> str:
        """text with our /proc path put back as the user's name for the directory."""
        return text.replace(str(self.path), str(self.shown))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _make_dir(path: Path | str, fresh: bool) -> tuple[int, int, bool]:
    """mkdir -p path, or check that an existing path is an empty directory we may write;
    fresh: the last component must be new (FileExistsError otherwise). Runs with the
    rights of the user the results are for. -> (st_dev, st_ino, whether we made it)."""
    p = Path(path)
    try:
        if fresh:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.mkdir()
            created = True
        elif os.path.lexists(p):
            if not p.is_dir():
                raise UsageError(f"--out {path} exists and is not a directory")
            if any(p.iterdir()):
                raise UsageError(f"--out {path} exists and is not empty; give a new directory")
            if not os.access(p, os.W_OK | os.X_OK):
                raise UsageError(f"--out {path} is not writable")
            created = False
        else:
            p.mkdir(parents=True)
            created = True
        st = os.stat(p)
    except FileExistsError:
        if fresh:
            raise
        raise UsageError(f"cannot create --out {path}: something else took its name") from None
    except OSError as e:
        raise UsageError(f"cannot create --out {path}: {safeio.why(e)}") from None
    return st.st_dev, st.st_ino, created


def open_outdir(path: Path | str, fresh: bool = False) -> RunDir:
    """The results directory path, made or checked (with the user's rights: under sudo the
    front end is the user), then opened, checked to be what was made or checked, locked,
    and found empty: a second run with the same directory is refused here, before it
    touches anything. -> RunDir."""
    dev, ino, created = _make_dir(str(path), fresh)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise UsageError(f"cannot open --out {path}: {safeio.why(e)}") from None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (dev, ino):
            raise UsageError(f"--out {path} was replaced while it was being prepared")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"--out {path} is being written by another ipctrace run") from None
        if os.listdir(fd):
            raise UsageError(f"--out {path} exists and is not empty; give a new directory")
    except BaseException:
        os.close(fd)
        raise
    return RunDir(path, fd, created)


def open_new_outdir(outdir: Path | str | None, name: str) -> RunDir:
    """open_outdir of outdir, or of a new default directory for workload name."""
    if outdir:
        return open_outdir(outdir)
    for _ in range(100):
        try:
            return open_outdir(default_outdir(name), fresh=True)
        except FileExistsError:
            continue
    raise UsageError("cannot find a new name for the results directory in results/")


def mark_incomplete(rd: RunDir, what: str = "a run") -> None:
    """INCOMPLETE in rd: created anew (O_EXCL), never through what a user planted."""
    from analysis.store.results import INCOMPLETE

    try:
        with safeio.created_at(rd.fd, INCOMPLETE) as p, open(p, "w") as f:
            f.write(f"{what} is writing this directory or ended before finishing it\n")
    except OSError as e:
        raise UsageError(f"cannot write into results directory {rd.shown}: {safeio.why(e)}") from None


def stall_seconds() -> float:
    """IPCTRACE_STALL_S, or STALL_S: how long no timed iteration may finish before a run hangs."""
    text = os.environ.get("IPCTRACE_STALL_S", "")
    if not text:
        return STALL_S
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not value > 0:
        raise UsageError(f"IPCTRACE_STALL_S={text}: give the seconds without progress after which a run hangs")
    return value


def remove_dead_leftovers(quiet: bool) -> None:
    """What runs that died (SIGKILL, power loss) left behind goes before a new run starts."""
    removed, failed = cleanup.remove(cleanup.leftovers(cleanup.places()))
    if privilege.brokered():
        # root's own (a workload that needs root made them): removed by the broker
        more, more_failed = broker.clean()
        removed += more
        failed += more_failed
    if removed and not quiet:
        print(f"ipctrace: removed {len(removed)} IPC objects left by runs that died", file=sys.stderr)
    for p, why in failed:
        print(f"ipctrace: cannot remove {p}, left by a run that died: {why}", file=sys.stderr)


class _Signals:
    """While the driver runs: remember SIGINT/SIGTERM and pass them on to it."""

    def __init__(self, child: subprocess.Popen) -> None:
        self.child, self.signum = child, 0
        self.saved: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        for s in (signal.SIGINT, signal.SIGTERM):
            self.saved[s] = signal.signal(s, self.handle)
        return self

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = self.signum or signum
        with contextlib.suppress(ProcessLookupError):
            self.child.send_signal(signum)

    def __exit__(self, *exc: object) -> None:
        for s, h in self.saved.items():
            signal.signal(s, h)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    for prefix in ("ipcbench: ", "ipctrace-loader: ", "ipctrace: "):
        if last.startswith(prefix):
            last = last[len(prefix) :]
    return last


CALIBRATION_DIR = "untraced"  # run --calibrate: the untraced twin of a traced run


def run_workload(
    name: str,
    opts: RunOptions,
    outdir: Path | str | None = None,
    trace: bool = True,
    quiet: bool = False,
    shown: Path | str | None = None,
) -> Path:
    """Measure workload name with RunOptions opts into outdir; returns the results directory.
    shown: the name to print for outdir (a sweep or suite passes its subdirectories
    through its own pinned directory)."""
    info = workload_info(name)
    check_options(info, opts)
    if trace and not os.access(LOADER, os.X_OK):
        raise UsageError(f"tracing is not built ({LOADER} is missing); use --no-trace")
    if trace:
        privilege.check_bounds(opts.ringbuf_mb)
    stall = stall_seconds()
    remove_dead_leftovers(quiet)
    rd = open_new_outdir(outdir, name)
    if shown:
        rd.shown = Path(shown)
    # Workloads that make namespaces or load BPF themselves run as root (the broker's under
    # sudo, which gives their files to the user from their creation).
    needs_root = "needs_root" in info.get("flags", [])
    try:
        mark_incomplete(rd)
        summary = _measure(name, info, opts, rd, trace, quiet, needs_root, stall)
        if trace and opts.calibrate:
            _calibrate(name, info, opts, rd, summary, quiet, needs_root, stall)
    except IpctraceError as e:
        e.args = (rd.show(str(e)),)
        if getattr(e, "resdir", None):
            e.resdir = rd.shown
        raise
    finally:
        rd.close()
    return rd.shown


# What the tracer and the driver write in a run's directory.
PROGRAM_FILES = ("iterations.bin", "workload.json", "events.bin", "trace.json", "samples.json")


def _measure(
    name: str,
    info: dict[str, Any],
    opts: RunOptions,
    rd: RunDir,
    trace: bool,
    quiet: bool,
    needs_root: bool,
    stall: float,
) -> RunSummary:
    """The driver (under the tracer if trace) into the RunDir rd, then its files; returns the
    RunSummary written (or raises Interrupted once what was measured is written)."""
    from analysis.run.progress import Progress, Stages
    from analysis.store.results import INCOMPLETE, write_json

    outdir = rd.path
    drv = [str(DRIVER), "run", name, "--out", str(outdir), *opts.driver_args()]
    meta = {
        "command": ["ipctrace", *sys.argv[1:]],
        "command_line": shlex.join(["ipctrace", *sys.argv[1:]]),
        "cwd": os.getcwd(),
        "version": version(),
        "start_time": now_iso(),
        "clock_source": "CLOCK_MONOTONIC",
        "traced": trace,
        "status": "running",
    }
    progress = None
    try:
        write_json(outdir / "meta.json", meta)
        # The counter feeds the progress bar and tells a hung workload from a slow one.
        progress = Progress(rd.fd, opts.runs * opts.iterations, name)
        drv += ["--progress", progress.path]
        show = not quiet and sys.stderr.isatty()
        sampler = ["--sample-hz", str(opts.sample_hz)] if opts.sample_hz else []
        ringbuf = ["--ringbuf-mb", f"{opts.ringbuf_mb:g}"] if opts.ringbuf_mb else []
        cmd = [str(LOADER), "--out", str(outdir), *sampler, *ringbuf, "--", *drv] if trace else drv
        meta["driver_command"] = [rd.show(a) for a in cmd]
        try:
            rc, signum, errtext, hung = _run_child(
                cmd, progress, show, stall, (rd.fd, progress.fd), root=trace or needs_root, rtprio=opts.priority
            )
        except UsageError as e:
            # refused before anything started (under sudo, a bound the broker keeps): nothing to keep
            progress.close()
            _discard(rd)
            e.discarded = True
            raise
        finally:
            progress.close()
        errtext = rd.show(errtext)
        meta["driver_exit"] = rc
        if hung:
            raise MeasureError(f"{name}: the workload hangs: {hung}; stopped it (see {rd.shown})")
    except BaseException as e:
        if not getattr(e, "discarded", False):
            _fail(outdir, meta, e)
        raise

    if rc == 2 and not signum:
        # Rejected before measuring: leave no half-made directory behind.
        _discard(rd)
        raise UsageError(_last_line(errtext) or f"{name}: the driver rejected the options (exit 2)")
    if not signum and rc in (130, 143):
        signum = rc - 128
    try:
        if rc not in (0, 130, 143) and not signum:
            why = _last_line(errtext) or _exit_text(rc, trace)
            raise MeasureError(f"{name}: measurement failed: {why}")
        # A stop signal before the driver wrote its files (it had not yet set up its handlers):
        # an interruption, not a measurement failure.
        if signum and not (
            safeio.is_regular(outdir / "iterations.bin") and safeio.is_regular(outdir / "workload.json")
        ):
            raise Interrupted(signum, f"interrupted before anything was measured; see {rd.shown}")
        status = "interrupted" if signum else "complete"
        with Stages(f"{name}: analysing", not quiet and sys.stderr.isatty()) as stage:
            summary = _finish(outdir, info, opts, trace, status, errtext, quiet, stage)
        meta.update(status=status, end_time=now_iso())
        write_json(outdir / "meta.json", meta)
        # The one step that completes the directory: readers refuse it while INCOMPLETE is there.
        os.unlink(INCOMPLETE, dir_fd=rd.fd)
    except BaseException as caught:
        exc = unmasked(caught)
        _fail(outdir, meta, exc)
        if isinstance(exc, OSError):
            raise MeasureError(f"{name}: cannot write the results into {rd.shown}: {safeio.why(exc)}") from None
        if exc is not caught:
            raise exc from None
        raise
    if signum:
        err = Interrupted(signum, f"interrupted by {signal.Signals(signum).name}; what was measured is in {rd.shown}")
        err.resdir = rd.shown
        raise err
    return summary


def _calibrate(
    name: str,
    info: dict[str, Any],
    opts: RunOptions,
    rd: RunDir,
    summary: RunSummary,
    quiet: bool,
    needs_root: bool,
    stall: float,
) -> None:
    """The same run untraced, right after the traced one, into outdir/untraced; the traced
    run's summary.json is written again with its probe_effect."""
    from analysis.model import summary as summary_mod
    from analysis.store.results import write_json

    outdir = rd.path
    plain = outdir / CALIBRATION_DIR
    try:
        safeio.mkdir(plain)
        sub = RunDir(rd.shown / CALIBRATION_DIR, safeio.open_dir(plain), True)
    except OSError as e:
        raise MeasureError(f"cannot create {rd.shown / CALIBRATION_DIR}: {safeio.why(e)}") from None
    try:
        mark_incomplete(sub)
        untraced = _measure(name, info, opts, sub, False, quiet, needs_root, stall)
    except Interrupted as e:
        # The traced run is whole: it is what the user gets, without a probe effect.
        err = Interrupted(
            e.signum,
            f"interrupted during the untraced run of --calibrate; the traced results are complete in {rd.shown}",
        )
        err.resdir = rd.shown
        raise err from None
    finally:
        sub.close()
    pe = summary_mod.probe_effect(summary.metrics, untraced.metrics, CALIBRATION_DIR)
    write_json(outdir / "summary.json", dataclasses.replace(summary, probe_effect=pe).to_json())


def _exit_text(rc: int, traced: bool) -> str:
    """What an exit status says; the tracer passes on a driver killed by signal N as 128 + N."""
    sig = -rc if rc < 0 else rc - 128 if traced and rc > 128 else 0
    try:
        return f"killed by {signal.Signals(sig).name}" if sig else f"exit {rc}"
    except ValueError:
        return f"exit {rc}"


def _run_child(
    cmd: list[str],
    progress: Progress,
    show: bool,
    stall: float,
    fds: Sequence[int] = (),
    root: bool = False,
    rtprio: int = 0,
) -> tuple[int, int, str, str | None]:
    """Run cmd in its own process group (a terminal's Ctrl-C reaches only us, and we pass
    it on once), as root if root (the tracer, a workload that needs root: the broker's under
    sudo), else with our rights; returns (exit code, signal we received or 0, its
    stdout+stderr, how it hung or None: no timed iteration for stall seconds, or none at all
    within max(stall, START_S) of its start). fds: the
    descriptors it inherits (the results directory, the progress counter). rtprio:
    --priority's RLIMIT_RTPRIO (root's to raise: the broker's under sudo)."""
    # The log is made here and handed over as a descriptor: under sudo, in the user's TMPDIR.
    with tempfile.TemporaryFile("w+") as log:
        start = privilege.popen_root if root or (rtprio and privilege.brokered()) else _popen_own
        try:
            child = start(
                cmd,
                rtprio=rtprio,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                process_group=0,
                pass_fds=fds,
            )
        except OSError as e:
            raise UsageError(f"cannot start {cmd[0]}: {e.strerror}") from None
        hung = None
        with _Signals(child) as sig:
            try:
                done, since = -1, time.monotonic()
                while True:
                    try:
                        rc = child.wait(timeout=POLL_S)
                        break
                    except subprocess.TimeoutExpired:
                        if show:
                            progress.update()
                    now, count = time.monotonic(), progress.done_count()
                    limit = stall if count > 0 else max(stall, START_S)
                    if count != done:
                        done, since = count, now
                    elif now - since > limit and not sig.signum:
                        hung = (
                            f"no iteration finished for {stall:g} s"
                            if count > 0
                            else f"no iteration finished within {limit:g} s of its start"
                        )
                        rc = _stop(child)
                        break
            finally:
                if child.poll() is None:
                    # We are failing ourselves: the driver must not outlive us.
                    child.terminate()
                    child.wait()
        log.seek(0)
        return rc, sig.signum, log.read(), hung


def _popen_own(cmd: list[str], rtprio: int = 0, **kw: Any) -> subprocess.Popen:
    """A program that runs with our rights (a workload as the user); rtprio as root."""
    return subprocess.Popen(cmd, preexec_fn=privilege.child_setup(rtprio), env=privilege.command_environment(), **kw)


def _stop(child: subprocess.Popen) -> int:
    """End a hung driver: SIGTERM lets it write what it has and tear down; if it does not
    react, SIGKILL its process group (the peers die with it: parent-death signal)."""
    child.terminate()
    try:
        return child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(child, "killpg"):
            child.killpg(signal.SIGKILL)
        else:
            os.killpg(child.pid, signal.SIGKILL)
    rc = child.wait()
    remove_dead_leftovers(quiet=True)
    return rc


def _finish(
    outdir: Path,
    info: dict[str, Any],
    opts: RunOptions,
    trace: bool,
    status: str,
    errtext: str,
    quiet: bool,
    stage: Stage = lambda text, done=None: None,
) -> RunSummary:
    """iterations.bin + workload.json -> iterations.parquet and summary.json; returns the summary."""
    from analysis.store.results import iteration_columns, read_workload

    try:
        wl = read_workload(outdir)
        metrics = wl["metrics"]
        # the iterations' columns in a temporary file beside the results: read a column at a time
        iters, warnings = iteration_columns(outdir / "iterations.bin", metrics, dir=outdir)
    except UsageError as e:
        raise MeasureError(f"the driver's output is unusable: {e}") from None
    except (KeyError, TypeError):
        raise MeasureError(f"{outdir / 'workload.json'} names no metrics") from None
    try:
        return _summarize(outdir, wl, iters, warnings, info, opts, trace, status, errtext, quiet, stage)
    finally:
        iters.close()


def _summarize(
    outdir: Path,
    wl: dict[str, Any],
    iters: IterationColumns,
    warnings: list[str],
    info: dict[str, Any],
    opts: RunOptions,
    trace: bool,
    status: str,
    errtext: str,
    quiet: bool,
    stage: Stage,
) -> RunSummary:
    from analysis.model import summary as summary_mod
    from analysis.store.jsonfiles import Workload
    from analysis.store.results import write_iterations, write_json

    metrics = wl["metrics"]
    warnings = list(wl.get("warnings", [])) + warnings
    if status == "complete" and wl.get("break"):
        status = "stopped"  # at --break-at: what was measured up to it
        b = wl["break"]
        warnings.append(
            f"stopped at --break-at: run {b['run']} iteration {b['iteration']} took {b['latency_ns'] / 1000:,.1f} us "
            f"(above {b['threshold_ns'] / 1000:,.1f} us)"
        )
    if status == "complete" and not opts.duration_s:
        want = opts.runs * opts.iterations
        counts = dict(zip(metrics, iters.counts().tolist()))
        primary = wl.get("primary_metric") or metrics[0]
        for m in metrics:
            # a metric another mode measures is absent by design, not short
            if counts.get(m, 0) != want and (m == primary or counts.get(m, 0)):
                warnings.append(f"{m}: {counts.get(m, 0)} of {want} timed iterations recorded")
    relayed = [line for line in errtext.splitlines() if line.strip() and line.strip() not in warnings]
    if relayed and not quiet:
        sys.stderr.write("\n".join(relayed) + "\n")
    stage("the iterations' statistics")
    write_iterations(outdir / "iterations.parquet", iters)
    params = {**opts.params(), "traced": trace, **wl.get("params", {})}
    if "size" not in info.get("flags", []):
        params.pop("size", None)  # a futex or a semaphore sends no message of any size
    derived = wl.get("derived", info.get("derived")) or {}
    s = summary_mod.build(Workload.from_json(wl), iters, derived, params, status, warnings, opts.iqr, host_info())
    if trace:
        from analysis.run import analyse_run  # pyarrow and the breakdown: imported when a run was traced

        s = analyse_run.finish(outdir, iters, s, stage)
    write_json(outdir / "summary.json", s.to_json())
    if not opts.keep_raw:
        # The parquet files hold every record (events a sixth, iterations half of the raw size):
        # the raw files go, unless kept.
        for raw in ("events.bin", "iterations.bin") if trace else ("iterations.bin",):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(outdir / raw)
    return s


def _fail(outdir: Path, meta: dict[str, Any], exc: BaseException) -> None:
    """Record why the run failed; INCOMPLETE stays."""
    from analysis.store.results import write_json

    meta.update(
        status="interrupted" if isinstance(exc, (Interrupted, KeyboardInterrupt)) else "failed",
        error=str(exc) or type(exc).__name__,
        end_time=now_iso(),
    )
    with contextlib.suppress(OSError):
        write_json(outdir / "meta.json", meta)


def _discard(rd: RunDir) -> None:
    """Remove what this run put into rd (the directory too if we made it and it is empty);
    never anything else, which another run or the user may have put there."""
    from analysis.store.results import INCOMPLETE

    for name in ("meta.json", INCOMPLETE):
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=rd.fd)
    if rd.created:
        with contextlib.suppress(OSError):
            os.rmdir(rd.shown)
