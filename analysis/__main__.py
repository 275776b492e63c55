import os
import signal
import sys


def _now(signum, frame):
    """Until the front end is imported (numpy, pandas: most of a second) there is nothing to
    keep: a signal ends the process at once with one line and 128 + signal, never a
    KeyboardInterrupt traceback from inside an import. analysis.cli.main installs its own."""
    try:
        os.write(2, b"ipctrace: interrupted\n")
    finally:
        os._exit(128 + signum)


signal.signal(signal.SIGINT, _now)
signal.signal(signal.SIGTERM, _now)

from analysis.cli import main  # noqa: E402

rc = main()
# Winding down (flushing, joining the parquet writer's thread): a late signal changes nothing.
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.exit(rc)
