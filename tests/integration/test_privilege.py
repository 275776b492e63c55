"""Issue 25, as an adversary: root only where BPF needs it. A second local user (made for
these tests, removed after) runs ipctrace through sudo (SUDO_UID/SUDO_GID) against root-owned
canaries and root-only files: every output a user names is written with the user's rights, no
root-only file is read into what the user gets, nothing hangs root, clean acts on ipctrace's
own records only, the traced command gets the user's environment and none of our
descriptors. One test (or a parametrised row) per finding of the issue."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import test_safety
from test_safety import as_user, canaries, start, sudo_env, untouched

from conftest import HOME, cli_argv, cli_env, needs_loader

# the second user and its playground, as issue 15's tests make them
adversary, area = test_safety.adversary, test_safety.area

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it makes a second user and runs as root")
SMALL = ["--iterations", "300", "--warmup", "10", "--runs", "1", "--quiet"]


def sudo(adversary, area, *args, timeout=300, **extra):
    """ipctrace ARGS as root for the adversary; (exit status, stdout, stderr)."""
    p = start(list(args), sudo_env(adversary, area, **extra))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"ipctrace {' '.join(map(str, args))} hung for {timeout} s")
    assert "Traceback" not in err and "internal error" not in err, err
    return p.returncode, out, err


def user_run(adversary, area, name, *more):
    out = area / "home" / name
    rc, _, err = sudo(adversary, area, "run", "null-syscall", *SMALL, "--no-trace", *more, "--out", out)
    assert rc == 0, err
    return out


def as_user_now(adversary, *cmd):
    subprocess.run(
        ["setpriv", f"--reuid={adversary[0]}", f"--regid={adversary[1]}", "--clear-groups", *map(str, cmd)],
        check=True,
    )


# --- findings 1 and 2: outputs written with root's rights -----------------------------------


def test_output_options_are_written_with_the_users_rights(adversary, area):
    """Finding 1: --compare-out over a root file, collect --into a root-only directory, export
    and report into a results directory of root's the user can only read: all refused with one
    line, every canary as it was."""
    vault = area / "vault"
    cans = canaries(vault, ["compare-out"])
    d, e = user_run(adversary, area, "D"), user_run(adversary, area, "E")
    rootres = area / "rootres"
    rc = subprocess.run(
        cli_argv("run", "null-syscall", *SMALL, "--no-trace", "--out", rootres), env=cli_env(), capture_output=True
    ).returncode
    assert rc == 0
    subprocess.run(["chmod", "-R", "a+rX", rootres], check=True)
    before = sorted(os.listdir(rootres))

    rc1, _, _ = sudo(adversary, area, "report", d, e, "--compare-out", cans["compare-out"])
    rc2, _, _ = sudo(adversary, area, "collect", d, "--into", vault / "new.duckdb")
    rc3, _, _ = sudo(adversary, area, "export", rootres, "--csv")
    rc4, _, _ = sudo(adversary, area, "report", rootres)
    assert untouched(cans) == []
    assert not (vault / "new.duckdb").exists()
    assert sorted(os.listdir(rootres)) == before
    assert (rc1, rc2, rc3, rc4) == (2, 2, 2, 2)


def test_bench_json_through_a_planted_link_leaves_the_target_alone(adversary, area):
    """Finding 2: bench --json ~/bench.json, a link the user planted to a root file."""
    cans = canaries(area / "vault", ["bench"])
    link = area / "home" / "bench.json"
    as_user_now(adversary, "ln", "-s", cans["bench"], link)
    rc, _, err = sudo(
        adversary,
        area,
        *"bench --rounds 2 --iterations 100 --warmup 0 --placement same-cpu --syscall-iterations 0".split(),
        *"--configs untraced --storm-iterations 0 --json".split(),
        link,
    )
    assert untouched(cans) == []
    assert rc == 0 and link.lstat().st_uid == adversary[0], err


# --- finding 3: clean --------------------------------------------------------------------


def test_clean_acts_only_on_what_ipctrace_recorded(adversary, area):
    """Finding 3: a user process posing as the conmon of a dead run's container (argv naming a
    container ipctrace-<dead pid>-... and a runtime of the user's): clean runs nothing of the
    user's and leaves the process alone."""
    home = area / "home"
    evil = home / "evil"
    evil.write_text(f"#!/bin/sh\nid -u > {home}/evil.ran\n")
    evil.chmod(0o755)
    os.chown(evil, *adversary)
    (home / "sleeper.sh").write_text("sleep 60\n")
    fake = as_user(
        adversary, f"exec -a conmon /bin/sh {home}/sleeper.sh -c abcdef0123 -n ipctrace-4000000-deadbeef -r {evil}"
    )
    try:
        time.sleep(0.5)
        clean = subprocess.run(cli_argv("clean"), env=cli_env(), capture_output=True, text=True, timeout=120)
        assert not (home / "evil.ran").exists()
        assert fake.poll() is None, "clean killed a user's process that only claimed to be a conmon"
        assert "ipctrace-4000000-deadbeef" not in clean.stdout
    finally:
        fake.kill()
        fake.wait()


