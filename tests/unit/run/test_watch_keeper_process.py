"""The keeper as the watch starts it (watch.KEEPER_ARGS), spoken to as the
watch speaks to it: a pickled config, then lists of Kept and Unkeep, None at the end. Its answers
are JSON lines. Run as `python -m analysis.run.watch`, it once took an Unkeep for a Kept: what the watch pickles is of
analysis.run.watch's classes, not of __main__'s."""

import dataclasses
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

from analysis.run import trace as trace_mod
from analysis.run import watch
from conftest import HOME


def keeper(tmp_path: Path, items: list) -> tuple[int, list[dict]]:
    """The keeper's exit status and what it said, given items (each a list, as Keeper.flush sends)."""
    requests = tmp_path / "requests"
    requests.mkdir(exist_ok=True)
    ended_r, ended_w = os.pipe()
    target = trace_mod.Target(["true"], [], [], 0, "rtt", [], [])
    config = {
        "target": dataclasses.asdict(target),
        "header": None,
        "offset_ns": 0,
        "names": str(tmp_path / "tasks.bin"),
        "cpu_share": 1.0,
        "ended_fd": ended_r,
        "requests_dir": str(requests),
        "max_disk": 0,
    }
    data = b"".join(pickle.dumps(x) for x in [config, *items, None])
    p = subprocess.run(
        [sys.executable, *watch.KEEPER_ARGS],
        input=data,
        capture_output=True,
        cwd=HOME,
        pass_fds=(ended_r,),
        timeout=120,
    )
    os.close(ended_r)
    os.close(ended_w)
    said = [json.loads(x) for x in p.stdout.decode().splitlines() if x.strip()]
    assert not p.stderr.strip(), p.stderr.decode()[-2000:]  # never a traceback
    return p.returncode, said


def test_an_unkeep_removes_the_directory_and_says_so(tmp_path):
    gone = tmp_path / "requests" / "20261130-182844.240196-6174-2.047ms-2"
    gone.mkdir(parents=True)
    (gone / "kept.bin").write_text("{}")
    rc, said = keeper(tmp_path, [[watch.Unkeep(gone)]])
    assert rc == 0
    assert said == [{"what": "unkept", "where": str(gone), "whole": True}]
    assert not gone.exists()


def test_a_keeper_that_fails_says_why_in_one_line_and_exits_1(tmp_path):
    rc, said = keeper(tmp_path, [["not a request"]])
    assert rc == 1
    assert [x["what"] for x in said] == ["keeper_failed"]
    assert "AttributeError" in said[0]["error"]
