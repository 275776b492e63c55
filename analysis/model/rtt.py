"""Request/response round trips of a program nobody instrumented, from its system calls
(`ipctrace trace --rtt`).

A round trip is, on one thread, the window from the entry of a system call that sends to
the return of the first later call that brings an answer:
- sends: write, writev, pwrite64, sendto, sendmsg, mq_timedsend, and a futex call during
  which the thread woke another task (FUTEX_WAKE: the tracer records only a call's first
  argument, so the operation is told by what the call did);
- answers: read, readv, pread64, recvfrom, recvmsg, mq_timedreceive that returned data
  (a return value above 0), and a futex call during which the thread blocked (FUTEX_WAIT
  that slept);
- the channel: a descriptor the thread both sends and receives on (a socket: UNIX, TCP,
  socketpair) pairs only with itself, so one thread's many connections (a server's
  clients, an event loop) each give their own round trips; descriptors used one way only
  (the two ends of a pair of pipes, two message queues, eventfd) pair up when their calls
  interleave, each sent-on one with the received-on one whose count of calls is closest;
  futexes are one channel;
- who asks: a thread whose first call on the channel sends (the client). The thread that
  first receives (the server, the echoing peer) answers; its own send -> receive windows
  are the time until the next request, not a round trip, and are not counted;
- each request counted once, from the side that asks: where the trace begins in the middle of
  a conversation (--pid, --comm) neither side's first call tells who asked, and each side's
  send -> receive looks like a round trip (the client's request -> answer, the server's answer
  -> next request). Two threads answer each other where most windows of each begin inside a
  window of the other (one_side_each); then one side asks: the one whose process was named
  (--pid) and not the other's, else the parent of the other (the process that forked it),
  else the older process (the lower pid); `trace --measure PID` chooses instead;
- descriptors 0, 1 and 2 are left out (a program's own output is not a request).
Calls that wait without moving data (poll, select, epoll_wait) may lie inside a window:
they are part of the wait for the answer. A send while a window is open on its channel
does not start another (a request written in several parts)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.model import decoded
from analysis.store import syscalls

SEND_CALLS = ("write", "writev", "pwrite64", "sendto", "sendmsg", "mq_timedsend")
RECEIVE_CALLS = ("read", "readv", "pread64", "recvfrom", "recvmsg", "mq_timedreceive")
STDIO_FDS = 3  # descriptors below this are the program's standard streams
SEQUENTIAL = -1  # the channel of descriptors used one way only, and of futexes


def _count_within(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many of the sorted times ts fall in each [start, end]."""
    return np.searchsorted(ts, ends, "right") - np.searchsorted(ts, starts, "left")