# --- findings 4 and 7: links and FIFOs where report reads --------------------------------


@pytest.fixture
def sweep_dir(adversary, area):
    out = area / "home" / "sw"
    rc, _, err = sudo(
        adversary, area, "sweep", "pipe", "--sizes", "1,4096", *SMALL, "--no-trace", "--out", out, timeout=600
    )
    assert rc == 0, err
    assert (out / "sweep.png").is_file()
    return out


def test_report_reads_no_root_only_file_into_the_page(adversary, area, sweep_dir):
    """Finding 4: sweep.png linked to a root-only file: nothing of it in report.html."""
    secret = area / "vault" / "secret"
    secret.write_text("secret-ipctrace-canary-4411\n")
    secret.chmod(0o600)
    png = sweep_dir / "sweep.png"
    png.unlink()
    as_user_now(adversary, "ln", "-s", secret, png)
    sudo(adversary, area, "report", sweep_dir, timeout=240)
    import base64

    leaked = base64.b64encode(secret.read_bytes()).decode()[:16]
    for f in sweep_dir.rglob("*.html"):
        text = f.read_text(errors="replace")
        assert "secret-ipctrace-canary" not in text and leaked not in text, f


def test_report_of_a_fifo_picture_ends_by_itself(adversary, area, sweep_dir):
    """Finding 7: sweep.png a FIFO: report does not hang (sudo() fails the test after 240 s)."""
    png = sweep_dir / "sweep.png"
    png.unlink()
    as_user_now(adversary, "mkfifo", png)
    rc, _, err = sudo(adversary, area, "report", sweep_dir, timeout=240)
    assert rc in (0, 2), err


@needs_loader
def test_trace_iteration_on_a_fifo_binary_ends_by_itself(adversary, area):
    """Finding 7: --iteration naming a FIFO: refused at once, one line, exit 2."""
    lnk = area / "home" / "lnk"
    as_user_now(adversary, "mkfifo", lnk)
    rc, _, err = sudo(
        adversary,
        area,
        "trace",
        "--iteration-func",
        f"{lnk}:main",
        "--quiet",
        "--out",
        area / "home" / "t",
        "--",
        "/bin/true",
    )
    assert rc == 2 and "FIFO" in err, err


@needs_loader
def test_trace_iteration_cannot_read_a_root_only_binary(adversary, area):
    """Finding 8: --iteration /root-only/binary:function: refused as the user would be, and
    nothing of the binary reaches the user's trace."""
    secretbin = area / "vault" / "secretbin"
    subprocess.run(["cp", "/bin/true", secretbin], check=True)
    secretbin.chmod(0o700)
    rc, _, err = sudo(
        adversary,
        area,
        *["trace", "--iteration-func", f"{secretbin}:main", "--quiet", "--out", area / "home" / "t", "--", "/bin/true"],
    )
    assert rc == 2 and "Permission denied" in err, err
    assert not (area / "home" / "t").exists()


# --- finding 5: a dataset is data ------------------------------------------------------------


