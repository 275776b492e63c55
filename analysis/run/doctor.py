"""What this kernel lets ipctrace trace: the tracer's own answers (`ipctrace-loader
--doctor` tries each feature for real)."""

import json
import os
import subprocess

from analysis import LOADER
from analysis.errors import UsageError
from analysis.run import privilege


def probe():
    """The tracer's --doctor answers: {"features", "attach", "possible", "why_impossible"}."""
    if not os.access(LOADER, os.X_OK):
        raise UsageError(f"the tracer {LOADER} is not built; run 'make'")
    p = privilege.run_as_root([str(LOADER), "--doctor"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    try:
        return json.loads(p.stdout)
    except ValueError:
        line = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise UsageError(f"ipctrace-loader --doctor failed: {line}") from None
