"""Bad input, table-driven: damaged results directories, bad options, a broken environment,
missing programs, a kernel without BTF. Each case runs the real front end (or the C program
it names) and must end with exactly one line on stderr, exit 2, and no traceback.
(The plain CLI argument errors are in test_cli.py.)"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import DRIVER, LOADER
from conftest import cli_argv, cli_env, needs_loader, run_argv

needs_loader = needs_loader


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """One small real traced run of pipe: the intact results directory the cases damage."""
    out = tmp_path_factory.mktemp("good") / "pipe"
    p = subprocess.run(
        run_argv("pipe", str(out), iterations="2000", warmup="100"),
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(),
    )
    assert p.returncode == 0, p.stderr
    return out


def damaged(src, dst, change):
    shutil.copytree(src, dst)
    change(dst)
    return dst


def write(name, data):
    def change(d):
        (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())

    return change


def truncate(name, keep):
    def change(d):
        raw = (d / name).read_bytes()
        (d / name).write_bytes(raw[: keep if keep >= 0 else len(raw) + keep])

    return change


def remove(name):
    return lambda d: (d / name).unlink()


def edit_summary(**fields):
    def change(d):
        s = json.loads((d / "summary.json").read_text())
        for k, v in fields.items():
            if v is None:
                s.pop(k, None)
            else:
                s[k] = v
        (d / "summary.json").write_text(json.dumps(s))

    return change


def one_column_parquet(name):
    def change(d):
        pq.write_table(pa.table({"run": [0, 0]}), d / name)

    return change


def only_incomplete(d):
    (d / "summary.json").unlink()
    (d / "INCOMPLETE").write_text("")


# (id, how the directory is damaged, command with DIR, what the one line says)
DAMAGED = [
    ("summary-truncated", truncate("summary.json", 200), "compare DIR DIR", "not valid JSON"),
    ("summary-empty", write("summary.json", ""), "compare DIR DIR", "not valid JSON"),
    ("summary-binary", write("summary.json", b"\xff\xfe\x00garbage"), "compare DIR DIR", "summary.json"),
    ("summary-not-object", write("summary.json", "[1, 2]"), "compare DIR DIR", "no schema_version"),
    ("summary-schema-99", edit_summary(schema_version=99), "compare DIR DIR", "schema_version 99"),
    ("summary-schema-string", edit_summary(schema_version="1"), "compare DIR DIR", "schema_version '1'"),
    ("summary-no-schema", edit_summary(schema_version=None), "compare DIR DIR", "no schema_version"),
    ("summary-no-metrics", edit_summary(metrics=None), "compare DIR DIR", "no metrics"),
    ("summary-missing", remove("summary.json"), "compare DIR DIR", "has no summary.json"),
    ("run-unfinished", only_incomplete, "export DIR --csv", "did not finish"),
    ("iterations-truncated", truncate("iterations.parquet", 300), "export DIR --csv", "truncated or corrupted"),
    ("iterations-tail-cut", truncate("iterations.parquet", -9), "export DIR --csv", "truncated or corrupted"),
    (
        "iterations-garbage",
        write("iterations.parquet", b"PAR1" + bytes(100)),
        "export DIR --csv",
        "truncated or corrupted",
    ),
    ("iterations-missing", remove("iterations.parquet"), "export DIR --csv", "has no iterations.parquet"),
    ("iterations-columns", one_column_parquet("iterations.parquet"), "export DIR --csv", "lacks the columns"),
    ("events-truncated", truncate("events.parquet", 500), "explain DIR", "events.parquet is truncated"),
    (
        "events-garbage",
        write("events.parquet", b"not parquet at all"),
        "export DIR --perfetto",
        "events.parquet is truncated",
    ),
    ("events-missing", remove("events.parquet"), "explain DIR", "no events.parquet"),
    ("workload-truncated", write("workload.json", '{"metrics": ['), "explain DIR", "workload.json is not valid"),
    ("workload-missing", remove("workload.json"), "explain DIR", "workload.json does not exist"),
]


def check_one_line(p, says, prefix="ipctrace"):
    assert "Traceback" not in p.stdout + p.stderr
    lines = [line for line in p.stderr.split("\n") if line.strip()]
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(prefix + ":"), lines[0]
    assert says in lines[0], lines[0]


def cli(args, env=None, cwd=None, timeout=120):
    return subprocess.run(
        cli_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**cli_env(), **(env or {})},
        cwd=cwd,
    )


@pytest.mark.parametrize("change,command,says", [c[1:] for c in DAMAGED], ids=[c[0] for c in DAMAGED])
def test_damaged_results(traced, tmp_path, change, command, says):
    d = damaged(traced, tmp_path / "d", change)
    p = cli([str(d) if a == "DIR" else a for a in command.split()])
    check_one_line(p, says)


def test_results_dir_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    check_one_line(cli(["export", str(tmp_path / "f"), "--csv"]), "is not a directory")


# Options and environments the front end refuses before it measures anything.
# (id, arguments, environment, what the one line says)
REFUSED = [
    ("ringbuf-zero", "run pipe --ringbuf-mb 0", {}, "more than 0"),
    ("ringbuf-text", "run pipe --ringbuf-mb lots", {}, "not a size in MiB"),
    ("ringbuf-huge", "run pipe --ringbuf-mb 5000", {}, "at most 4096"),
    ("ringbuf-untraced", "run pipe --ringbuf-mb 1 --no-trace", {}, "cannot go with --no-trace"),
    ("calibrate-untraced", "run pipe --calibrate --no-trace", {}, "cannot go with --no-trace"),
    ("sample-hz-zero", "run pipe --sample-hz 0", {}, "at least 1"),
    ("sample-hz-untraced", "run pipe --sample-hz 99 --no-trace", {}, "cannot go with --no-trace"),
    ("warmup-text", "run pipe --warmup many", {}, "not a whole number"),
    ("mode-without-value", "run pipe --mode", {}, "expected one argument"),
    ("stall-text", "run pipe --no-trace", {"IPCTRACE_STALL_S": "soon"}, "IPCTRACE_STALL_S=soon"),
    ("stall-negative", "run pipe --no-trace", {"IPCTRACE_STALL_S": "-3"}, "IPCTRACE_STALL_S=-3"),
    ("sudo-uid-text", "run pipe --no-trace", {"SUDO_UID": "alice", "SUDO_GID": "1000"}, "SUDO_UID='alice'"),
    ("no-driver", "run pipe", {"IPCTRACE_OUTPUT": "/nonexistent-build"}, "is not built; run 'make'"),
    ("no-driver-list", "list", {"IPCTRACE_OUTPUT": "/nonexistent-build"}, "is not built; run 'make'"),
]


@pytest.mark.parametrize("args,env,says", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_before_measuring(tmp_path, args, env, says):
    out = tmp_path / "out"
    p = cli([*args.split(), "--quiet", "--out", str(out)] if args.startswith("run") else args.split(), env=env)
    check_one_line(p, says)
    assert not out.exists() or (out / "INCOMPLETE").exists()


def fake_build(tmp_path, driver=None, loader=None):
    """A build directory holding the given programs: a path to link, or a script's text."""
    out = tmp_path / "build"
    out.mkdir()
    for name, what in (("ipcbench", driver), ("ipctrace-loader", loader)):
        if isinstance(what, Path):
            os.symlink(what, out / name)
        elif what is not None:
            (out / name).write_text(what)
            (out / name).chmod(0o755)
    return out


