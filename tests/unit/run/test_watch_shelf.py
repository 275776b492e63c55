"""The keeper's shelf (run/watch.Shelf): every request written raw first, once the tracer named
its tasks (or NAMES_WAIT_S after it came); then one written whole a turn, the slowest first, as
the CPU share allows; --max-disk bounded by the keeper itself, the oldest first; --slowest's
pushed-out requests removed whatever their state. The writers are injected: recorders that make
a directory of the size a case gives (the real ones: tests/integration/test_watch.py)."""

import os
import types
from pathlib import Path

import numpy as np
import pytest

from analysis.run import watch
from analysis.store.jsonfiles import Task, TraceFile
from analysis.store.livenames import RECORD, LiveNames


class Writers:
    def __init__(self, root: Path, raw_kib: int = 4, whole_kib: int = 4) -> None:
        self.root, self.raw_kib, self.whole_kib = root, raw_kib, whole_kib
        self.done: list[tuple[str, str]] = []
        self.said: list[tuple[str, str]] = []
        self.asked_gone: list[str] = []  # written whole, asked after it was removed

    def raw(self, k: watch.Kept) -> None:
        k.where.mkdir()
        (k.where / "kept.bin").write_bytes(b"x" * self.raw_kib * 1024)
        self.done.append(("raw", k.where.name))

    def whole(self, where: Path) -> bool:
        if not where.exists():
            self.asked_gone.append(where.name)
            return False
        (where / "kept.bin").unlink()
        (where / "explain.txt").write_bytes(b"x" * self.whole_kib * 1024)
        self.done.append(("whole", where.name))
        return True

    def say(self, what: str, where: str, **_: object) -> None:
        self.said.append((what, Path(where).name))


def kept(root: Path, name: str, latency_ms: float, tasks: dict[int, str] | None = None) -> watch.Kept:
    tj = TraceFile(tasks={tid: Task(comm=comm, pid=1) for tid, comm in (tasks or {1: "pp"}).items()})
    req = types.SimpleNamespace(start_ns=0, end_ns=int(latency_ms * 1e6))
    return watch.Kept(root / name, np.zeros(0), {}, {}, tj, req, None)  # type: ignore[arg-type]


def shelf(tmp_path: Path, w: Writers, max_disk: int = 0, names: LiveNames | None = None) -> watch.Shelf:
    live = names or LiveNames(tmp_path / "tasks.bin")
    return watch.Shelf(w.raw, w.whole, live, w.root, max_disk, set, w.say)


def lifted() -> watch.CpuShare:
    return watch.CpuShare(1.0)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "requests").mkdir()
    return tmp_path / "requests"


def test_raw_at_once_then_whole_the_slowest_first(tmp_path, root):
    w = Writers(root)
    s = shelf(tmp_path, w)
    for name, ms in (("a", 1.2), ("b", 4.0), ("c", 2.0)):
        s.take(kept(root, name, ms), now=0.0)
    for _ in range(5):
        s.work(lifted(), now=0.0, ending=False)
    assert w.done == [("raw", "a"), ("raw", "b"), ("raw", "c"), ("whole", "b"), ("whole", "c"), ("whole", "a")]
    assert [x for x in w.said if x[0] == "kept"] == [("kept", "a"), ("kept", "b"), ("kept", "c")]
    assert s.done()


@pytest.mark.parametrize(
    "owed, raw, whole",
    [
        (0.0, True, True),  # owes nothing: raw, then whole
        (0.5, True, False),  # owes less than RAW_SLACK_S: raw only
        (watch.RAW_SLACK_S + 0.5, False, False),  # owes more: waits
    ],
)
def test_what_the_share_allows(tmp_path, root, owed, raw, whole):
    class Clock:
        def monotonic(self) -> float:
            return 10.0

    share = watch.CpuShare(0.1, Clock())
    share.next_at = 10.0 + owed
    w = Writers(root)
    s = shelf(tmp_path, w)
    s.take(kept(root, "a", 2.0), now=10.0)
    s.work(share, now=10.0, ending=False)
    assert (("raw", "a") in w.done, ("whole", "a") in w.done) == (raw, whole)
    # it waits no longer than until it may work again; with nothing left, for the next request
    timeout = s.timeout(share, now=10.0)
    if whole:
        assert timeout is None
    else:
        assert timeout is not None and 0 < timeout <= owed + 1e-9


