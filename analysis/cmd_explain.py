"""`ipctrace explain DIR`: the causal chain of one iteration of a traced run, event by event.

Each line is one kernel event of the workload's threads, with its time since the
iteration started: who entered or left which syscall, who woke whom (the wake-up),
how long a woken thread waited for a CPU, interrupts and preemptions. Then the
critical path (who worked on the message when) and the component totals of
analysis/breakdown.py for that iteration.
"""
import numpy as np

from analysis import breakdown as bd
from analysis import events as events_mod
from analysis import results
from analysis.errors import UsageError

# x86_64 numbers of the syscalls the workloads make; others print as "syscall N".
SYSCALLS = {
    0: "read", 1: "write", 7: "poll", 13: "rt_sigaction", 14: "rt_sigprocmask", 15: "rt_sigreturn",
    17: "pread64", 18: "pwrite64", 19: "readv", 20: "writev", 23: "select", 24: "sched_yield",
    35: "nanosleep", 39: "getpid", 41: "socket", 42: "connect", 43: "accept", 44: "sendto",
    45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 56: "clone", 57: "fork", 60: "exit", 61: "wait4",
    62: "kill", 64: "semget", 65: "semop", 66: "semctl", 68: "msgget", 69: "msgsnd", 70: "msgrcv",
    72: "fcntl", 110: "getppid", 186: "gettid", 202: "futex", 220: "semtimedop", 228: "clock_gettime",
    230: "clock_nanosleep", 231: "exit_group", 232: "epoll_wait", 233: "epoll_ctl", 240: "mq_open", 242: "mq_timedsend",
    243: "mq_timedreceive", 257: "openat", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait",
    284: "eventfd", 290: "eventfd2", 293: "pipe2", 299: "recvmmsg", 307: "sendmmsg", 435: "clone3",
    441: "epoll_pwait2",
}
SOFTIRQS = ("HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU")
STATE_WORDS = {"user": "user space", "syscall": "in a syscall", "copy": "copying data", "irq": "interrupt",
               "blocked": "nobody works (all blocked)", "sched_delay": "woken, waiting for a CPU",
               "preempted": "preempted, waiting for a CPU", "residual": "no known state"}