@pytest.mark.parametrize(
    "driver,says",
    [
        ("\x7fELF but cut short", "cannot run the workload driver"),
        ("#!/bin/sh\necho hello\n", "printed no workload table"),
        (
            '#!/bin/sh\necho "$0: error while loading shared libraries: libzmq.so.5: cannot open shared object '
            'file: No such file or directory" >&2\nexit 127\n',
            "libzmq.so.5: cannot open shared object file",
        ),
    ],
    ids=["driver-not-executable", "driver-prints-garbage", "driver-library-missing"],
)
def test_broken_driver(tmp_path, driver, says):
    out = fake_build(tmp_path, driver=driver)
    check_one_line(
        cli(["run", "pipe", "--quiet", "--out", str(tmp_path / "r")], env={"IPCTRACE_OUTPUT": str(out)}), says
    )
    assert not (tmp_path / "r").exists()


def test_missing_loader_is_named(tmp_path):
    out = fake_build(tmp_path, driver=DRIVER)
    p = cli(["run", "pipe", "--quiet", "--out", str(tmp_path / "r")], env={"IPCTRACE_OUTPUT": str(out)})
    check_one_line(p, "tracing is not built")
    assert "--no-trace" in p.stderr


@needs_loader
@pytest.mark.parametrize("btf", ["/nonexistent/vmlinux", "/etc/hostname"], ids=["btf-missing", "btf-not-btf"])
def test_kernel_without_btf(tmp_path, btf):
    out = tmp_path / "r"
    p = cli(["run", "pipe", "--iterations", "100", "--quiet", "--out", str(out)], env={"IPCTRACE_BTF_PATH": btf})
    check_one_line(p, f"no kernel BTF ({btf}")
    assert not out.exists()


