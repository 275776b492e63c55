"""A stop signal that lands while the analysis starts a thread is still an interruption.

CPython's Thread.start, when an exception comes out of starting the thread (here: the SIGTERM
handler's Interrupted, raised between two bytecodes), removes the thread from its table of
threads being started; a thread that did start has removed itself already, so start raises
KeyError of that thread, the interruption only its __context__. A CI run's SIGTERM gave
"internal error: KeyError: <Thread(ipctrace-breakdown-write_0, ...)>" instead of "interrupted".
"""

import signal
from pathlib import Path

import pytest

from analysis import errors
from analysis.cli import main
from analysis.errors import Interrupted, MeasureError, unmasked


def masked(inner: BaseException) -> KeyError:
    """What Thread.start raises: KeyError raised while handling inner."""
    try:
        try:
            raise inner
        except Exception:
            raise KeyError("<Thread(ipctrace-breakdown-write_0, started 1)>") from None
    except KeyError as e:
        e.__context__ = inner  # `from None` hides it from the traceback; the context stays
        return e


def chained(*chain: BaseException) -> BaseException:
    """chain[-1] raised while handling chain[-2], ... while handling chain[0]."""
    for inner, outer in zip(chain, chain[1:]):
        outer.__context__ = inner
    return chain[-1]


TERM = Interrupted(signal.SIGTERM)
CASES = [
    # (the exception caught, what it stands for)
    (KeyError("x"), "itself"),
    (TERM, "itself"),
    (masked(TERM), TERM),
    (chained(TERM, ValueError("a"), KeyError("b")), TERM),
    (chained(KeyboardInterrupt(), KeyError("b")), "KeyboardInterrupt"),
    (chained(ValueError("a"), MeasureError("b")), "itself"),
]


@pytest.mark.parametrize("caught,stands_for", CASES)
def test_unmasked(caught, stands_for):
    got = unmasked(caught)
    if stands_for == "itself":
        assert got is caught
    elif stands_for == "KeyboardInterrupt":
        assert isinstance(got, KeyboardInterrupt)
    else:
        assert got is stands_for


def test_main_says_interrupted_not_internal_error(monkeypatch, capsys):
    def list_interrupted(args):
        raise masked(Interrupted(signal.SIGTERM, "interrupted by SIGTERM; what was traced is in t"))

    monkeypatch.setattr(main, "cmd_list", list_interrupted)
    assert main.main(["list"]) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert "interrupted by SIGTERM; what was traced is in t" in err
    assert "internal error" not in err


def test_main_says_interrupted_when_the_signal_s_exception_was_replaced(monkeypatch, capsys):
    """A SIGINT that lands in C code importing a module on first use comes out as ImportError
    with no trace of it (a CI run: "internal error: ImportError: PyCapsule_Import could not
    import module "pandas""); the handler has run, so the command was interrupted."""

    def list_interrupted(args):
        errors.stopping(signal.SIGINT)  # what main._interrupted records before it raises
        raise ImportError('PyCapsule_Import could not import module "pandas"')

    monkeypatch.setattr(main, "cmd_list", list_interrupted)
    assert main.main(["list"]) == 128 + signal.SIGINT
    err = capsys.readouterr().err
    assert "interrupted" in err and "internal error" not in err


def test_main_says_internal_error_without_a_stop_signal(monkeypatch, capsys):
    """(after the test above: each call of main starts with no signal seen)"""

    def list_fails(args):
        raise ImportError("no module named x")

    monkeypatch.setattr(main, "cmd_list", list_fails)
    assert main.main(["list"]) == 1
    assert "internal error: ImportError" in capsys.readouterr().err


@pytest.mark.parametrize(
    "signum, caught, stands_for",
    [
        # once a stop signal's handler ran, an error not ours is that interruption: the run's and
        # the trace's handlers mark their directory interrupted, not failed
        (signal.SIGTERM, ImportError('PyCapsule_Import could not import module "pandas"'), "SIGTERM"),
        (signal.SIGINT, KeyError("x"), "KeyboardInterrupt"),
        (signal.SIGTERM, MeasureError("the tracer failed"), "itself"),  # ours says what it is
        (0, ImportError("no module named x"), "itself"),  # no signal: an error is an error
    ],
)
def test_unmasked_after_a_stop_signal(signum, caught, stands_for):
    from analysis.run.runner import _fail

    errors.stopping(signum)
    try:
        got = unmasked(caught)
    finally:
        errors.stopping(0)
    if stands_for == "itself":
        assert got is caught
    elif stands_for == "KeyboardInterrupt":
        assert isinstance(got, KeyboardInterrupt)
    else:
        assert isinstance(got, Interrupted) and got.signum == signal.SIGTERM and got.exit_code == 143
    meta: dict = {}
    _fail(Path("/nonexistent-ipctrace-dir"), meta, got)  # writes nowhere: the status is the point
    assert meta["status"] == ("failed" if stands_for == "itself" else "interrupted")
