"""Running one workload: the driver (optionally under the tracer) into a results directory.

run_workload() is what run, suite, sweep and bench share. The directory holds
INCOMPLETE until everything is written; after a failure it keeps the marker
and meta.json says "failed". SIGINT/SIGTERM are passed to the driver, which
stops and writes what it measured; we then finish the directory, mark it
"interrupted" and raise Interrupted (exit 130/143). A driver whose count of
timed iterations stands still for IPCTRACE_STALL_S seconds (default 60) hangs:
it is stopped and the run fails (exit 1). Under sudo the workload runs as the
invoking user (SUDO_UID/SUDO_GID), unless it needs root (flag needs_root), and
the results directory is given to them.
"""
import ctypes
import datetime
import difflib
import functools
import importlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analysis import DRIVER, HOME, LOADER, cmd_clean, summary as summary_mod
from analysis.errors import Interrupted, MeasureError, UsageError
from analysis.options import check_out_dir, online_cpus
from analysis.progress import Progress
from analysis.results import INCOMPLETE, read_iterations_bin, read_json, write_iterations, write_json

POLL_S = 0.2
PR_SET_PDEATHSIG = 1
STALL_S = 60        # default: no timed iteration finished for this long = the workload hangs
STOP_GRACE_S = 5    # after SIGTERM, how long a hung driver gets to write what it measured


def require_driver():
    if not os.access(DRIVER, os.X_OK):
        raise UsageError(f"the workload driver {DRIVER} is not built; run 'make' in {HOME}")


@functools.cache
def catalog():
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


def workload_info(name):
    """The catalog entry of name; an unknown name suggests the closest one."""
    table = {w["name"]: w for w in catalog()}
    if name in table:
        return table[name]
    close = difflib.get_close_matches(name, table, n=1, cutoff=0.5)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise UsageError(f"unknown workload '{name}'; {hint}(ipctrace list)")


def check_options(info, opts):
    """What the workload cannot do with opts, as a UsageError before anything starts."""
    name, flags = info["name"], set(info.get("flags", []))
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


