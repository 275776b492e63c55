"""watch's steps yield the CPU with every thread of the process (a policy set by one thread
does not reach those started before it), but the one passing the program's stderr on."""

import os
import threading

import numpy as np

from analysis.run import trace, watch


def test_every_thread_but_the_stderr_relay_yields():
    stop = threading.Event()
    relay = threading.Thread(target=stop.wait, name=trace.RELAY_THREAD, daemon=True)
    other = threading.Thread(target=stop.wait, name="started-before-the-steps", daemon=True)
    relay.start()
    other.start()
    try:
        tids = watch.own_threads()
        assert relay.native_id not in tids
        assert {other.native_id, threading.get_native_id()} <= set(tids)
        # and yielding them reaches a thread started before: SCHED_IDLE, then back
        watch.yield_cpu(other.native_id)
        assert os.sched_getscheduler(other.native_id) == os.SCHED_IDLE
        watch.unyield_cpu(other.native_id)
        assert os.sched_getscheduler(other.native_id) == os.SCHED_OTHER
    finally:
        stop.set()
        relay.join()
        other.join()


def test_a_thread_that_ended_keeps_the_name_a_piece_first_saw():
    """A short-lived thread: seen by a piece while it lived, ended by the time its request is
    explained; its name is the one it had then, until the tracer's record tells otherwise. A
    live thread's name is read when a request names it (after a rename, the new one)."""
    threads = watch.Threads()
    named, seen = threading.Event(), threading.Event()

    def short() -> None:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as f:
            f.write("short-lived")
        named.set()
        seen.wait()

    t = threading.Thread(target=short)
    t.start()
    named.wait()
    threads.see([t.native_id])
    seen.set()
    t.join()
    while os.path.exists(f"/proc/{t.native_id}"):  # reaped: /proc no longer shows it
        threading.Event().wait(0.01)
    assert threads.name(t.native_id) == "short-lived"
    threads.learn(t.native_id, "from-tracer", os.getpid())
    assert threads.name(t.native_id) == "from-tracer" and threads.pid(t.native_id) == os.getpid()
    me = threading.get_native_id()
    threads.see([me])
    with open(f"/proc/self/task/{me}/comm") as f:
        before = f.read().strip()
    try:
        with open(f"/proc/self/task/{me}/comm", "w") as f:
            f.write("renamed")
        assert threads.name(me) == "renamed"
    finally:
        with open(f"/proc/self/task/{me}/comm", "w") as f:
            f.write(before)


def _tasks_bin(path, rows):
    """tasks.bin as loaders/livenames.c appends it: struct live_name (tid, pid, comm[16])."""
    from analysis.store import livenames

    with open(path, "ab") as f:
        f.write(np.array(rows, dtype=livenames.RECORD).tobytes())


def test_a_task_that_ended_unseen_is_named_as_the_tracer_named_it(tmp_path):
    """A task that ended before any piece held it: the tracer's name from tasks.bin, the last
    one written of a tid (a rename), read as the file grows, a half-written record left for
    the next read; one that neither /proc nor the tracer names is nameless."""
    from analysis.store.jsonfiles import Task, TraceFile
    from analysis.store.livenames import RECORD, LiveNames

    gone = 1 << 30  # no such tid
    path = tmp_path / "tasks.bin"
    live = LiveNames(path)
    threads = watch.Threads(live)
    assert threads.name(gone) == "" and threads.pid(gone) == gone  # no file yet
    _tasks_bin(path, [(gone, 7, b"sh"), (gone, 7, b"worker-1")])
    with open(path, "ab") as f:
        f.write(np.array([(gone + 1, 9, b"half")], dtype=RECORD).tobytes()[:10])
    assert threads.name(gone) == "worker-1" and threads.pid(gone) == 7
    assert gone + 1 not in live.names and live.offset == 2 * RECORD.itemsize
    # the keeper: a kept request's trace.json, its nameless tasks named, the others as they were
    tj = TraceFile(tasks={gone: Task(comm=""), gone + 2: Task(comm=""), 1: Task(comm="init", pid=1)})
    named = watch.named_by_tracer(tj, LiveNames(path), wait_s=0)
    assert named.tasks == {gone: Task(comm="worker-1", pid=7), gone + 2: Task(comm=""), 1: Task(comm="init", pid=1)}
