"""ipctrace clean: remove what runs that died (SIGKILL, power loss) left behind.

Every run names its objects with a tag "<pid>-<8 hex>" (workloads/driver.c):
POSIX shared memory and semaphores /dev/shm/ipctrace-<tag>-..., message queues
/dev/mqueue/ipctrace-<tag>-..., and a private directory <tmp>/ipctrace-<tag>
for socket files and FIFOs. An object is removed only when the process <pid>
no longer exists, so a run in progress is never disturbed. Where podman is
installed, the same goes for the containers ipctrace-<tag> of `--containers`,
and the peer images localhost/ipctrace-peer:* older than an hour that no
container uses go too (a run builds its image again in about a second; a younger
one may belong to a run about to start its container). Last, a container podman no
longer lists but whose processes still run: root's conmon of a container whose id
ipctrace recorded (/run/ipctrace/containers, root's only) for a dead run, with a `runc init`
that never started (what a SIGKILL of podman while it started the container left, once
`podman rm` forgot it): its processes are killed and the system runc's and podman's records
of it deleted. What a process's arguments claim is never enough, and no program they name
is run.
"""

import argparse
import sys
from pathlib import Path

from analysis.run import broker, cleanup, privilege


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clean", description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="only list what would be removed")


def run(args: argparse.Namespace) -> int:
    if privilege.brokered():
        return _run_for_user(args)
    gone = cleanup.leftovers(cleanup.places())
    containers = cleanup.container_leftovers()
    strays = cleanup.stray_conmons()
    if args.dry_run:
        for p in gone:
            print(f"would remove {p}")
        for kind, name, _ in containers:
            print(f"would remove {kind} {name}" + (" (unless in use)" if kind == "image" else ""))
        for pid, name, _ in strays:
            print(f"would remove the processes of container {name} (conmon {pid}), which podman no longer lists")
    failed: list[tuple[Path | str, str | None]] = []
    if not args.dry_run:
        removed, failed_paths = cleanup.remove(gone)
        gone_containers, failed_containers = cleanup.remove_containers(containers)
        # `podman rm` may forget a container whose processes it did not know of: look again.
        strays = cleanup.stray_conmons()
        gone_strays, failed_strays = cleanup.remove_strays(strays)
        # records of containers neither podman nor a process still has: nothing left to do
        still = {n for _, n, _ in cleanup.container_leftovers()} | {n for _, n, _ in cleanup.stray_conmons()}
        cleanup.forget(set(cleanup.recorded_containers()) - still)
        for p in removed:
            print(f"removed {p}")
        for kind, name in gone_containers:
            print(f"removed {kind} {name}")
        for name in gone_strays:
            print(f"removed the processes of container {name}, which podman no longer listed")
        for some in (failed_paths, failed_containers, failed_strays):
            failed.extend(some)
        for what, why in failed:
            print(f"ipctrace: cannot remove {what}: {why}", file=sys.stderr)
    if not gone and not containers and not strays:
        print("nothing left behind by dead runs")
    return 2 if failed else 0


def _run_for_user(args: argparse.Namespace) -> int:
    """Under sudo: the user's own leftovers, then root's, removed by the broker."""
    gone = cleanup.leftovers(cleanup.places())
    if args.dry_run:
        for p in gone:
            print(f"would remove {p}")
        if not gone:
            print("nothing of yours left behind by dead runs (root's are looked at only when removing)")
        return 0
    removed, failed = cleanup.remove(gone)
    root_removed, root_failed = broker.clean()
    for p in removed + root_removed:
        print(f"removed {p}")
    for p, why in failed + root_failed:
        print(f"ipctrace: cannot remove {p}: {why}", file=sys.stderr)
    if not removed and not root_removed and not failed and not root_failed:
        print("nothing left behind by dead runs")
    return 2 if failed or root_failed else 0
