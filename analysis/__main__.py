import signal
import sys

# Until the front end is imported (numpy, pandas: most of a second) there is nothing to
# keep: a signal then ends the process at once with 128 + signal and one line, never a
# KeyboardInterrupt traceback from inside an import.
from analysis import _early_signals  # noqa: F401  (installs the handlers first)
from analysis.cli import main  # noqa: E402

rc = main()
# Winding down (flushing, joining the parquet writer's thread): a late signal changes nothing.
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.exit(rc)
