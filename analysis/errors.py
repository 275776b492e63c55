"""The errors a user can cause, and the exit code each one means.

Every command lets these propagate; analysis.cli.main.main prints their message as
one line `ipctrace: MESSAGE` on stderr and exits with `exit_code`.
"""

import signal
from pathlib import Path


class IpctraceError(Exception):
    exit_code = 1
    # Set where an error leaves something behind: the results directory it kept (shown by its
    # caller), and whether the run already discarded its directory (nothing left to mark failed).
    resdir: Path | str | None = None
    discarded: bool = False


class UsageError(IpctraceError):
    """Bad arguments or an environment that cannot run the command (exit 2)."""

    exit_code = 2


class MeasureError(IpctraceError):
    """The measurement itself failed (exit 1)."""

    exit_code = 1


class Interrupted(IpctraceError):
    """SIGINT or SIGTERM ended the command; exit 128 + signal number."""

    def __init__(self, signum, message=None):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(message or f"interrupted by {signal.Signals(signum).name}")


# The stop signal whose handler raised in this command (0: none; cli/main.py's handlers set it).
_stop_signal = 0


def stopping(signum: int) -> None:
    """A stop signal's handler is about to raise (0: a new command, none seen)."""
    global _stop_signal
    _stop_signal = signum


def unmasked(e: BaseException) -> BaseException:
    """The interruption (Interrupted, KeyboardInterrupt) e stands in for, else e.
    - A signal handler's exception raised while Thread.start runs (the analysis starts threads)
      makes CPython's start tidy up a thread that did start: it raises KeyError of that thread,
      with the interruption only as its __context__.
    - C code importing a module on first use turns it into ImportError ("PyCapsule_Import could
      not import module"), which keeps no trace of it: once a stop signal's handler has run, any
      error but ours (IpctraceError) stands for that interruption."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, (Interrupted, KeyboardInterrupt)):
            return seen
        seen = seen.__context__
    if _stop_signal and not isinstance(e, IpctraceError):
        return KeyboardInterrupt() if _stop_signal == signal.SIGINT else Interrupted(_stop_signal)
    return e
