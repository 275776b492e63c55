"""`ipctrace doctor` on this machine, and without privileges."""

import json
import os
import shutil
import subprocess

import pytest

from analysis import LOADER
from conftest import HOME, cli_argv, cli_env, needs_root

FEATURES = (
    "privileges",
    "btf",
    "tp_btf",
    "raw_tp",
    "tracepoint",
    "kprobe",
    "fentry",
    "perf_sampling",
    "ringbuf",
    "lockdown",
    "memlock",
    "clock",
)

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the answers differ without root")


# Two ways to lack the privileges to trace: an ordinary user, and root without the capabilities.
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]
NO_TRACING_CAPS = ["setpriv", "--inh-caps=-all", "--bounding-set=-bpf,-perfmon,-sys_admin"]


def doctor(*args, prefix=()):
    cmd = [*prefix, *cli_argv("doctor", *args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=cli_env(), cwd="/")


def reachable_by_others(path):
    """Whether users other than the owner may enter every directory down to path."""
    return all(p.stat().st_mode & 0o001 for p in [path, *path.parents])


@root_only
def test_table_names_every_feature_and_probe():
    r = doctor()
    assert r.returncode == 0, r.stderr
    for word in (
        "tp_btf",
        "kprobe",
        "fentry",
        "raw_tp",
        "BTF",
        "lockdown",
        "memlock",
        "ring buffer",
        "perf_event sampling",
        "privileges",
        "clock read",
    ):
        assert word in r.stdout
    for probe in ("sys_enter", "sched_switch", "sched_waking", "page_fault_user", "pipe_write", "copy_to_iter"):
        assert f"  {probe} " in r.stdout


@root_only
def test_json_agrees_with_what_the_kernel_has():
    d = json.loads(doctor("--json").stdout)
    assert set(FEATURES) <= set(d["features"]) and d["possible"]
    f = d["features"]
    assert f["btf"]["ok"] == os.path.exists("/sys/kernel/btf/vmlinux")
    # the clock read is timed, not assumed: a few ns at least, well under a microsecond
    assert f["clock"]["ok"] and 1 <= int(f["clock"]["detail"].split(": ")[1].split()[0]) < 1000
    assert f["kprobe"]["ok"] == os.path.exists("/sys/bus/event_source/devices/kprobe/type")
    # Each tracepoint probe uses the best mode the features allow.
    best = "tp_btf" if f["tp_btf"]["ok"] else "raw_tp" if f["raw_tp"]["ok"] else "tracepoint"
    assert d["attach"]["sys_enter"] == best and d["attach"]["sched_switch"] == best
    # A function probe is attached only where fentry or kprobes work, else it says why not.
    for probe in ("pipe_write", "futex_wait", "unix_send"):
        mode = d["attach"][probe]
        if f["fentry"]["ok"]:
            assert mode.startswith("fentry/fexit ")
        elif f["kprobe"]["ok"]:
            assert mode.startswith("kprobe/kretprobe ")
        else:
            assert mode.startswith("absent: ") and "fentry" in mode and "kprobe" in mode
    if not f["kprobe"]["ok"] and not f["fentry"]["ok"]:
        assert d["attach"]["copy_page_to_iter"].startswith("absent: ")


@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
@pytest.mark.parametrize("prefix", [AS_NOBODY, NO_TRACING_CAPS], ids=["nobody", "root-without-caps"])
def test_without_privileges_one_line_and_exit_2(prefix):
    if prefix is AS_NOBODY and not reachable_by_others(HOME):
        pytest.skip(f"{HOME} lies under a directory other users cannot enter: nobody cannot run it")
    r = doctor(prefix=prefix)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()
    assert len(last) == 1 and last[0].startswith("ipctrace: tracing is not possible here: no privileges")
    assert "privileges" in r.stdout and "NO" in r.stdout


@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to nobody")
def test_loader_refuses_to_trace_without_privileges(tmp_path):
    os.chmod(tmp_path, 0o777)
    r = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            str(LOADER),
            "--out",
            str(tmp_path / "x"),
            "--",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no privileges to trace" in lines[0] and "CAP_BPF" in lines[0]


@needs_root
def test_doctor_says_whether_uprobes_and_usdt_work(ipctrace):
    """trace --iteration-func and --markers need uprobes: doctor tries one for real (issue 28,
    point 3); this kernel takes them."""
    p = ipctrace("doctor", "--json")
    feats = json.loads(p.stdout)["features"]
    assert feats["uprobe"]["ok"] and "opened" in feats["uprobe"]["detail"]
    assert feats["usdt"]["ok"]
    text = ipctrace("doctor").stdout
    assert "uprobes (trace --iteration-func)  yes" in text and "USDT (trace --markers)" in text


def test_a_uprobe_is_refused_where_the_binary_has_no_entry(tmp_path):
    from analysis.run import doctor as doctor_run

    bad = tmp_path / "not-elf"
    bad.write_text("#!/bin/sh\n")
    got = doctor_run.uprobe_feature(str(bad))
    assert not got["ok"] and "not an ELF64 file" in got["detail"]
