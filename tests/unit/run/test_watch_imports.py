"""What the watch and its keeper import: not scipy.stats, whose import costs a second of CPU
(its distributions' docstrings are parsed) while the watched service runs. Only
stats.median_replicates (compare, sizefit) takes it, imported there."""

import subprocess
import sys

from conftest import HOME

# the keeper's imports (watch.keeper_main), the steps' (Watcher.start), then a kept request's
IMPORTS = """
import sys
from analysis.run import watch
import pyarrow.parquet
from analysis.model import breakdown, explain, rtt
from analysis.render import explain, otlp, perfetto_proto
from analysis.run import export
from analysis.store import rundir
print("scipy.stats" in sys.modules)
"""


def test_the_watch_and_its_keeper_leave_scipy_stats_out():
    r = subprocess.run([sys.executable, "-c", IMPORTS], capture_output=True, text=True, cwd=HOME, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
