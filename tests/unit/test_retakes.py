"""Only a test marked timing is retaken (tests/conftest.py): a deterministic test that fails its
first try fails the suite, though it would pass a second. Run as the suite runs: pytest with the
project's conftest.py as a plugin, on a test that fails exactly once."""

import subprocess
import sys

from conftest import HOME

ONCE = """
import pytest
from pathlib import Path

def fails_first_try(name):
    seen = Path(__file__).with_name(name)
    if not seen.exists():
        seen.write_text("tried")
        raise AssertionError("first try")

{mark}
def test_once():
    fails_first_try("tried")
"""


def outcome(tmp_path, mark):
    (tmp_path / "test_once.py").write_text(ONCE.format(mark=mark))
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rR", "-p", "conftest", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": f"{HOME / 'tests'}:{HOME}", "PATH": "/usr/bin:/bin"},
    )
    return p.returncode, (p.stdout + p.stderr).strip()


def test_a_deterministic_test_that_needs_a_retake_fails(tmp_path):
    rc, out = outcome(tmp_path, "")
    assert rc == 1 and "1 failed" in out.splitlines()[-1] and "rerun" not in out, out


def test_a_timing_test_gets_one_retake(tmp_path):
    rc, out = outcome(tmp_path, "@pytest.mark.timing")
    assert rc == 0 and "1 passed, 1 rerun" in out.splitlines()[-1], out


def test_a_retake_asked_for_a_test_not_marked_timing_is_refused(tmp_path):
    rc, out = outcome(tmp_path, "@pytest.mark.flaky(reruns=3)")
    assert rc != 0 and "only for a test marked timing" in out, out
