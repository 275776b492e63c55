"""Files in directories another user may write: read and written so that no name they
plant (a symbolic link, a FIFO, a device) can redirect or block us.

ipctrace writes into directories another user may write (a user's --out given to root, or
under sudo with the user's own rights, analysis/run/privilege.py: then every file made here is
theirs because they make it). The rules, for every file of a results directory:
- reading: open with O_NOFOLLOW | O_NONBLOCK and accept only a regular file (fstat), so a
  planted link is refused and a FIFO never blocks;
- writing: a new file of a unique name created with O_CREAT | O_EXCL | O_NOFOLLOW in the
  directory's descriptor, filled, then renamed over the final name within the same
  descriptor (a rename replaces a planted link, never its target);
- a directory a run writes is opened once; its descriptor is handed to the programs that
  write into it as /proc/self/fd/N, so the directory cannot be swapped under them.
Anything a library wants a path for (pyarrow, matplotlib, pandas) gets /proc/self/fd/N of
a descriptor opened this way.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from analysis.errors import UsageError

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
}


def kind(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "not a regular file")


def why(e: OSError) -> str:
    """The one-line reason of an OSError."""
    return e.strerror or str(e)


def proc_path(fd: int) -> str:
    """A path that names what fd names, whatever happens to its name meanwhile."""
    return f"/proc/self/fd/{fd}"


def open_regular(
    path: Path | str, dir_fd: int | None = None, error: type[Exception] = UsageError, show: Path | str | None = None
) -> int:
    """A descriptor of the regular file path, for reading: a symbolic link as its last
    component, a FIFO or a device is refused (one-line `error`), never followed or waited
    on. FileNotFoundError passes through for the caller to word."""
    show = show or path
    try:
        fd = os.open(path, READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise error(f"{show} is a symbolic link; ipctrace reads only regular files there") from None
        raise error(f"cannot read {show}: {why(e)}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise error(f"{show} is {kind(st.st_mode)}, not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_named_file(path: Path | str) -> bytes | None:
    """The bytes of the regular file path, its name followed as the system resolves it (a
    binary named by a process's memory maps), with our rights; never waiting on a FIFO or a
    device. None if it is not a regular file we may read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            os.set_blocking(fd, True)
            return f.read()
        except OSError:
            return None


def read_bytes(path: Path | str, error: type[Exception] = UsageError, show: Path | str | None = None) -> bytes:
    fd = open_regular(path, error=error, show=show)
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read()
        except OSError as e:
            raise error(f"cannot read {show or path}: {why(e)}") from None


@contextlib.contextmanager
def regular(path: Path | str, error: type[Exception] = UsageError, show: Path | str | None = None) -> Iterator[str]:
    """Within the block, a path (/proc/self/fd/N) naming the regular file path as it was
    when checked: for libraries that open by name (pyarrow, numpy)."""
    fd = open_regular(path, error=error, show=show)
    try:
        yield proc_path(fd)
    finally:
        os.close(fd)


def is_regular(path: Path | str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def open_dir(path: Path | str) -> int:
    """A descriptor of the directory path (its last component not a link)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


@contextlib.contextmanager
def created(path: Path | str, mode: int = 0o644) -> Iterator[str]:
    """Write the file path anew: within the block, a path (/proc/self/fd/N) naming a new file
    of a unique name beside it, made with O_EXCL | O_NOFOLLOW; at the
    block's end it is renamed over path (in the same directory descriptor); if the block
    raises, it is removed. The directory is opened once, so swapping it changes nothing."""
    path = Path(path)
    dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with created_at(dfd, path.name, mode) as tmp:
            yield tmp
    except OSError as e:
        # Said of the file the user knows, not of our temporary name.
        if e.filename is None or str(e.filename).endswith(".tmp") or str(e.filename).startswith("/proc/self/fd/"):
            raise type(e)(e.errno, e.strerror, str(path)) from None
        raise
    finally:
        os.close(dfd)


@contextlib.contextmanager
def created_at(dfd: int, name: str, mode: int = 0o644) -> Iterator[str]:
    """created() in the directory of descriptor dfd."""
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        yield proc_path(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    finally:
        os.close(fd)


def create_at(dfd: int, name: str, mode: int = 0o644) -> int:
    """A new file name in the directory of descriptor dfd, for reading and writing: refused (FileExistsError) if anything has that name, link or FIFO included."""
    return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)


def write_bytes(path: Path | str, data: bytes, mode: int = 0o644) -> None:
    with created(path, mode) as p, open(p, "wb") as f:
        f.write(data)


def write_text(path: Path | str, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: Path | str, obj: Any, indent: int | None = 2) -> None:
    """obj as JSON; a reader never sees half of it (a new file renamed into place)."""
    write_text(path, json.dumps(obj, indent=indent, allow_nan=False) + "\n")


def mkdir(path: Path | str, mode: int = 0o755) -> None:
    """Make the directory path (not its parents), then check through a descriptor that what has
    the name is what was made: refused if something else took its name meanwhile."""
    path = Path(path)
    os.mkdir(path, mode)
    fd = open_dir(path)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise UsageError(f"{path} was replaced while it was being made")
    finally:
        os.close(fd)


def makedirs(path: Path | str, mode: int = 0o755) -> None:
    """mkdir -p path, each directory made by mkdir()."""
    path = Path(path)
    missing = []
    p = path.absolute()
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    for p in reversed(missing):
        try:
            mkdir(p, mode)
        except FileExistsError:
            if not p.is_dir():
                raise
