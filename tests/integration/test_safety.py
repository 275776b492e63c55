"""Issue 15, as an adversary: a second local user (made for these tests and removed after)
attacks root runs made on their behalf (SUDO_UID/SUDO_GID, as sudo sets them) in their own
directory. Root-owned canaries stand for the files an attacker would want root to write or
give away: none may change content or owner, nothing outside the results directory may
change owner, and every run either succeeds or fails with one line. The races (two runs
with one --out, SIGKILL just after summary.json, signals during start-up and analysis) are
repeated enough to catch them."""

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from analysis import OUTPUT
from conftest import HOME, cli_argv, cli_env, needs_loader

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it makes a second user and runs as root")
traced_only = needs_loader
SMALL = ["--warmup", "100", "--runs", "1", "--quiet"]
USER = f"ipctrace-adv{os.getpid() % 100000}"


# --- the adversary and its playground --------------------------------------------


@pytest.fixture(scope="module")
def adversary():
    """(uid, gid) of a fresh local user; removed with every process it still has."""
    if (
        subprocess.run(
            ["useradd", "-M", "-d", "/nonexistent", "-s", "/usr/sbin/nologin", USER], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("cannot create a second local user (useradd)")
    import pwd

    pw = pwd.getpwnam(USER)
    try:
        yield pw.pw_uid, pw.pw_gid
    finally:
        for _ in range(50):
            if subprocess.run(["pkill", "-KILL", "-u", USER]).returncode == 1:  # 1: none left
                break
            time.sleep(0.1)
        subprocess.run(["userdel", USER], capture_output=True)


@pytest.fixture
def area(adversary):
    """A directory everyone can reach: home/ is the adversary's, vault/ root's only (0700),
    with root-owned canaries in it."""
    top = Path(tempfile.mkdtemp(prefix="ipctrace-test-adv."))
    top.chmod(0o755)
    home, vault = top / "home", top / "vault"
    home.mkdir()
    os.chown(home, *adversary)
    vault.mkdir(mode=0o700)
    # The built programs where the adversary can run them, as their own checkout would be.
    out = top / "output"
    out.mkdir()
    for p in OUTPUT.iterdir():
        if p.is_file() and os.access(p, os.X_OK):
            shutil.copy2(p, out / p.name)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def canaries(vault, names):
    """A root-owned 0600 canary per name; returns {name: path}."""
    found = {}
    for i, n in enumerate(names):
        c = vault / f"c{i}"
        c.write_text(f"canary {i}\n")
        c.chmod(0o600)
        found[n] = c
    return found


def untouched(canary_paths):
    """The canaries whose content or owner changed."""
    bad = []
    for n, c in canary_paths.items():
        i = c.name[1:]
        try:
            if c.read_text() != f"canary {i}\n" or c.lstat().st_uid != 0:
                bad.append(n)
        except OSError:
            bad.append(n)
    return bad


def sudo_env(adversary, area, **extra):
    return {
        **cli_env(),
        "SUDO_UID": str(adversary[0]),
        "SUDO_GID": str(adversary[1]),
        "SUDO_USER": USER,
        "IPCTRACE_OUTPUT": str(area / "output"),
        **extra,
    }


def as_user(adversary, script, *args):
    """bash -c script as the adversary, in the background."""
    return subprocess.Popen(
        [
            "setpriv",
            f"--reuid={adversary[0]}",
            f"--regid={adversary[1]}",
            "--clear-groups",
            "bash",
            "-c",
            script,
            "attack",
            *map(str, args),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def start(args, env, **kw):
    return subprocess.Popen(
        cli_argv(*map(str, args)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


def one_line_or_success(rc, err):
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 0 or (rc in (1, 2) and len(lines) == 1 and lines[0].startswith("ipctrace: ")), (rc, err)


def owners_outside(top, out):
    """Paths under top, outside out, that root does not own (the adversary's home excepted)."""
    bad = []
    for p in top.rglob("*"):
        if p == top / "home" or out in p.parents or p == out or "output" in p.parts:
            continue
        if p.lstat().st_uid != 0 and (top / "home") not in p.parents:
            bad.append(p)
    return bad


# --- finding 1: links planted in the results directory ------------------------------

# Every name root has written or opened in a run's directory (the front end, the tracer,
# the sampler, a workload that needs root), before and after this issue.
ROOT_NAMES = [
    ".meta.json.tmp",
    ".summary.json.tmp",
    ".trace.json.tmp",
    ".workload.json.tmp",
    "samples.json.tmp",
    ".iterations.parquet.tmp",
    "iterations.parquet",
    "events.parquet",
    "breakdown.parquet",
    "summary.json",
    "meta.json",
    "trace.json",
    "samples.json",
    ".progress",
]
TRACER_NAMES = ["events.bin"]

PLANT = r"""
d=$1; v=$2; shift 2
end=$((SECONDS+60))
while [ $SECONDS -lt $end ]; do
  if [ -e "$d/INCOMPLETE" ]; then
    i=0; for n in "$@"; do [ -e "$d/$n" ] || [ -L "$d/$n" ] || ln -s "$v/c$i" "$d/$n" 2>/dev/null; i=$((i+1)); done
  elif [ -e "$d/summary.json" ]; then exit 0; fi
  sleep 0.002
done
"""


@traced_only
@pytest.mark.parametrize("names", [ROOT_NAMES, TRACER_NAMES], ids=["front-end-and-sampler", "tracer"])
def test_links_planted_in_the_results_directory_are_never_followed(adversary, area, names):
    """Finding 1: root writes no file through a link the user planted while the run goes."""
    out = area / "home" / "out"
    cans = canaries(area / "vault", names)
    planter = as_user(adversary, PLANT, out, area / "vault", *names)
    p = start(
        ["run", "pipe", "--iterations", "30000", "--sample-hz", "99", *SMALL, "--out", out], sudo_env(adversary, area)
    )
    _, err = p.communicate(timeout=300)
    planter.kill()
    planter.wait()
    assert untouched(cans) == [], f"root wrote through planted links (run exit {p.returncode}: {err})"
    one_line_or_success(p.returncode, err)
    assert owners_outside(area, out) == []


# --- finding 2: the directory swapped for a link during the run -----------------------

SWAP = r"""
d=$1; target=$2; end=$((SECONDS+60))
while [ $SECONDS -lt $end ]; do
  if [ -e "$d/INCOMPLETE" ]; then mv "$d" "$d.moved" && ln -s "$target" "$d" && exit 0; fi
  sleep 0.002
done
"""


@pytest.mark.parametrize("traced", [False, pytest.param(True, marks=traced_only)], ids=["untraced", "traced"])
def test_swapping_the_directory_for_a_link_gives_nothing_away(adversary, area, traced):
    """Finding 2: the user who owns the parent swaps the results directory for a link to a
    root-owned tree during the run: nothing in that tree changes owner or content, and the
    run's files land in the directory it made (now out.moved), the user's."""
    out = area / "home" / "out"
    tree = area / "roottree"
    tree.mkdir()
    (tree / "sub").mkdir()
    cans = canaries(tree / "sub", ["a", "b"]) | canaries(tree, ["c"])
    swapper = as_user(adversary, SWAP, out, tree)
    p = start(
        ["run", "pipe", "--iterations", "20000", *SMALL, *([] if traced else ["--no-trace"]), "--out", out],
        sudo_env(adversary, area),
    )
    _, err = p.communicate(timeout=300)
    swapper.wait(timeout=60)
    assert out.is_symlink(), "the swap did not happen"
    assert untouched(cans) == []
    assert all(q.lstat().st_uid == 0 for q in [tree, *tree.rglob("*")]), "the root-owned tree changed owner"
    one_line_or_success(p.returncode, err)
    if p.returncode == 0:
        moved = area / "home" / "out.moved"
        assert {q.lstat().st_uid for q in moved.iterdir()} == {adversary[0]}, list(moved.iterdir())
        assert (moved / "summary.json").exists()


# --- finding 3: --out judged with the user's rights --------------------------------------


def test_out_is_made_with_the_invoking_users_rights(adversary, area):
    """Finding 3: under sudo, root does not make --out where the user cannot, nor take over an
    existing root-owned directory."""
    deep = area / "vault" / "a" / "b" / "c"
    p = start(["run", "pipe", "--no-trace", "--iterations", "1000", *SMALL, "--out", deep], sudo_env(adversary, area))
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "Permission denied" in err, err
    assert not (area / "vault" / "a").exists()

    rootdir = area / "home" / "rootowned"
    rootdir.mkdir()
    p = start(
        ["run", "pipe", "--no-trace", "--iterations", "1000", *SMALL, "--out", rootdir], sudo_env(adversary, area)
    )
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1 and "not writable" in err, err
    assert rootdir.lstat().st_uid == 0 and not any(rootdir.iterdir())


def test_out_made_for_the_user_is_theirs_and_nothing_above_it_changes(adversary, area):
    out = area / "home" / "x" / "y"
    p = start(["run", "pipe", "--no-trace", "--iterations", "1000", *SMALL, "--out", out], sudo_env(adversary, area))
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert {q.lstat().st_uid for q in [area / "home" / "x", out, *out.iterdir()]} == {adversary[0]}
    assert owners_outside(area, out) == []


# --- finding 4: a FIFO where root reads -------------------------------------------------

FIFOS = r"""
d=$1; end=$((SECONDS+60))
while [ $SECONDS -lt $end ]; do
  if [ -d "$d" ] && [ -w "$d" ]; then
    for n in .progress .progress.tmp progress; do [ -e "$d/$n" ] && [ ! -p "$d/$n" ] && rm -f "$d/$n"; [ -e "$d/$n" ] || mkfifo "$d/$n" 2>/dev/null; done
  fi
  [ -e "$d/summary.json" ] && exit 0
  sleep 0.002
done
"""


def test_a_fifo_in_the_results_directory_never_blocks_root(adversary, area):
    """Finding 4: FIFOs planted under every name of the progress counter: the run ends by itself
    (done, or failed with one line), and a SIGTERM is honoured at once."""
    out = area / "home" / "out"
    planter = as_user(adversary, FIFOS, out)
    p = start(["run", "pipe", "--no-trace", "--iterations", "30000", *SMALL, "--out", out], sudo_env(adversary, area))
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            p.communicate(timeout=10)
            pytest.fail("the run hung on a FIFO for 60 s (SIGTERM ended it)")
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail("the run hung on a FIFO for 60 s, and SIGTERM did not end it")
    finally:
        planter.kill()
        planter.wait()
    one_line_or_success(p.returncode, err)


def test_a_fifo_in_place_of_a_file_root_reads_is_refused(tmp_path):
    """The one reader every command uses opens without blocking and accepts regular files only."""
    from analysis.errors import UsageError
    from analysis.store import safeio

    os.mkfifo(tmp_path / "summary.json")
    os.symlink("/etc/passwd", tmp_path / "workload.json")
    start_t = time.monotonic()
    with pytest.raises(UsageError, match="FIFO"):
        safeio.read_bytes(tmp_path / "summary.json")
    with pytest.raises(UsageError, match="symbolic link"):
        safeio.read_bytes(tmp_path / "workload.json")
    assert time.monotonic() - start_t < 1


# --- finding 5: fixed names in /tmp ------------------------------------------------------


def test_no_fixed_names_in_tmp():
    """Finding 5: nothing names a fixed file in /tmp (a link planted there would be written)."""
    hits = []
    for top in ("ipctrace", "tools", "analysis", "loaders", "workloads", "bpf", "Makefile"):
        for f in [HOME / top] if (HOME / top).is_file() else (HOME / top).rglob("*"):
            if f.is_file() and f.suffix not in (".js", ".css", ".so", ".o") and "vendor" not in f.parts:
                try:
                    text = f.read_text()
                except (UnicodeDecodeError, OSError):
                    continue
                hits += [f"{f}: {m}" for m in re.findall(r"/tmp/[\w.-]*ipctrace[\w.-]*", text)]
    assert hits == []


# --- finding 6: two runs with one --out ----------------------------------------------------

# Both runs imported and waiting; released together by a file appearing (a start-up that
# takes about a second would otherwise rarely let their checks of --out meet).
AT_ONCE = """
import os, sys, time
barrier, ready, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
from analysis.cli import main as cli  # noqa: F401  (paid before the start)
from analysis.run import analyse_run, runner  # noqa: F401
open(ready, "w").close()
while not os.path.exists(barrier):
    time.sleep(0.0002)
rc = cli.main(argv)
sys.stdout.flush()
sys.stderr.flush()
os._exit(rc)
"""


def test_two_runs_with_the_same_out_never_destroy_each_other(tmp_path):
    """Finding 6: released at the same moment, one measures and the other is refused (exit 2)
    before it touches anything; ten times, half of them into a directory that exists."""
    import json

    bad = []
    for k in range(10):
        out, barrier = tmp_path / f"same{k}", tmp_path / f"go{k}"
        if k % 2:
            out.mkdir()
        args = ["run", "pipe", "--no-trace", "--iterations", "20000", *SMALL, "--out", out]
        ready = [tmp_path / f"ready{k}{i}" for i in range(2)]
        a, b = [
            subprocess.Popen(
                [sys.executable, "-c", AT_ONCE, str(barrier), str(r), *map(str, args)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=cli_env(),
            )
            for r in ready
        ]
        end = time.monotonic() + 60
        while not all(r.exists() for r in ready) and time.monotonic() < end:
            time.sleep(0.01)
        barrier.touch()
        (_, ea), (_, eb) = a.communicate(timeout=120), b.communicate(timeout=120)
        codes = sorted([a.returncode, b.returncode])
        refused = eb if b.returncode == 2 else ea
        ok = (
            codes == [0, 2]
            and (out / "summary.json").exists()
            and not (out / "INCOMPLETE").exists()
            and "Traceback" not in ea + eb
            and len(refused.strip().splitlines()) == 1
        )
        if ok:
            s = json.loads((out / "summary.json").read_text())
            ok = s["metrics"]["rtt"]["n"] == 20000 and s["status"] == "complete"
        if not ok:
            bad.append(f"trial {k}: exits {codes}: {ea.strip()[-100:]} | {eb.strip()[-100:]}")
    assert bad == []


# --- finding 7: SIGKILL just after summary.json ----------------------------------------------


def test_a_run_killed_after_its_summary_never_looks_complete(tmp_path):
    """Finding 7: SIGKILL the moment summary.json appears; report, compare, export and explain
    then refuse the directory (exit 2) unless it really was completed; eight times."""
    good = tmp_path / "good"
    assert (
        start(["run", "pipe", "--no-trace", "--iterations", "2000", *SMALL, "--out", good], cli_env()).wait(timeout=120)
        == 0
    )
    caught = 0
    for k in range(8):
        out = tmp_path / f"k{k}"
        p = start(["run", "pipe", "--no-trace", "--iterations", "20000", *SMALL, "--out", out], cli_env())
        while p.poll() is None and not (out / "summary.json").exists():
            time.sleep(0.0005)
        p.kill()
        p.communicate()
        if not (out / "summary.json").exists():
            continue
        complete = not (out / "INCOMPLETE").exists()
        caught += not complete
        for args in (["report", out], ["compare", good, out], ["export", out, "--csv"]):
            q = subprocess.run(
                cli_argv(*map(str, args)),
                capture_output=True,
                text=True,
                env=cli_env(),
                timeout=120,
            )
            if complete:
                assert q.returncode == 0, q.stderr
            else:
                assert q.returncode == 2 and "incomplete" in q.stderr and len(q.stderr.strip().splitlines()) == 1, (
                    args[0],
                    q.returncode,
                    q.stderr,
                )
    assert caught, "no kill landed between summary.json and the end of the run"


# --- finding 9: signals, hand-over of sweep files, what export says, a full disk ------------


def test_ctrl_c_during_start_up_is_exit_130_without_a_traceback(tmp_path):
    """Finding 9: SIGINT while the launcher sets up and Python still imports the front end
    (from the launcher's first line on: before it, bash has not started)."""
    bad = []
    for k, delay in enumerate([0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.45, 0.6, 0.8, 1.0, 1.3, 1.7, 2.2, 2.8]):
        p = subprocess.Popen(
            [
                str(HOME / "ipctrace"),
                "run",
                "pipe",
                "--no-trace",
                "--iterations",
                "2000000",
                *SMALL,
                "--out",
                str(tmp_path / f"r{k}"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        if p.returncode != 130 or "Traceback" in err:
            bad.append((delay, p.returncode, err.strip()[-200:]))
    assert bad == []


@traced_only
def test_ctrl_c_during_the_analysis_is_exit_130(tmp_path):
    """Finding 9: SIGINT while events are decoded, the breakdown computed and the files
    written: exit 130 (never death by the signal), one line, no traceback; six times."""
    rng = random.Random(9)
    bad = []
    for k in range(6):
        out = tmp_path / f"r{k}"
        p = start(["run", "pipe", "--iterations", "60000", *SMALL, "--out", out], cli_env())
        while p.poll() is None and not (out / "trace.json").exists():
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.8))
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        if p.returncode not in (0, 130) or "Traceback" in err:
            bad.append((p.returncode, err.strip()[-200:]))
    assert bad == []


def test_sweep_files_are_the_invoking_users(adversary, area):
    """Finding 9: under sudo, the sweep's own files (summary.json, sweep.png) are the user's too."""
    out = area / "home" / "sweep"
    p = start(
        ["sweep", "pipe", "--sizes", "1,512", "--no-trace", "--iterations", "2000", *SMALL, "--out", out],
        sudo_env(adversary, area),
    )
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    owners = {q: q.lstat().st_uid for q in [out, *out.rglob("*")]}
    assert set(owners.values()) == {adversary[0]}, owners
    assert (out / "sweep.png").exists() and (out / "summary.json").exists()


def test_suite_files_are_the_invoking_users(adversary, area):
    """Finding 9: under sudo, the suite's own files (suite.md, suite.csv, suite.json) are the
    user's too, as is everything in its directory."""
    out = area / "home" / "suite"
    p = start(["suite", "--quick", "--no-trace", "--quiet", "--out", out], sudo_env(adversary, area))
    _, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert all((out / f).is_file() for f in ("suite.md", "suite.csv", "suite.json")), sorted(out.iterdir())
    owners = {q: q.lstat().st_uid for q in [out, *out.rglob("*")]}
    assert {q: u for q, u in owners.items() if u != adversary[0]} == {}


@traced_only
def test_export_says_when_a_traced_run_lost_its_events(tmp_path):
    """Finding 9: export --csv and --perfetto of a traced run without events.parquet."""
    out = tmp_path / "r"
    assert start(["run", "pipe", "--iterations", "2000", *SMALL, "--out", out], cli_env()).wait(timeout=120) == 0
    (out / "events.parquet").unlink()
    for fmt in ("--csv", "--perfetto"):
        q = subprocess.run(
            cli_argv("export", str(out), fmt),
            capture_output=True,
            text=True,
            env=cli_env(),
            timeout=120,
        )
        assert q.returncode == 2 and "was traced" in q.stderr and "events.parquet" in q.stderr, q.stderr
        assert len(q.stderr.strip().splitlines()) == 1


@traced_only
def test_a_full_disk_names_the_file_that_failed_first(tmp_path):
    """Finding 9: the tracer stopped by a full file system says events.bin, and leaves no
    temporary behind."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=600k", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a small tmpfs")
    try:
        p = start(["run", "pipe", "--iterations", "200000", *SMALL, "--out", mnt / "r"], cli_env())
        _, err = p.communicate(timeout=300)
        lines = [line for line in err.splitlines() if line.strip()]
        assert p.returncode in (1, 2) and len(lines) == 1 and "Traceback" not in err, err
        assert "events.bin" in lines[0] and "No space left" in lines[0], lines[0]
        assert not [q.name for q in (mnt / "r").iterdir() if q.name.endswith(".tmp")]
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


# --- finding 10: untraced runs need no privilege ------------------------------------------------


def test_another_user_can_run_untraced_with_the_launcher(adversary, area):
    """Finding 10: .venv comes from the system's interpreter, so a user other than root runs
    `./ipctrace run --no-trace` (root's PATH here starts with pyenv under /root)."""
    venv_python = (HOME / ".venv" / "bin" / "python3").resolve()
    assert not str(venv_python).startswith("/root"), venv_python
    reach = subprocess.run(
        [
            "setpriv",
            f"--reuid={adversary[0]}",
            f"--regid={adversary[1]}",
            "--clear-groups",
            "test",
            "-x",
            str(HOME / "ipctrace"),
        ]
    )
    if reach.returncode != 0:
        pytest.skip(f"{HOME} cannot be reached by another user (a private clone)")
    out = area / "home" / "plain"
    p = subprocess.run(
        [
            "setpriv",
            f"--reuid={adversary[0]}",
            f"--regid={adversary[1]}",
            "--clear-groups",
            "env",
            "-i",
            "PATH=/usr/bin:/bin",
            "HOME=/nonexistent",
            str(HOME / "ipctrace"),
            "run",
            "pipe",
            "--no-trace",
            "--iterations",
            "2000",
            *SMALL,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert (out / "summary.json").exists()