def test_a_request_waits_for_the_tracer_s_names_of_its_tasks(tmp_path, root):
    names_path = tmp_path / "tasks.bin"
    w = Writers(root)
    s = shelf(tmp_path, w, names=LiveNames(names_path))
    s.take(kept(root, "a", 2.0, {7: "", 8: "pp"}), now=0.0)  # task 7 ended before the watch named it
    s.work(lifted(), now=0.5, ending=False)
    assert w.done == []  # not named yet
    names_path.write_bytes(np.array([(7, 7, b"worker")], dtype=RECORD).tobytes())
    s.work(lifted(), now=0.6, ending=False)
    assert w.done[0] == ("raw", "a")
    # a name that never comes: written NAMES_WAIT_S after it came, or at once when the watch ends
    for now, ending, written in ((1.0, False, False), (watch.NAMES_WAIT_S, False, True)):
        w2 = Writers(root)
        s2 = shelf(tmp_path, w2)
        s2.take(kept(root, f"b{now}", 2.0, {9: ""}), now=0.0)
        s2.work(lifted(), now=now, ending=ending)
        assert bool(w2.done) == written
    w3 = Writers(root)
    s3 = shelf(tmp_path, w3)
    s3.take(kept(root, "c", 2.0, {9: ""}), now=0.0)
    s3.work(lifted(), now=0.0, ending=True)
    assert w3.done[0] == ("raw", "c")


def test_max_disk_removes_the_oldest_raw_or_whole(tmp_path, root):
    # each raw directory 8 KiB of file, each whole 16 KiB, each with its own block (as du counts
    # it: d), the bound 40 KiB + 4 d and the block of the directory that holds them
    w = Writers(root, raw_kib=8, whole_kib=16)
    (tmp_path / "measure").mkdir()
    d = os.lstat(tmp_path / "measure").st_blocks * 512
    bound = 40 * 1024 + 4 * d + os.lstat(root).st_blocks * 512
    s = shelf(tmp_path, w, max_disk=bound)
    for i, ms in enumerate((5.0, 1.0, 1.0, 1.0)):
        s.take(kept(root, f"2026113{i}", ms), now=0.0)
    s.work(lifted(), now=0.0, ending=False)  # 4 raw (32 KiB), then the slowest whole: 40 KiB + 4 d
    assert [x for x in w.said if x[0] == "removed"] == []
    s.take(kept(root, "20261134", 1.0), now=0.0)  # 48 KiB + 5 d: the oldest goes, though it is whole
    s.work(lifted(), now=0.0, ending=False)
    assert [x for x in w.said if x[0] == "removed"] == [("removed", "20261130")]
    assert not (root / "20261130").exists()
    used = sum(f.lstat().st_blocks * 512 for f in [root, *root.rglob("*")])
    assert used <= bound
    # a raw one removed is not written whole later
    s.take(kept(root, "20261135", 1.0), now=0.0)
    for _ in range(10):
        s.work(lifted(), now=0.0, ending=False)
    assert len([x for x in w.said if x[0] == "removed"]) >= 2 and w.asked_gone == []


def test_unkeep_removes_it_whatever_its_state(tmp_path, root):
    w = Writers(root)
    s = shelf(tmp_path, w)
    s.take(kept(root, "waiting", 2.0, {9: ""}), now=0.0)  # waits for a name
    s.take(kept(root, "raw", 1.0), now=0.0)
    s.work(lifted(), now=0.0, ending=False)
    s.take(kept(root, "whole", 9.0), now=0.0)
    s.work(lifted(), now=0.0, ending=False)
    s.work(lifted(), now=2.0, ending=False)  # waiting: written raw; whole: written whole
    assert ("whole", "whole") in w.done
    said = []
    for name in ("whole", "raw"):
        s.unkeep(root / name)
        said.append(w.said[-1])
    assert said == [("unkept", "whole"), ("unkept", "raw")]
    assert not (root / "whole").exists() and not (root / "raw").exists()
    s.take(kept(root, "late", 2.0, {9: ""}), now=10.0)
    s.unkeep(root / "late")  # pushed out before it was written: never written
    s.work(lifted(), now=20.0, ending=True)
    assert ("raw", "late") not in w.done