@needs_loader
def test_doctor_without_btf():
    p = cli(["doctor"], env={"IPCTRACE_BTF_PATH": "/nonexistent/vmlinux"})
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "no kernel BTF" in p.stdout + p.stderr


@pytest.mark.parametrize(
    "command,tool",
    [("bench-workloads --iterations 100", "perf"), ("bench --rounds 2", "bpftrace")],
    ids=["no-perf", "no-bpftrace"],
)
def test_missing_tool_on_path(command, tool):
    check_one_line(cli(command.split(), env={"PATH": "/nonexistent"}), f"{tool} is not installed")


@needs_loader
@pytest.mark.parametrize(
    "args,says",
    [
        ([], "--out DIR is required"),
        (["--out", "/tmp"], "no command to trace"),
        (["--ringbuf-mb", "0", "--out", "/tmp", "--", "true"], "--ringbuf-mb wants"),
        (["--ringbuf-mb", "1e9", "--out", "/tmp", "--", "true"], "--ringbuf-mb wants"),
        (["--sample-hz", "-1", "--out", "/tmp", "--", "true"], "--sample-hz wants"),
        (["--user", "nobody", "--out", "/tmp", "--", "true"], "--user wants UID:GID"),
        (["--user", "1:", "--out", "/tmp", "--", "true"], "--user wants UID:GID"),
        (["--user", "-1:5", "--out", "/tmp", "--", "true"], "--user wants UID:GID"),
        (["--bogus"], "unknown option '--bogus'; usage:"),
        (["--out"], "missing value of '--out'"),
    ],
    ids=[
        "no-out",
        "no-command",
        "ringbuf-zero",
        "ringbuf-huge",
        "sample-hz",
        "user-name",
        "user-no-gid",
        "user-negative",
        "unknown-flag",
        "missing-value",
    ],
)
def test_loader_arguments(args, says):
    """The tracer parses what the front end hands it; a wrong argument is one line and exit 2."""
    p = subprocess.run([str(LOADER), *args], capture_output=True, text=True, timeout=30)
    lines = [line for line in p.stderr.split("\n") if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("ipctrace-loader:"), p.stderr
    assert says in lines[0]


@needs_loader
def test_loader_out_not_creatable(tmp_path):
    (tmp_path / "file").write_text("x")
    p = subprocess.run(
        [str(LOADER), "--out", str(tmp_path / "file" / "sub"), "--", "true"], capture_output=True, text=True, timeout=30
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "cannot create" in p.stderr, p.stderr


def test_cross_cpu_is_refused_for_a_one_thread_workload(tmp_path):
    r = subprocess.run(
        cli_argv("run", "orwc", "--cross-cpu", "--iterations", 100, "--out", tmp_path / "o"),
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=120,
    )
    assert (
        r.returncode == 2
        and r.stderr == "ipctrace: orwc runs one thread: --cross-cpu does not apply (--cpus A pins it)\n"
    )
    assert not (tmp_path / "o").exists()
