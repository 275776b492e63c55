"""ipctrace analysis: the command line front end, results and statistics.

HOME is the checkout (the launcher sets IPCTRACE_HOME); the built programs live
in HOME/.output.
"""
import os
from pathlib import Path

HOME = Path(os.environ.get("IPCTRACE_HOME") or Path(__file__).resolve().parent.parent)
OUTPUT = HOME / ".output"
DRIVER = OUTPUT / "ipcbench"
LOADER = OUTPUT / "ipctrace-loader"