def register(subparsers):
    p = subparsers.add_parser("explain", help="the causal chain of one iteration of a traced run",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("dir", metavar="DIR", help="results directory of a traced run")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--iteration", type=int, metavar="K", help="iteration K (0-based) of the run given by --run")
    which.add_argument("--median", action="store_true", help="the iteration with the median latency (default)")
    which.add_argument("--p99", action="store_true", help="the iteration at the 99th percentile of latency")
    p.add_argument("--metric", metavar="M", help="metric to explain (default: the primary metric)")
    p.add_argument("--run", type=int, metavar="R", help="run index (default: all runs; 0 with --iteration)")


def _us(ns):
    return f"{ns / 1000:.3f} us"


def _syscall(nr):
    return f"{SYSCALLS[nr]}()" if nr in SYSCALLS else f"syscall {nr}"


def pick(iters, metric, args):
    """(row of iters, how it was chosen) for the options given."""
    sel = iters[iters["metric"].astype(str) == metric]
    if args.run is not None or args.iteration is not None:
        run = 0 if args.run is None else args.run
        sel = sel[sel["run"] == run]
        if sel.empty:
            raise UsageError(f"run {run} has no iterations of {metric} (runs: "
                             f"{sorted(set(iters['run'].tolist()))})")
    if sel.empty:
        raise UsageError(f"no iterations of {metric}")
    if args.iteration is not None:
        row = sel[sel["iteration"] == args.iteration]
        if row.empty:
            raise UsageError(f"no iteration {args.iteration} in run {run}: it has iterations "
                             f"{int(sel['iteration'].min())}..{int(sel['iteration'].max())}")
        return row.iloc[0], f"iteration {args.iteration}"
    lat = sel["latency_ns"].to_numpy()
    order = np.argsort(lat, kind="stable")
    if args.p99:
        k = min(len(lat) - 1, int(np.ceil(0.99 * len(lat))) - 1)
        return sel.iloc[order[k]], f"the 99th percentile of {len(lat)}"
    return sel.iloc[order[(len(lat) - 1) // 2]], f"the median of {len(lat)}"


class Names:
    """Short names of the workload's threads: A is the measuring one, B, C... its peers."""

    def __init__(self, sides):
        self.letter = {tid: chr(ord("A") + k) for k, (_, tid) in enumerate(sides)}

    def __call__(self, tid):
        tid = int(tid)
        if tid in self.letter:
            return self.letter[tid]
        return "idle" if tid == 0 else f"task {tid}"


def chain(ev, sides, s, e):
    """The lines of the event-by-event account of window [s, e); ev: breakdown.Events
    of events sorted by time."""
    name = Names(sides)
    tids = np.array([t for _, t in sides])
    kind_of = {code: kind for kind, code in ev.code.items()}
    types = [kind_of.get(c) for c in range(max(kind_of) + 1)]
    ts, tid, nxt, aux, a0, cpu = ev.ts, ev.tid, ev.next_tid, ev.aux, ev.a0, ev.cpu
    mine = np.isin(tid, tids) | ((ev.type == ev.code["switch"]) & np.isin(nxt, tids))
    lo, hi = np.searchsorted(ts, s, side="left"), np.searchsorted(ts, e, side="left")
    # What each thread was doing when the window opened: the last events before it.
    since = {}
    for _, t in sides:
        before = np.flatnonzero(mine[:lo] & ((tid[:lo] == t) | (nxt[:lo] == t)))
        since[t] = {"enter": None, "wake": None, "off": None, "runnable": False}
        for i in before[-8:]:
            _track(since[t], types[ev.type[i]], ts[i], tid[i] == t, aux[i])
    lines = [(0, "A", "reads the clock: the iteration starts")]
    for t in tids[1:]:
        st = since[t]
        if st["off"] is not None:
            how = ("is runnable (preempted), waiting for a CPU" if st["runnable"] else
                   "was woken and waits for a CPU" if st["wake"] is not None else "is blocked")
            lines.append((0, name(t), f"{how}; off CPU since {_us(s - st['off'])} before the start"))
    for i in range(lo, hi):
        if not mine[i]:
            continue
        rel = int(ts[i] - s)
        kind = types[ev.type[i]]
        who = name(tid[i])
        st = since.get(int(tid[i]))
        text = None
        if kind == "sys_enter":
            text = f"enters {_syscall(aux[i])}"
        elif kind == "sys_exit":
            took = f", {_us(ts[i] - st['enter'])} after it was entered" if st and st["enter"] is not None else ""
            text = f"{_syscall(aux[i])} returns {a0[i]}{took}"
        elif kind == "switch" and tid[i] in name.letter:
            if st is not None and st["wake"] is not None:
                text = f"leaves CPU {cpu[i]} although already woken: it waits to run again (switch to {name(nxt[i])})"
            elif aux[i] == 0:
                text = f"is preempted on CPU {cpu[i]} by {name(nxt[i])}"
            else:
                text = f"blocks and leaves CPU {cpu[i]} (switch to {name(nxt[i])})"
        elif kind == "waking":
            text = None
            lines.append((rel, name(a0[i] & 0xFFFFFFFF),
                          f"wake-up: wakes {who} (sched_waking, target CPU {aux[i]})"))
        elif kind in ("wakeup", "wakeup_new"):
            text = f"is queued to run on CPU {aux[i]} (sched_{kind})"
        elif kind == "migrate":
            text = f"migrates from CPU {a0[i]} to CPU {aux[i]}"
        elif kind == "irq_entry":
            text = f"interrupted by hard IRQ {aux[i]} on CPU {cpu[i]}"
        elif kind == "irq_exit":
            text = f"back from hard IRQ {aux[i]}"
        elif kind in ("softirq_entry", "softirq_exit"):
            vec = SOFTIRQS[aux[i]] if aux[i] < len(SOFTIRQS) else str(aux[i])
            text = f"{'runs' if kind == 'softirq_entry' else 'ends'} softirq {vec} on CPU {cpu[i]}"
        elif kind == "page_fault":
            text = f"page fault at {a0[i] & 0xFFFFFFFFFFFFFFFF:#x}"
        elif kind in ("func_entry", "func_exit"):
            fn = events_mod.FUNCS[aux[i] - 1] if 0 < aux[i] <= len(events_mod.FUNCS) else f"function {aux[i]}"
            text = f"{'enters' if kind == 'func_entry' else 'leaves'} {fn}"
        elif kind == "fork":
            text = f"forks task {a0[i] & 0xFFFFFFFF}"
        elif kind == "exit":
            text = "exits"
        if kind == "switch" and nxt[i] in name.letter:
            if text:
                lines.append((rel, who, text))
            w = since[int(nxt[i])]
            if w["wake"] is not None:
                text = f"on CPU {cpu[i]} after a {_us(ts[i] - w['wake'])} wake-up delay (sched_waking -> running)"
            elif w["off"] is not None:
                text = f"back on CPU {cpu[i]} after {_us(ts[i] - w['off'])} preempted (runnable, off CPU)"
            else:
                text = f"on CPU {cpu[i]}"
            who = name(nxt[i])
            _track(w, kind, ts[i], False, aux[i])
        elif st is not None:
            _track(st, kind, ts[i], True, aux[i])
        if text:
            lines.append((rel, who, text))
    lines.append((e - s, "A", f"reads the clock: the iteration ends after {_us(e - s)}"))
    return lines


def _track(st, kind, t, own, aux):
    """Update what a thread is doing: open syscall, pending wake-up, when and how it left the CPU.
    own: the event is the thread's own (for a switch: it is switched out, else in). A wake-up
    may come just before the thread leaves the CPU (it had set itself sleeping): it stays pending."""
    if kind == "sys_enter":
        st["enter"] = t
    elif kind == "sys_exit":
        st["enter"] = None
    elif kind == "switch" and own:
        st["off"], st["runnable"] = t, aux == 0 and st["wake"] is None
    elif kind == "switch":
        st["off"], st["wake"], st["runnable"] = None, None, False
    elif kind in ("waking", "wakeup", "wakeup_new") and st["wake"] is None and not st["runnable"]:
        st["wake"] = t


def path_segments(tls, names, s, e):
    """Critical-path segments in [s, e): (start, end, who, state name)."""
    ts, crit, _, who = bd.critical_states(tls)
    i = np.searchsorted(ts, s, side="right") - 1
    j = np.searchsorted(ts, e, side="left")
    idx = np.arange(i, j)
    points = np.concatenate(([s], ts[i + 1:j]))
    state = np.where(idx >= 0, crit[np.maximum(idx, 0)], bd.UNKNOWN) if len(ts) else [bd.UNKNOWN]
    whom = np.where(idx >= 0, who[np.maximum(idx, 0)], 0) if len(ts) else [0]
    segs = []
    for p, q, w, c in zip(points, np.append(points[1:], e), whom, state):
        label = (names[w], bd.STATE_NAMES[c])
        if segs and segs[-1][2:] == label:
            segs[-1] = (segs[-1][0], q) + label
        else:
            segs.append((p, q) + label)
    return segs


def run(args):
    resdir = results.check_results_dir(args.dir)
    if not (resdir / "events.parquet").exists():
        raise UsageError(f"{resdir} was not traced (no events.parquet): run it without --no-trace")
    summary = results.read_summary(resdir)
    workload = results.read_workload(resdir)
    iters = results.read_iterations(resdir)
    metrics = [str(m) for m in workload.get("metrics") or iters["metric"].astype(str).unique()]
    metric = args.metric or summary.get("primary_metric") or metrics[0]
    if metric not in metrics:
        raise UsageError(f"{resdir} has no metric {metric!r} (it has {', '.join(metrics)})")
    row, how = pick(iters, metric, args)
    ev = events_mod.read_parquet(resdir)
    s, e, tid = int(row["t_start_ns"]), int(row["t_end_ns"]), int(row["tid"])
    ev_obj = bd.Events(ev)
    sides = bd.sides_of(workload, tid)
    everyone = sides + bd.other_threads(ev_obj, workload, sides)

    one = iters.loc[[row.name]]
    frame, info = bd.compute(one, ev, workload, arch=(summary.get("host") or {}).get("machine") or "x86_64")
    f = frame.iloc[0]
    names = Names(everyone)
    legend = ", ".join(f"{names(t)} = {'other thread of the workload' if role == 'thread' else role} "
                       f"(tid {t}{_cpu_of(workload, t)})" for role, t in everyone)
    out = [f"{summary.get('workload')} {metric}, run {int(row['run'])} iteration {int(row['iteration'])} "
           f"({how}): {_us(e - s)}",
           legend, "", "time since start  who  what"]
    for rel, who, text in chain(ev_obj, everyone, s, e):
        out.append(f"  {'+' + _us(rel):>14}  {who:<3}  {text}")

    tls = [bd.thread_timeline(ev_obj, t) for _, t in everyone]
    out += ["", "critical path (who works on the message, and how):" if len(everyone) > 1 else
            "where the time went:"]
    for p, q, who, state in path_segments(tls, [names(t) for _, t in everyone], s, e):
        out.append(f"  {'+' + _us(p - s):>14} .. {'+' + _us(q - s):>14}  {who:<3} {STATE_WORDS[state]:<30} {_us(q - p):>12}")

    lat = e - s
    out += ["", "components of this iteration (critical path):"]
    for c in bd.COMPONENTS:
        v = f[c]
        note = ""
        if c == "copy" and not info["copy_measured"]:
            note = f"  estimated from {int(f['copy_bytes'])} bytes moved, not measured"
        out.append(f"  {c:<12} {_us(v):>12}  {100 * v / lat:5.1f} %{note}")
    measured = sum(f[c] for c in bd.MEASURED)
    out.append(f"  {'sum':<12} {_us(measured):>12}  {100 * measured / lat:5.1f} % of the measured {_us(lat)}")
    for role in info["roles"]:
        parts = ", ".join(f"{c} {_us(f[f'{role}.{c}'])}" for c in bd.COMPONENTS if f[f"{role}.{c}"] > 0)
        out.append(f"  {role} side alone: {parts}")
    if not info["critical_path"]:
        out.append("  (one thread only: no critical path across sides)")
    label = _tail_label(resdir, row)
    if label:
        out.append(f"  above p99 of {metric}; in its window: {label.replace(',', ', ')}")
    print("\n".join(out))
    return 0


def _cpu_of(workload, tid):
    for t in workload.get("threads") or []:
        if int(t.get("tid") or -1) == tid and t.get("cpu", -1) >= 0:
            return f", CPU {t['cpu']}"
    return ""


def _tail_label(resdir, row):
    """The tail labels breakdown.parquet gave this iteration, "" if none or no file."""
    t = results.read_breakdown(resdir, columns=["run", "iteration", "metric", "tail"])
    if t is None:
        return ""
    hit = t[(t["run"] == row["run"]) & (t["iteration"] == row["iteration"])
            & (t["metric"].astype(str) == str(row["metric"]))]
    return "" if hit.empty else str(hit["tail"].iloc[0])