def test_a_crafted_dataset_reads_no_file(adversary, area):
    """Finding 5: `runs` replaced by a view reading a root-only file: compare prints nothing of
    it and says the dataset is not one of ours."""
    secret = area / "vault" / "secret"
    secret.write_text("secret-ipctrace-canary-5522\n")
    secret.chmod(0o600)
    d, e = user_run(adversary, area, "D"), user_run(adversary, area, "E")
    ds = area / "home" / "d.duckdb"
    rc, _, err = sudo(adversary, area, "collect", d, e, "--into", ds)
    assert rc == 0, err
    # crafted as root here: the view must not work even for a file root made
    craft = (
        "import sys, duckdb\n"
        "c = duckdb.connect(sys.argv[1])\n"
        "c.execute('alter table runs rename to runs_real')\n"
        "c.execute(f\"create view runs as select * replace (label || (select content from read_text('{sys.argv[2]}'))"
        ' as label) from runs_real")\n'
    )
    subprocess.run([sys.executable, "-c", craft, ds, secret], check=True)
    for who in ("root", "user"):
        if who == "root":
            p = subprocess.run(cli_argv("compare", ds), env=cli_env(), capture_output=True, text=True, timeout=120)
            rc, out, err = p.returncode, p.stdout, p.stderr
        else:
            rc, out, err = sudo(adversary, area, "compare", ds)
        assert "secret-ipctrace-canary" not in out + err
        assert rc == 2 and "view" in err, (who, err)


# --- finding 6: --comm ---------------------------------------------------------------------


@needs_loader
def test_comm_under_sudo_follows_only_the_users_processes(adversary, area, tmp_path):
    """Finding 6: a root process named like --comm is neither traced nor sampled for the user."""
    rootd = tmp_path / "rootsecretd"
    subprocess.run(["cp", "/bin/sleep", rootd], check=True)
    victim = subprocess.Popen([rootd, "30"])
    try:
        time.sleep(0.3)
        out = area / "home" / "t"
        sudo(
            adversary,
            area,
            "trace",
            "--comm",
            "rootsecretd",
            "--duration",
            "2",
            "--sample-hz",
            "99",
            "--quiet",
            "--out",
            out,
        )
        for f in out.rglob("*.json") if out.exists() else []:
            assert f'"{victim.pid}"' not in f.read_text() and f" {victim.pid}," not in f.read_text(), f
        if (out / "trace.json").exists():
            import json

            assert victim.pid not in json.loads((out / "trace.json").read_text()).get("pids", [])
    finally:
        victim.kill()
        victim.wait()


# --- finding 9: HOME -------------------------------------------------------------------------


def test_a_home_kept_by_sudo_E_is_never_written_with_roots_rights(adversary, area, sweep_dir):
    """Finding 9: with HOME the user's (sudo -E) and matplotlib's font cache there a link to a
    root file, report leaves the file alone and nothing of root's appears in that HOME."""
    home = area / "home"
    cans = canaries(area / "vault", ["fontlist"])
    cache = home / ".cache" / "matplotlib"
    as_user_now(adversary, "mkdir", "-p", cache)
    import matplotlib

    as_user_now(
        adversary, "ln", "-s", cans["fontlist"], cache / f"fontlist-v{matplotlib.ft2font.__freetype_version__}.json"
    )
    for v in ("330", "390", "3.11.0"):
        as_user_now(adversary, "ln", "-sf", cans["fontlist"], cache / f"fontlist-v{v}.json")
    sudo(adversary, area, "report", sweep_dir, timeout=240, HOME=str(home))
    assert untouched(cans) == []
    assert [p for p in home.rglob("*") if p.lstat().st_uid == 0] == []


# --- finding 10: concurrent collects --------------------------------------------------------


def test_concurrent_collects_lose_no_run(tmp_path):
    """Finding 10: two `collect --append` at once into one dataset: both runs are in it; two
    collects at once into one new --into: one makes it, the other is refused (exit 2)."""
    runs = []
    for name in ("a", "b", "c"):
        p = subprocess.run(
            cli_argv("run", "null-syscall", *SMALL, "--no-trace", "--out", tmp_path / name),
            env=cli_env(),
            capture_output=True,
        )
        assert p.returncode == 0
        runs.append(tmp_path / name)
    ds = tmp_path / "d.duckdb"
    assert (
        subprocess.run(cli_argv("collect", runs[0], "--into", ds), env=cli_env(), capture_output=True).returncode == 0
    )
    ps = [
        subprocess.Popen(cli_argv("collect", r, "--into", ds, "--append"), env=cli_env(), stderr=subprocess.PIPE)
        for r in runs[1:]
    ]
    assert [p.wait(timeout=300) for p in ps] == [0, 0]
    import duckdb

    with duckdb.connect(str(ds), read_only=True) as c:
        assert c.execute("select count(*) from runs").fetchone()[0] == 3

    new = tmp_path / "new.duckdb"
    ps = [
        subprocess.Popen(cli_argv("collect", r, "--into", new), env=cli_env(), stderr=subprocess.PIPE, text=True)
        for r in runs[:2]
    ]
    codes = sorted(p.wait(timeout=300) for p in ps)
    assert codes == [0, 2], [p.stderr.read() for p in ps]


