import atexit
import os
import signal
import sys

from analysis.run import privilege

# Root for a sudo user without the launcher's broker: the user's front end from here on,
# before anything of the command line is imported.
privilege.start(sys.argv[1:])

from analysis.cli.main import main  # noqa: E402

rc = main()
# Winding down: a late signal changes nothing, and the exit status is rc whatever a library
# did with SIGINT meanwhile (an interpreter that saw a KeyboardInterrupt it did not handle
# would end by the signal instead of 130). Every thread of ours has ended by now.
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
try:
    sys.stdout.flush()
    sys.stderr.flush()
except (BrokenPipeError, OSError):
    pass
# What libraries registered to run at exit, which os._exit skips: matplotlib's temporary
# configuration directory (/tmp/matplotlib-*) of a user whose home it cannot write.
atexit._run_exitfuncs()
os._exit(rc)
