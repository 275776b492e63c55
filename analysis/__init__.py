"""ipctrace analysis: the command line front end, results and statistics.

HOME is the checkout (the launcher sets IPCTRACE_HOME); the built programs live
in HOME/.output, or in HOME/$IPCTRACE_OUTPUT (`make SANITIZE=1 test` sets it to
.output-san so that the tests run the sanitized builds).
"""
import os
from pathlib import Path

# Nothing here multiplies large float matrices; OpenBLAS' worker threads would only spin
# (sched_yield) after each small product numpy or matplotlib makes, taking the second
# CPU from the thread that writes events.parquet. Set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HOME = Path(os.environ.get("IPCTRACE_HOME") or Path(__file__).resolve().parent.parent)
OUTPUT = HOME / os.environ.get("IPCTRACE_OUTPUT", ".output")
DRIVER = OUTPUT / "ipcbench"
LOADER = OUTPUT / "ipctrace-loader"
