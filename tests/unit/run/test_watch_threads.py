"""watch's steps yield the CPU with every thread of the process (a policy set by one thread
does not reach those started before it), but the one passing the program's stderr on."""

import os
import threading

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
