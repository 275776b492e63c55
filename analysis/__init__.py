"""ipctrace analysis: the command line front end, results and statistics.

HOME is the checkout (the launcher sets IPCTRACE_HOME); the built programs live
in HOME/.output, or in HOME/$IPCTRACE_OUTPUT (`make SANITIZE=1 test` sets it to
.output-san so that the tests run the sanitized builds).
"""

import gc
import os
import signal
import sys


def _exit_now(signum, frame):
    """Until the front end is imported (numpy, pandas: most of a second) there is nothing to
    keep: a signal ends the process at once with one line and 128 + signal, never a
    KeyboardInterrupt traceback from inside an import. analysis.cli.main.main installs its own."""
    try:
        os.write(2, b"ipctrace: interrupted\n")
    finally:
        os._exit(128 + signum)


# `python -m analysis` (what the launcher execs): runpy imports this package while
# sys.argv[0] is still "-m", before __main__ runs; the handlers go in before anything else.
# The launcher starts Python with the two signals blocked; one that came meanwhile is
# delivered here, once the handlers are in.
if sys.argv[:1] == ["-m"]:
    signal.signal(signal.SIGINT, _exit_now)
    signal.signal(signal.SIGTERM, _exit_now)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})

from pathlib import Path  # noqa: E402

# Nothing here multiplies large float matrices; OpenBLAS' worker threads would only spin
# (sched_yield) after each small product numpy or matplotlib makes, taking the second
# CPU from the thread that writes events.parquet. Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HOME = Path(os.environ.get("IPCTRACE_HOME") or Path(__file__).resolve().parent.parent)
OUTPUT = HOME / os.environ.get("IPCTRACE_OUTPUT", ".output")
DRIVER = OUTPUT / "ipcbench"
LOADER = OUTPUT / "ipctrace-loader"


def freeze_imports():
    """Leave the objects alive now (the imported modules: numpy, pandas, pyarrow...) out
    of the garbage collector's later full passes: each one walked all of them, ~0.2 s
    during an analysis. They live as long as the process anyway."""
    gc.freeze()
