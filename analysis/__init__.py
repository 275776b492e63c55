"""ipctrace analysis: the command line front end, results and statistics.

HOME is the checkout (the launcher sets IPCTRACE_HOME); the built programs live
in HOME/.output, or in HOME/$IPCTRACE_OUTPUT (`make SANITIZE=1 test` sets it to
.output-san so that the tests run the sanitized builds).
"""
import os
from pathlib import Path

HOME = Path(os.environ.get("IPCTRACE_HOME") or Path(__file__).resolve().parent.parent)
OUTPUT = HOME / os.environ.get("IPCTRACE_OUTPUT", ".output")
DRIVER = OUTPUT / "ipcbench"
LOADER = OUTPUT / "ipctrace-loader"
