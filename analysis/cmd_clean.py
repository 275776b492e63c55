"""ipctrace clean: remove what runs that died (SIGKILL, power loss) left behind.

Every run names its objects with a tag "<pid>-<8 hex>" (workloads/driver.c):
POSIX shared memory and semaphores /dev/shm/ipctrace-<tag>-..., message queues
/dev/mqueue/ipctrace-<tag>-..., and a private directory <tmp>/ipctrace-<tag>
for socket files and FIFOs. An object is removed only when the process <pid>
no longer exists, so a run in progress is never disturbed.
"""
import os
import re
import shutil
import sys
from pathlib import Path

TAGGED = re.compile(r"ipctrace-(\d+)-[0-9a-f]{8}(?:-.*)?")
PLACES = ["/dev/shm", "/dev/mqueue", "/tmp", "/run"]


def register(sub):
    p = sub.add_parser("clean", help="remove IPC objects and directories left by dead runs",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    # A zombie has ended: it only waits for its parent (or init) to reap it.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def leftovers(places):
    """Paths named by a tag whose process is gone."""
    found = []
    for place in places:
        try:
            entries = sorted(Path(place).iterdir())
        except OSError:
            continue
        for p in entries:
            m = TAGGED.fullmatch(p.name)
            if m and not alive(int(m.group(1))):
                found.append(p)
    return found


def places():
    tmp = os.environ.get("TMPDIR")
    return PLACES + ([tmp] if tmp and tmp not in PLACES else [])


def remove(paths):
    """Remove paths; returns (removed, [(path, why) not removed]). `ipctrace run` calls
    this too, so that the next run cleans up after one that died."""
    removed, failed = [], []
    for p in paths:
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
        except FileNotFoundError:
            pass
        except OSError as e:
            failed.append((p, e.strerror))
    return removed, failed


def run(args):
    gone = leftovers(places())
    if args.dry_run:
        for p in gone:
            print(f"would remove {p}")
        failed = []
    else:
        removed, failed = remove(gone)
        for p in removed:
            print(f"removed {p}")
        for p, why in failed:
            print(f"ipctrace: cannot remove {p}: {why}", file=sys.stderr)
    if not gone:
        print("nothing left behind by dead runs")
    return 2 if failed else 0