def version():
    try:
        p = subprocess.run(["git", "-C", str(HOME), "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else "unknown"


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def default_outdir(name):
    base = Path("results") / f"{name}-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


def create_outdir(path):
    """Create path (and parents); returns whether we created the directory itself."""
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / INCOMPLETE).write_text("a run is writing this directory or ended before finishing it\n")
    except OSError as e:
        raise UsageError(f"cannot create results directory {path}: {e.strerror}") from None
    return created


def _die_with_parent():
    """In the child before exec (after any change of user, which clears it): SIGTERM
    when ipctrace dies, even by SIGKILL."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def stall_seconds():
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


def invoking_user():
    """(uid, gid) of the user who ran us through sudo, None as plain root or as a user:
    the workload then runs as that user and the results become theirs."""
    if os.geteuid() != 0 or "SUDO_UID" not in os.environ:
        return None
    try:
        uid = int(os.environ["SUDO_UID"])
        gid = int(os.environ.get("SUDO_GID", uid))
    except ValueError:
        raise UsageError(f"SUDO_UID={os.environ['SUDO_UID']!r}, SUDO_GID={os.environ.get('SUDO_GID', '')!r}: "
                         f"not numeric user and group ids") from None
    return None if uid == 0 else (uid, gid)


def _groups_of(uid, gid):
    import pwd

    try:
        return os.getgrouplist(pwd.getpwuid(uid).pw_name, gid)
    except KeyError:
        return [gid]


def _give(path, user):
    """chown -R path to user (uid, gid); symlinks themselves, never their targets."""
    uid, gid = user
    if not os.path.lexists(path):
        return
    os.lchown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, gid)


def _first_missing(path):
    """The outermost directory of path that does not exist yet (None if path exists)."""
    path = Path(path).absolute()
    if path.exists():
        return None
    while not path.parent.exists():
        path = path.parent
    return path


def remove_dead_leftovers(quiet):
    """What runs that died (SIGKILL, power loss) left behind goes before a new run starts."""
    removed, failed = cmd_clean.remove(cmd_clean.leftovers(cmd_clean.places()))
    if removed and not quiet:
        print(f"ipctrace: removed {len(removed)} IPC objects left by runs that died", file=sys.stderr)
    for p, why in failed:
        print(f"ipctrace: cannot remove {p}, left by a run that died: {why}", file=sys.stderr)


def tracing_finish():
    """analysis.tracing.finish if that module exists (it adds "trace" and "breakdown")."""
    try:
        mod = importlib.import_module("analysis.tracing")
    except ModuleNotFoundError as e:
        if e.name == "analysis.tracing":
            return None
        raise
    return mod.finish


class _Signals:
    """While the driver runs: remember SIGINT/SIGTERM and pass them on to it."""

    def __init__(self, child):
        self.child, self.signum, self.saved = child, 0, {}

    def __enter__(self):
        for s in (signal.SIGINT, signal.SIGTERM):
            self.saved[s] = signal.signal(s, self.handle)
        return self

    def handle(self, signum, frame):
        self.signum = self.signum or signum
        try:
            self.child.send_signal(signum)
        except ProcessLookupError:
            pass

    def __exit__(self, *exc):
        for s, h in self.saved.items():
            signal.signal(s, h)


def _last_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    for prefix in ("ipcbench: ", "ipctrace-loader: ", "ipctrace: "):
        if last.startswith(prefix):
            last = last[len(prefix):]
    return last


CALIBRATION_DIR = "untraced"   # run --calibrate: the untraced twin of a traced run


def run_workload(name, opts, outdir=None, trace=True, quiet=False):
    """Measure workload name with RunOptions opts into outdir; returns the results directory."""
    info = workload_info(name)
    check_options(info, opts)
    if trace and not os.access(LOADER, os.X_OK):
        raise UsageError(f"tracing is not built ({LOADER} is missing); use --no-trace")
    user = invoking_user()
    stall = stall_seconds()
    outdir = check_out_dir(outdir) if outdir else default_outdir(name)
    remove_dead_leftovers(quiet)
    top = _first_missing(outdir)
    created = create_outdir(outdir)
    # Workloads that make namespaces or load BPF themselves stay root; their results are still given.
    run_as = None if "needs_root" in info.get("flags", []) else user
    try:
        result = _measure(name, info, opts, outdir, created, trace, quiet, run_as, stall)
        if trace and opts.calibrate:
            _calibrate(name, info, opts, outdir, quiet, run_as, stall)
    finally:
        if user:
            try:
                _give(top or outdir, user)
            except OSError as e:
                print(f"ipctrace: cannot give {top or outdir} to uid {user[0]}: {e.strerror}", file=sys.stderr)
    return result


def _measure(name, info, opts, outdir, created, trace, quiet, user, stall):
    """The driver (under the tracer if trace) into the created outdir, then its files."""
    drv = [str(DRIVER), "run", name, "--out", str(outdir), *opts.driver_args()]
    meta = {"command": ["ipctrace", *sys.argv[1:]], "command_line": shlex.join(["ipctrace", *sys.argv[1:]]),
            "cwd": os.getcwd(), "version": version(), "start_time": now_iso(),
            "clock_source": "CLOCK_MONOTONIC", "traced": trace, "status": "running"}
    try:
        write_json(outdir / "meta.json", meta)
        # The counter file feeds the progress bar and tells a hung workload from a slow one.
        progress = Progress(outdir / ".progress", opts.runs * opts.iterations, name)
        drv += ["--progress", str(outdir / ".progress")]
        show = not quiet and sys.stderr.isatty()
        sampler = ["--sample-hz", str(opts.sample_hz)] if opts.sample_hz else []
        ringbuf = ["--ringbuf-mb", f"{opts.ringbuf_mb:g}"] if opts.ringbuf_mb else []
        as_user = ["--user", f"{user[0]}:{user[1]}"] if user else []
        cmd = [str(LOADER), "--out", str(outdir), *sampler, *ringbuf, *as_user, "--", *drv] if trace else drv
        meta["driver_command"] = cmd
        if user:
            _give(outdir, user)
        rc, signum, errtext, hung = _run_child(cmd, progress, show, stall, None if trace else user)
        meta["driver_exit"] = rc
        if hung:
            raise MeasureError(f"{name}: the workload hangs: no iteration finished for {stall:g} s; "
                               f"stopped it (see {outdir})")
    except BaseException as e:
        _fail(outdir, meta, e)
        raise

    if rc == 2 and not signum:
        # Rejected before measuring: leave no half-made directory behind.
        _discard(outdir, created)
        raise UsageError(_last_line(errtext) or f"{name}: the driver rejected the options (exit 2)")
    if not signum and rc in (130, 143):
        signum = rc - 128
    try:
        if rc not in (0, 130, 143) and not signum:
            why = _last_line(errtext) or _exit_text(rc, trace)
            raise MeasureError(f"{name}: measurement failed: {why}")
        if signum and not (outdir / "iterations.bin").exists():
            raise Interrupted(signum, f"interrupted before anything was measured; see {outdir}")
        status = "interrupted" if signum else "complete"
        _finish(outdir, info, opts, trace, status, errtext, quiet)
        meta.update(status=status, end_time=now_iso())
        write_json(outdir / "meta.json", meta)
    except BaseException as e:
        _fail(outdir, meta, e)
        raise
    (outdir / INCOMPLETE).unlink()
    if signum:
        err = Interrupted(signum, f"interrupted by {signal.Signals(signum).name}; what was measured is in {outdir}")
        err.resdir = outdir
        raise err
    return outdir


def _calibrate(name, info, opts, outdir, quiet, user, stall):
    """The same run untraced, right after the traced one, into outdir/untraced; summary.json
    gains probe_effect: per metric, the traced and untraced medians and their ratio."""
    plain = outdir / CALIBRATION_DIR
    try:
        _measure(name, info, opts, plain, create_outdir(plain), False, quiet, user, stall)
    except Interrupted as e:
        # The traced run is whole: it is what the user gets, without a probe effect.
        err = Interrupted(e.signum, f"interrupted during the untraced run of --calibrate; the traced results "
                                    f"are complete in {outdir}")
        err.resdir = outdir
        raise err from None
    s = read_json(outdir / "summary.json")
    s["probe_effect"] = probe_effect(s["metrics"], read_json(plain / "summary.json")["metrics"])
    write_json(outdir / "summary.json", s)


def probe_effect(traced, untraced):
    """Per measured metric: medians with their 95 % intervals and traced/untraced, whose interval
    comes from the two medians' intervals (the ratio of the far ends: conservative)."""
    out = {"untraced_dir": CALIBRATION_DIR, "metrics": {}}
    for m, t in traced.items():
        u = untraced.get(m)
        if not u or t.get("derived") or not u.get("median"):
            continue
        tlo, thi = t.get("ci95_median") or (None, None)   # none below 6 iterations
        ulo, uhi = u.get("ci95_median") or (None, None)
        known = None not in (tlo, thi, ulo, uhi) and ulo > 0
        out["metrics"][m] = {"traced_median": t["median"], "untraced_median": u["median"],
                             "ratio": t["median"] / u["median"],
                             "ratio_ci95": [tlo / uhi, thi / ulo] if known else None,
                             "unit": t.get("unit", "ns")}
    return out


def _exit_text(rc, traced):
    """What an exit status says; the tracer passes on a driver killed by signal N as 128 + N."""
    sig = -rc if rc < 0 else rc - 128 if traced and rc > 128 else 0
    try:
        return f"killed by {signal.Signals(sig).name}" if sig else f"exit {rc}"
    except ValueError:
        return f"exit {rc}"


def _run_child(cmd, progress, show, stall, user):
    """Run cmd in its own process group (a terminal's Ctrl-C reaches only us, and we pass
    it on once), as user (uid, gid) if given; returns (exit code, signal we received or 0,
    its stdout+stderr, whether it hung: no timed iteration for stall seconds)."""
    ids = {}
    if user:
        ids = dict(user=user[0], group=user[1], extra_groups=_groups_of(*user))
    with tempfile.TemporaryFile("w+") as log:
        try:
            child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     process_group=0, preexec_fn=_die_with_parent, **ids)
        except OSError as e:
            raise UsageError(f"cannot start {cmd[0]}: {e.strerror}") from None
        hung = False
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
                    if count != done:
                        done, since = count, now
                    elif now - since > stall and not hung and not sig.signum:
                        hung = True
                        rc = _stop(child)
                        break
            finally:
                progress.close()
                if child.poll() is None:
                    # We are failing ourselves: the driver must not outlive us.
                    child.terminate()
                    child.wait()
        log.seek(0)
        return rc, sig.signum, log.read(), hung


