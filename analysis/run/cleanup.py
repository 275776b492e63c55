"""What runs that died (SIGKILL, power loss) left behind, found and removed; the rules are
those `ipctrace clean` describes (analysis/cli/clean.py)."""

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

TAGGED = re.compile(r"ipctrace-(\d+)-[0-9a-f]{8}(?:-.*)?")
PLACES = ["/dev/shm", "/dev/mqueue", "/tmp", "/run"]
PEER_IMAGE = "localhost/ipctrace-peer"
STATE_DIR = Path("/run/ipctrace/containers")  # CT_STATE_DIR of workloads/container.h
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def alive(pid: int) -> bool:
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


def leftovers(places: Iterable[str]) -> list[Path]:
    """Paths named by a tag whose process is gone."""
    found = []
    for place in places:
        try:
            entries = sorted(Path(place).iterdir())
        except OSError:
            continue
        for p in entries:
            m = TAGGED.fullmatch(p.name)
            if m and not alive(int(m.group(1))) and _ours(p):
                found.append(p)
    return found


def _ours(p: Path) -> bool:
    """Root acts on every run's objects; a user (the front end under sudo) on their own only,
    never on another user's file that merely has the name of one of ours."""
    if os.geteuid() == 0:
        return True
    try:
        return p.lstat().st_uid == os.geteuid()
    except OSError:
        return False


def places() -> list[str]:
    tmp = os.environ.get("TMPDIR")
    return PLACES + ([tmp] if tmp and tmp not in PLACES else [])


def remove(paths: Iterable[Path]) -> tuple[list[Path], list[tuple[Path, str | None]]]:
    """Remove paths; returns (removed, [(path, why) not removed]). `ipctrace run` calls
    this too, so that the next run cleans up after one that died."""
    removed: list[Path] = []
    failed: list[tuple[Path, str | None]] = []
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


def podman(*args: str) -> tuple[int, str, str] | None:
    """(exit status, stdout, last line of stderr); None when podman is not installed."""
    if not shutil.which("podman", path=SYSTEM_PATH):
        return None
    try:
        p = subprocess.run(
            [shutil.which("podman", path=SYSTEM_PATH) or "podman", *args], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, "", str(e)
    return p.returncode, p.stdout, (p.stderr.strip().splitlines() or [""])[-1]


def container_leftovers() -> list[tuple[str, str, tuple[str, ...]]]:
    """(kind, name, podman rm/rmi arguments) of containers of dead runs, then unused peer images."""
    listed = podman("ps", "--all", "--filter", "name=^ipctrace-", "--format", "{{.Names}}")
    if listed is None or listed[0] != 0:
        return []
    found: list[tuple[str, str, tuple[str, ...]]] = [
        ("container", n, ("rm", "--force", "--time", "0", "--ignore", n))
        for n in sorted(listed[1].split())
        if (m := TAGGED.fullmatch(n)) and not alive(int(m.group(1)))
    ]
    images = podman(
        "images", "--format", "{{.Repository}}:{{.Tag}}", "--filter", f"reference={PEER_IMAGE}", "--filter", "until=1h"
    )
    if images and images[0] == 0:
        found += [("image", i, ("rmi", i)) for i in sorted(images[1].split())]
    return found


def _root_dir(path: Path, others: int = 0o077) -> bool:
    """Is path a directory of root's (not a link) with none of the `others` mode bits: by
    default none for anyone else; 0o022: no one else may write it."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & others


def recorded_containers(state: Path = STATE_DIR) -> dict[str, str]:
    """{container name: id} of the containers ipctrace started whose run is gone, from root's
    own records (workloads/container.c writes one per container; no one else can)."""
    found: dict[str, str] = {}
    # the records root's alone, in a directory no one else may write (as workloads/container.c)
    if not (_root_dir(state.parent, 0o022) and _root_dir(state)):
        return found
    for f in sorted(state.iterdir()):
        m = TAGGED.fullmatch(f.name)
        if not m or alive(int(m.group(1))):
            continue
        try:
            st = os.lstat(f)
            cid = f.read_text().strip() if stat.S_ISREG(st.st_mode) and st.st_uid == 0 else ""
        except OSError:
            continue
        found[f.name] = cid if re.fullmatch(r"[0-9a-f]{8,64}", cid) else ""
    return found


def forget(names: Iterable[str], state: Path = STATE_DIR) -> None:
    """Remove the records of these containers (they are gone)."""
    for name in names:
        with contextlib.suppress(OSError):
            os.unlink(state / name)


def stray_conmons(proc: Path | str = "/proc", state: Path = STATE_DIR) -> list[tuple[int, str, str]]:
    """(conmon pid, container name, container id) of each live conmon of root's that runs a
    container ipctrace recorded starting for a run that is gone. What a process's arguments
    claim is never enough: the id must be one of the records, the process root's."""
    by_id = {cid: name for name, cid in recorded_containers(state).items() if cid}
    found: list[tuple[int, str, str]] = []
    if not by_id:
        return found
    for d in Path(proc).iterdir():
        if not d.name.isdigit():
            continue
        try:
            if d.stat().st_uid != 0:
                continue
            args = [a.decode(errors="replace") for a in (d / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if not args or os.path.basename(args[0]) != "conmon":
            continue
        cids = [v for f, v in zip(args, args[1:]) if f == "-c" and v in by_id]
        if cids and alive(int(d.name)):
            found.append((int(d.name), by_id[cids[0]], cids[0]))
    return found


def _tree(pid: int) -> list[int]:
    """pid and all its descendants, deepest last."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def remove_strays(found: Sequence[tuple[int, str, str]]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """Kill each stray conmon and what it runs, then delete the runtime's state and the
    storage of its container; (removed names, [(name, why)])."""
    removed: list[str] = []
    failed: list[tuple[str, str | None]] = []
    runc = shutil.which("runc", path=SYSTEM_PATH)
    for pid, name, cid in found:
        for p in reversed(_tree(pid)):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except OSError as e:
                failed.append((f"container process {p} of {name}", e.strerror))
        # the runtime installed on the system, never one a process's arguments name
        if runc:
            subprocess.run([runc, "delete", "--force", cid], capture_output=True, timeout=60)
        podman("rm", "--force", "--ignore", cid)
        forget([name])
        removed.append(name)
    return removed, failed


def remove_containers(
    found: Sequence[tuple[str, str, tuple[str, ...]]],
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Remove them in order (containers first, so their images are free); (removed, failed).
    An image a container still uses is kept and not an error."""
    removed: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    for kind, name, rm in found:
        got = podman(*rm)
        if got is None:  # uninstalled since it listed them
            failed.append((f"{kind} {name}", "podman is not installed"))
            continue
        status, _, why = got
        if status == 0:
            removed.append((kind, name))
            if kind == "container":
                forget([name])
        elif not (kind == "image" and "in use" in why):
            failed.append((f"{kind} {name}", why))
    return removed, failed