def classify(calls: decoded.Calls, arch: str, woke: np.ndarray, slept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(is_send, is_answer) per call. woke, slept: sorted times at which the thread woke
    another task / was switched out asleep."""
    send_nrs = list(syscalls.numbers(arch, SEND_CALLS))
    recv_nrs = list(syscalls.numbers(arch, RECEIVE_CALLS))
    futex = list(syscalls.numbers(arch, ("futex",)))
    data_fd = (calls.arg >= STDIO_FDS) & (calls.arg < FD_LIMIT)
    is_send = np.isin(calls.nr, send_nrs) & data_fd
    is_answer = np.isin(calls.nr, recv_nrs) & data_fd & (calls.ret > 0)
    if futex:
        f = calls.nr == futex[0]
        slept_in = _count_within(slept, calls.enter, calls.exit) > 0
        woke_in = _count_within(woke, calls.enter, calls.exit) > 0
        is_answer |= f & slept_in
        is_send |= f & woke_in & ~slept_in
    return is_send, is_answer


FD_LIMIT = 1 << 20  # descriptors are below this; a futex's first argument (an address) is not
FUTEX_CHANNEL = -1
NO_CHANNEL = -2
NO_TIMES = np.zeros(0, np.int64)


def descriptor_keys(calls: decoded.Calls, closes: dict[int, np.ndarray], execs: np.ndarray) -> np.ndarray:
    """Each call's descriptor told apart from the same number before a close() of it in its
    process (closes: fd -> sorted times of close(fd) there) and before the thread's last
    exec (execs: sorted times of its successful execve: a new program, a new conversation):
    fd + FD_LIMIT * (closes before + execs before * 2^20)."""
    keys = calls.arg.copy()
    fd = calls.arg < FD_LIMIT
    generation = np.searchsorted(execs, calls.enter, "right") << 20
    for d, ts in closes.items():
        on = calls.arg == d
        if on.any():
            generation[on] += np.searchsorted(ts, calls.enter[on], "right")
    keys[fd] += FD_LIMIT * generation[fd]
    return keys


def channels(
    keys: np.ndarray, is_futex: np.ndarray, is_send: np.ndarray, is_answer: np.ndarray, when: np.ndarray
) -> np.ndarray:
    """The channel of each call. A descriptor the thread both sends and receives on (a
    socket) is a channel of its own (its key). Descriptors used one way only pair up: each
    one sent on with the one received on whose count of calls comes closest to its own (the
    two pipes of a ping-pong), as channel -3, -4, ...; futexes are FUTEX_CHANNEL; the rest
    (files, a descriptor with no partner) NO_CHANNEL."""
    out = np.full(len(keys), NO_CHANNEL, np.int64)
    out[is_futex & (is_send | is_answer)] = FUTEX_CHANNEL
    fd = ~is_futex
    sent, n_sent = np.unique(keys[is_send & fd], return_counts=True)
    got, n_got = np.unique(keys[is_answer & fd], return_counts=True)
    duplex = np.intersect1d(sent, got)
    on_duplex = fd & np.isin(keys, duplex)
    out[on_duplex] = keys[on_duplex]
    one_way = ~np.isin(got, duplex)
    got, n_got = got[one_way], n_got[one_way]
    next_id = -3
    for k, n in zip(sent, n_sent):
        if k in duplex or not len(got):
            continue
        # the received-on descriptors whose calls interleave with these sends (a file written
        # at the start and another read at the end are no conversation)
        t_sent = when[is_send & fd & (keys == k)]
        near = np.array(
            [_interleave(t_sent, when[is_answer & fd & (keys == g)]) and _same_program(k, g) for g in got],
            bool,
        )

        if not near.any():
            continue
        j = int(np.flatnonzero(near)[np.argmin(np.abs(n_got[near] - n))])
        if min(n, n_got[j]) * 2 < max(n, n_got[j]):
            continue  # no receive as frequent as these sends: not a conversation
        out[fd & (((keys == k) & is_send) | ((keys == got[j]) & is_answer))] = next_id
        got, n_got = np.delete(got, j), np.delete(n_got, j)
        next_id -= 1
    return out


def _same_program(a: int, b: int) -> bool:
    """Whether two descriptor keys belong to the same exec of the thread's program."""
    return a // (FD_LIMIT << 20) == b // (FD_LIMIT << 20)


def _interleave(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two sorted series of times overlap (a conversation goes back and forth); one
    of a single call (one request, one answer) overlaps whatever comes after it."""
    if not len(a) or not len(b):
        return False
    if len(a) == 1 or len(b) == 1:
        return True
    return bool(a[0] < b[-1] and b[0] < a[-1])


def windows_of(is_send: np.ndarray, is_answer: np.ndarray, from_start: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(first send, answer) call indices of one channel's round trips: for each answer, the
    first send after the previous answer, when there is one before it. from_start: the
    channel's first call is its first ever, and if it receives, this thread answers and
    asks nothing; otherwise answers before the first send are passed over."""
    sends = np.flatnonzero(is_send)
    answers = np.flatnonzero(is_answer)
    if not len(sends) or not len(answers):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if answers[0] < sends[0]:
        if from_start:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)  # this thread answers, it does not ask
        answers = answers[answers > sends[0]]
        if not len(answers):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
    prev = np.concatenate(([-1], answers[:-1]))
    first = np.searchsorted(sends, prev, "right")
    has = first < len(sends)
    first_send = np.where(has, sends[np.minimum(first, len(sends) - 1)], np.iinfo(np.int64).max)
    keep = has & (first_send < answers)
    return first_send[keep], answers[keep]


# Calls that return a new descriptor: one seen made within the trace has no earlier history.
CREATE_CALLS = (
    "socket",
    "accept",
    "accept4",
    "open",
    "openat",
    "openat2",
    "creat",
    "eventfd",
    "eventfd2",
    "mq_open",
    "dup",
    "dup2",
    "dup3",
    "memfd_create",
)


def round_trips(
    ev: pd.DataFrame, arch: str, tids: list[int] | None = None, born: set[int] | None = None
) -> pd.DataFrame:
    """The round trips of every thread (or of tids) as iterations (store/results.py's
    columns: run 0, metric "rtt", numbered in time order).

    born: the threads whose whole life the trace saw (started or forked within it; None:
    all). On a channel the trace saw from its start (such a thread's, or a descriptor whose
    making it saw), the side whose first call receives answers and asks nothing; on one
    that predates the trace (a process traced by --pid in mid-conversation) the first calls
    may answer a request sent before: leading answers are passed over and the thread asks
    from its first send."""
    events = decoded.Events(ev)
    sys_rows = decoded.sys_rows(events)
    all_calls = decoded.calls(events)
    # each thread with system call records: the pid of its first
    firsts = sys_rows[np.r_[True, events.tid[sys_rows][1:] != events.tid[sys_rows][:-1]]] if len(sys_rows) else sys_rows
    pid_of = dict(zip(events.tid[firsts].tolist(), events.pid[firsts].tolist()))
    closes = _per_fd(events, arch, ("close",), "sys_enter")
    made = _per_fd(events, arch, CREATE_CALLS, "sys_exit")
    # per process, the times each descriptor number was made, or closed (so made again), in the trace
    seen = {
        pid: {
            fd: np.concatenate([made.get(pid, {}).get(fd, NO_TIMES), closes.get(pid, {}).get(fd, NO_TIMES)])
            for fd in made.get(pid, {}).keys() | closes.get(pid, {}).keys()
        }
        for pid in made.keys() | closes.keys()
    }
    woken = decoded.wakeups(events, ("waking",))
    sw = decoded.switches(events)
    asleep = sw.prev_state != 0
    execve = list(syscalls.numbers(arch, ("execve", "execveat")))
    futex = list(syscalls.numbers(arch, ("futex",)))
    found = []
    answering = []  # (tid, its calls, channel mask): seen from the start, its first call receives
    for tid in sorted(pid_of) if tids is None else tids:
        if tid not in pid_of:
            continue
        calls = all_calls.of_thread(tid)
        if not len(calls.nr):
            continue
        woke = np.sort(woken.ts[woken.waker == tid])
        slept = np.sort(sw.ts[asleep & (sw.prev_tid == tid)])
        is_send, is_answer = classify(calls, arch, woke, slept)
        pid = int(pid_of[tid])
        execs = np.sort(calls.exit[np.isin(calls.nr, execve) & (calls.ret == 0)])
        keys = descriptor_keys(calls, closes.get(pid, {}), execs)
        chan = channels(keys, np.isin(calls.nr, futex), is_send, is_answer, calls.enter)
        whole_life = born is None or tid in born
        for c in np.unique(chan[(is_send | is_answer) & (chan != NO_CHANNEL)]):
            on = chan == c
            first_call = int(np.flatnonzero(on & (is_send | is_answer))[0])
            from_start = whole_life or _made_before(
                seen.get(pid, {}), calls.arg[first_call], calls.enter[first_call], c
            )
            s, a = windows_of(is_send & on, is_answer & on, from_start)
            if len(s):
                found.append((tid, calls.enter[s], calls.exit[a], calls.cpu[s]))
            elif from_start and is_answer[first_call]:
                answering.append((tid, calls, is_send & on, is_answer & on))
    for tid, calls, sends, answers in _first_send_lost(answering):
        s, a = windows_of(sends, answers, from_start=False)
        if len(s):
            found.append((tid, calls.enter[s], calls.exit[a], calls.cpu[s]))
    if not found:
        return empty_iterations()
    tid_v = np.concatenate([np.full(len(s), tid, np.int64) for tid, s, _, _ in found])
    start = np.concatenate([s for _, s, _, _ in found])
    end = np.concatenate([e for _, _, e, _ in found])
    cpu = np.concatenate([c for _, _, _, c in found])
    return as_iterations(start, end, tid_v, cpu, np.zeros(len(start), np.int64), ["rtt"])


ALTERNATE = 0.8  # the share of one side's answers with exactly one send of the other's before each


def _answers_after_sends(sends: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """The answers (sorted times) that end a wait: the first after each of the thread's sends,
    and the first of all (several reads of one message are one answer)."""
    if not len(answers):
        return answers
    first = np.zeros(len(answers), bool)  # the first answer after each send (sends sorted)
    first[0] = True
    i = np.searchsorted(answers, sends, "right")
    first[i[i < len(answers)]] = True
    return answers[first]


def _first_send_lost(answering: list[tuple]) -> list[tuple]:
    """Of the channels seen from their start whose first call receives (answering: (tid, calls,
    sends mask, answers mask)), those of a client whose first request the trace lost (a lost
    record; a client's first send is its channel's first call). A client and its server then
    both begin by receiving: the server the first request, the client the first answer, after
    it. So of two such threads whose calls alternate (between two answers of one, one send of
    the other, both ways), the one whose first answer comes later asks."""
    out: list = []
    taken: set[int] = set()
    sides = []
    for tid, calls, sends, answers in answering:
        sent = np.sort(calls.enter[sends])
        got = _answers_after_sends(sent, np.sort(calls.exit[answers]))
        sides.append((tid, sent, got))

    def alternate(sent: np.ndarray, got: np.ndarray) -> bool:
        if len(got) < 2 or not len(sent):
            return False
        between = np.diff(np.searchsorted(sent, got))
        return bool((between == 1).mean() >= ALTERNATE)

    for i, (x, sx, gx) in enumerate(sides):
        for j, (y, sy, gy) in enumerate(sides[i + 1 :], i + 1):
            if i in taken or j in taken or x == y or not (alternate(sy, gx) and alternate(sx, gy)):
                continue
            client = i if gx[0] > gy[0] else j
            taken.update((i, j))
            out.append(answering[client])
    return out


def _made_before(made: dict[int, np.ndarray], fd: int, first_use: int, channel: int) -> bool:
    """Whether a call that returned descriptor fd (in this process) came before its first
    use on the channel, i.e. the trace saw the channel from its start (a socket's channel
    only: a pipe's descriptors come back in an array, unseen)."""
    if channel < 0:
        return False
    ts = made.get(int(fd))
    return ts is not None and bool((ts <= first_use).any())


def _per_fd(ev: decoded.Events, arch: str, names: tuple[str, ...], kind: str) -> dict[int, dict[int, np.ndarray]]:
    """pid -> fd -> sorted times of the records of the calls `names` (their sys_enter with the
    descriptor as first argument, or their sys_exit returning it: kind)."""
    nr = list(syscalls.numbers(arch, names))
    i = ev.of(kind)
    fd = (ev.arg if kind == "sys_enter" else ev.ret)[i]
    m = np.isin(ev.nr[i], nr) & (fd >= 0)
    out: dict[int, dict[int, list[int]]] = {}
    for pid, d, t in zip(ev.pid[i][m].tolist(), fd[m].tolist(), ev.ts[i][m].tolist()):
        out.setdefault(int(pid), {}).setdefault(int(d), []).append(t)
    return {pid: {d: np.sort(np.array(t, np.int64)) for d, t in fds.items()} for pid, fds in out.items()}


def empty_iterations() -> pd.DataFrame:
    start, end, tid, cpu, metric = (np.zeros(0, np.int64) for _ in range(5))
    return as_iterations(start, end, tid, cpu, metric, ["rtt"])


def as_iterations(
    start: np.ndarray, end: np.ndarray, tid: np.ndarray, cpu: np.ndarray, metric: np.ndarray, names: list[str]
) -> pd.DataFrame:
    """Windows -> the iterations frame a workload's driver gives (store/results.py's
    read_iterations_bin): one run, iterations numbered from 0 in the order they start."""
    order = np.argsort(start, kind="stable")
    n = len(start)
    return pd.DataFrame(
        {
            "run": np.zeros(n, np.int32),
            "iteration": np.arange(n, dtype=np.int64),
            "seq": np.arange(n, dtype=np.int64),
            "metric": pd.Categorical.from_codes(np.asarray(metric, np.int64)[order], categories=names),
            "t_start_ns": start[order].astype(np.int64),
            "t_end_ns": end[order].astype(np.int64),
            "latency_ns": (end - start)[order].astype(np.int64),
            "cpu": cpu[order].astype(np.int16),
            "tid": tid[order].astype(np.int32),
        }
    )


def _windows_inside(outer_s: np.ndarray, outer_e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether each time t lies inside one of the windows [outer_s, outer_e] (outer_s sorted)."""
    if not len(outer_s):
        return np.zeros(len(t), bool)
    reach = np.maximum.accumulate(outer_e)
    j = np.searchsorted(outer_s, t, "right") - 1
    return (j >= 0) & (t <= reach[np.maximum(j, 0)])


ANSWER_EACH_OTHER = 0.5  # the share of each side's windows begun inside the other's


def answering_each_other(iters: pd.DataFrame) -> list[tuple[int, int]]:
    """The pairs of threads (a < b) whose round trips answer each other: most windows of each
    begin inside a window of the other (a symmetric ping-pong traced from its middle: the
    client's request -> answer holds the server's answer, and the server's answer -> next
    request holds the client's next request). A client and its server seen from the start
    (the server has no windows), or a proxy's onward calls (begun inside its client's windows,
    while the client's begin outside the proxy's), are no such pair."""
    by = {
        int(t): (g["t_start_ns"].to_numpy(np.int64), g["t_end_ns"].to_numpy(np.int64))
        for t, g in iters.sort_values("t_start_ns", kind="stable").groupby("tid", sort=True)
    }
    tids = sorted(by)
    pairs = []
    for i, a in enumerate(tids):
        for b in tids[i + 1 :]:
            (sa, ea), (sb, eb) = by[a], by[b]
            if (
                _windows_inside(sa, ea, sb).mean() >= ANSWER_EACH_OTHER
                and _windows_inside(sb, eb, sa).mean() >= ANSWER_EACH_OTHER
            ):
                pairs.append((a, b))
    return pairs


def asker_of(
    a: int, b: int, pa: int, pb: int, started: set[int], named: set[int], parent_of: Callable[[int], int | None]
) -> tuple[int, str]:
    """(the one that asks, why) of two threads a and b (of processes pa, pb) that answer each
    other. The one whose process the trace saw start and the other's not: such a process's
    channels are seen from their first call, so its windows are requests it sent, while the
    other's exist only because its channel was judged seen from the middle (a server traced by
    --pid beside the command that talks to it, whose accept record the tracer lost). Else the
    one whose process the user named (named: the --pid pids), else the parent of the other's
    process, else the older process (the lower pid), else the older thread."""
    if (pa in started) != (pb in started):
        return (a, "started in the trace") if pa in started else (b, "started in the trace")
    if (pa in named) != (pb in named):
        return (a, "named by --pid") if pa in named else (b, "named by --pid")
    if pa != pb and parent_of(pb) == pa:
        return a, f"the parent of pid {pb}"
    if pa != pb and parent_of(pa) == pb:
        return b, f"the parent of pid {pa}"
    if pa != pb:
        return (a, "the older process") if pa < pb else (b, "the older process")
    return min(a, b), "the older thread"


def one_side_each(iters: pd.DataFrame, choose: Callable[[int, int], int]) -> tuple[pd.DataFrame, list[tuple[int, int]]]:
    """iters without the windows of the answering side of each pair of threads that answer each
    other (answering_each_other); choose(a, b): the one of the two that asks; also the (asker,
    answerer) pairs. The rest are numbered anew in the order they start."""
    dropped, said = set(), []
    for a, b in answering_each_other(iters):
        if a in dropped or b in dropped:
            continue
        asker = choose(a, b)
        answerer = b if asker == a else a
        dropped.add(answerer)
        said.append((asker, answerer))
    if not dropped:
        return iters, said
    out = iters[~iters["tid"].isin(sorted(dropped)).to_numpy()].reset_index(drop=True)
    out["iteration"] = np.arange(len(out), dtype=np.int64)
    out["seq"] = np.arange(len(out), dtype=np.int64)
    return out, said


def partners(
    ev: pd.DataFrame, measuring: list[int], followed: set[int], most: int = 4, within: tuple[int, int] | None = None
) -> list[int]:
    """The followed threads that woke the measuring threads or were woken by them, most
    often first (at most `most`): the other side of the conversation, whose time the
    breakdown's critical path may cross. within: (start, end) ns, the wake-ups of that span
    only (the iterations'): a process that only talked to a measuring thread before its
    iterations began (a pyenv shim's $(...) subshells, ended before the shim exec'd the
    program) is no side of its conversation."""
    waking = decoded.of_type(ev, "waking")
    if within is not None:
        ts = ev["ts"].to_numpy(np.int64)
        waking &= (ts >= within[0]) & (ts <= within[1])
    w = ev.loc[waking, ["tid", "other_tid"]]
    wakee, waker = w["tid"].to_numpy(np.int64), w["other_tid"].to_numpy(np.int64)
    mine = np.isin(wakee, measuring) | np.isin(waker, measuring)
    other = np.where(np.isin(wakee[mine], measuring), waker[mine], wakee[mine])
    other = other[np.isin(other, list(followed)) & ~np.isin(other, measuring)]
    if not len(other):
        return []
    tids, counts = np.unique(other, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return [int(x) for x in tids[order][:most]]