def _stop(child):
    """End a hung driver: SIGTERM lets it write what it has and tear down; if it does not
    react, SIGKILL its process group (the peers die with it: parent-death signal)."""
    child.terminate()
    try:
        return child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    rc = child.wait()
    remove_dead_leftovers(quiet=True)
    return rc


def _finish(outdir, info, opts, trace, status, errtext, quiet):
    """iterations.bin + workload.json -> iterations.parquet and summary.json."""
    try:
        wl = read_json(outdir / "workload.json")
        metrics = wl["metrics"]
        iters, warnings = read_iterations_bin(outdir / "iterations.bin", metrics)
    except UsageError as e:
        raise MeasureError(f"the driver's output is unusable: {e}") from None
    except (KeyError, TypeError):
        raise MeasureError(f"{outdir / 'workload.json'} names no metrics") from None
    warnings = list(wl.get("warnings", [])) + warnings
    if status == "complete":
        want = opts.runs * opts.iterations
        counts = iters["metric"].value_counts()
        primary = wl.get("primary_metric") or metrics[0]
        for m in metrics:
            # a metric another mode measures is absent by design, not short
            if counts.get(m, 0) != want and (m == primary or counts.get(m, 0)):
                warnings.append(f"{m}: {counts.get(m, 0)} of {want} timed iterations recorded")
    relayed = [line for line in errtext.splitlines() if line.strip() and line.strip() not in warnings]
    if relayed and not quiet:
        sys.stderr.write("\n".join(relayed) + "\n")
    write_iterations(outdir / "iterations.parquet", iters)
    params = {**opts.params(), "traced": trace, **wl.get("params", {})}
    derived = wl.get("derived", info.get("derived")) or {}
    s = summary_mod.build(wl, iters, derived, params, status, warnings, opts.iqr)
    if trace:
        finish = tracing_finish()
        if finish:
            s = finish(outdir, iters, s)
        else:
            s["warnings"].append("events were recorded (events.bin) but this ipctrace cannot decode them")
    write_json(outdir / "summary.json", s)


def _fail(outdir, meta, exc):
    """Record why the run failed; INCOMPLETE stays."""
    meta.update(status="interrupted" if isinstance(exc, (Interrupted, KeyboardInterrupt)) else "failed",
                error=str(exc) or type(exc).__name__, end_time=now_iso())
    try:
        write_json(outdir / "meta.json", meta)
    except OSError:
        pass


def _discard(outdir, created):
    """Remove what this run put into outdir (the directory too if we made it)."""
    if created:
        shutil.rmtree(outdir, ignore_errors=True)
        return
    for p in outdir.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
