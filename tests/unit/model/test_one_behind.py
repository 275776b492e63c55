"""streaming.OneBehind: calls in a thread of their own, in order, one at a time; errors raised
at the next submit, at wait, or on leaving the with-block."""

import threading

import pytest

from analysis.model.streaming import OneBehind


def test_calls_run_in_order_one_at_a_time_off_the_caller():
    seen: list[tuple[int, str]] = []
    running = []
    lock = threading.Lock()

    def call(k: int) -> None:
        with lock:
            running.append(k)
            assert len(running) == 1, "two calls at once"
        seen.append((k, threading.current_thread().name))
        with lock:
            running.remove(k)

    with OneBehind("test-behind") as behind:
        for k in range(50):
            behind.submit(call, k)
    assert [k for k, _ in seen] == list(range(50))
    assert all(name.startswith("test-behind") for _, name in seen)


@pytest.mark.parametrize("where", ["submit", "wait", "exit"])
def test_an_error_reaches_the_caller(where: str):
    def fails() -> None:
        raise ValueError("in the call")

    with pytest.raises(ValueError, match="in the call"), OneBehind("test-behind") as behind:
        behind.submit(fails)
        if where == "submit":
            behind.submit(lambda: None)
        elif where == "wait":
            behind.wait()


def test_leaving_on_an_error_waits_for_the_call_in_flight():
    done = threading.Event()
    started = threading.Event()

    def slow() -> None:
        started.set()
        done.wait(5)

    def release() -> None:
        done.set()

    with pytest.raises(KeyError), OneBehind("test-behind") as behind:
        behind.submit(slow)
        started.wait(5)
        threading.Timer(0.05, release).start()
        raise KeyError("the caller's own error")
    assert done.is_set()  # the with-block ended only after the call in flight did


def test_each_result_goes_to_its_then_in_the_callers_thread_in_order():
    kept: list[tuple[int, str]] = []
    with OneBehind("test-behind") as behind:
        for k in range(20):
            behind.submit(lambda k: k * k, k, then=lambda got: kept.append((got, threading.current_thread().name)))
    assert [got for got, _ in kept] == [k * k for k in range(20)]
    assert {name for _, name in kept} == {threading.current_thread().name}
