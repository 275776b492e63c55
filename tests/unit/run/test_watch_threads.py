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