# --- finding 12: what a killed run leaves ---------------------------------------------------


@needs_loader
def test_a_traced_run_killed_leaves_nothing_of_roots_in_the_users_directory(adversary, area):
    """Finding 12: SIGKILL of `sudo ipctrace run` while it traces: events.bin and every other
    file in the user's directory are the user's."""
    out = area / "home" / "k"
    p = start(
        ["run", "pipe", "--iterations", "200000", "--warmup", "10", "--runs", "1", "--quiet", "--out", out],
        sudo_env(adversary, area),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "events.bin").exists():
        time.sleep(0.05)
    time.sleep(0.5)
    p.kill()
    p.wait()
    time.sleep(1)  # the tracer and the workload die with the front end (parent-death signal)
    assert (out / "events.bin").exists()
    assert {f.name: f.lstat().st_uid for f in out.iterdir() if f.lstat().st_uid != adversary[0]} == {}


def test_ctrl_c_while_chromium_renders_leaves_nothing(tmp_path):
    """Finding 12: the flame graphs' browser is ended with its whole process group and its
    temporary files go with it, whatever ends the wait."""
    from analysis.run import flamegraphs

    if not flamegraphs.chromium():
        pytest.skip("chromium is not installed")
    seen = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("ipctrace-flame-*"))
    script = (
        "import signal, threading, os\n"
        "from analysis.run import flamegraphs\n"
        "threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()\n"
        "import pandas as pd\n"
        "try:\n"
        "    flamegraphs.render_svgs({'a': (pd.Series({'x;y': 1.0}), 'a: t', 'ns')}, timeout=60)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted')\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", script], env=cli_env(), cwd=HOME, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    left = set(Path(os.environ.get("TMPDIR", "/tmp")).glob("ipctrace-flame-*")) - seen
    assert left == set()
    time.sleep(0.5)
    alive = subprocess.run(["pgrep", "-f", "ipctrace-flame-"], capture_output=True, text=True).stdout.split()
    assert alive == []


# --- finding 13: the traced command's environment and descriptors ---------------------------


@needs_loader
def test_the_traced_command_gets_the_users_environment_and_no_descriptor(adversary, area):
    out = area / "home" / "t"
    report = area / "home" / "env.txt"
    script = f"{{ env; echo FDS; ls /proc/$$/fd; }} > {report}"
    rc, _, err = sudo(adversary, area, "trace", "--quiet", "--out", out, "--", "sh", "-c", script)
    assert rc in (0, 1, 2), err
    text = report.read_text()
    env = dict(line.split("=", 1) for line in text.split("FDS")[0].splitlines() if "=" in line)
    fds = sorted(int(x) for x in text.split("FDS")[1].split())
    import pwd

    assert (
        env.get("HOME") == pwd.getpwuid(adversary[0]).pw_dir and env.get("USER") == pwd.getpwuid(adversary[0]).pw_name
    )
    assert [k for k in env if k.startswith(("SUDO_", "IPCTRACE_")) or k == "PYTHONPATH"] == []
    # 0-2, and the one `ls` opened to list the directory
    assert fds[:3] == [0, 1, 2] and len(fds) <= 4, fds


@needs_loader
def test_signals_reach_root_s_programs_through_the_broker(adversary, area):
    """A SIGINT sent to a sudo run (the broker's pid: the launcher execs it) reaches the user's
    front end, which passes it on to root's tracer through the broker: the run ends as
    interrupted (130) with what was measured."""
    out = area / "home" / "int"
    p = start(
        ["run", "pipe", "--iterations", "5000000", "--warmup", "10", "--runs", "1", "--quiet", "--out", out],
        sudo_env(adversary, area),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "events.bin").exists():
        time.sleep(0.05)
    time.sleep(1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
