"""The command line: every bad input is one line and exit 2; compare, export, list, clean."""

import json
import os
import subprocess

import pandas as pd
import pytest

from analysis.cli import main as cli
from analysis.model import explain as explain_model
from analysis.store import results
from conftest import HOME

# (arguments, what the one line must say); FULL, FILE, MISSING are replaced by paths.
BAD = [
    ("run nosuchworkload", "unknown workload 'nosuchworkload'"),
    ("run pipee", "did you mean 'pipe'? (ipctrace list)"),
    ("run pipe --iterations -5", "at least 1"),
    ("run pipe --iterations 0", "at least 1"),
    ("run pipe --iterations abc", "not a whole number"),
    ("run pipe --iterations 1.5", "not a whole number"),
    ("run pipe --iterations 99999999999999999999", "at most"),
    ("run pipe --warmup -1", "at least 0"),
    ("run pipe --runs 0", "at least 1"),
    ("run pipe --runs 10001", "at most 10000"),
    ("run pipe --runs x", "not a whole number"),
    ("run pipe --cpus 0,999", "CPU 999 is not online"),
    ("run pipe --cpus a,b", "one or two CPU numbers"),
    ("run pipe --cpus 0,1,0", "one or two CPU numbers"),
    ("run pipe --cpus -1", "one or two CPU numbers"),
    ("run pipe --size -1", "at least 1 byte"),
    ("run pipe --size 0", "at least 1 byte"),
    ("run pipe --size 99999999999", "larger than 64 MiB"),
    ("run pipe --size 1X", "not a size"),
    ("run pipe-self --size 2M", "pipe-self carries at most 1048576 bytes"),
    ("run null-syscall --size 64", "--size does not apply"),
    ("run pipe --mode turbo", "pipe has no mode 'turbo'"),
    ("run pipe --fresh", "pipe has no --fresh variant"),
    ("run pipe --out /proc/nope", "/proc/nope"),
    ("run pipe --out FULL", "exists and is not empty"),
    ("run pipe --out FILE", "exists and is not a directory"),
    ("run pipe --no-such-flag", "unrecognized arguments: --no-such-flag"),
    ("run pipe --same-cpu --cross-cpu", "not allowed with"),
    ("run pipe --cpus 0,1 --no-pin", "not allowed with"),
    ("run", "required: WORKLOAD"),
    ("compare MISSING MISSING", "does not exist"),
    ("compare FULL", "at least two"),
    ("compare FULL FULL", "has no summary.json"),
    ("export MISSING --csv", "does not exist"),
    ("export FULL", "say which format"),
    ("list --bogus", "unrecognized arguments"),
    ("nosuchcommand", "unknown command 'nosuchcommand' (ipctrace --help lists them)"),
    ("rnu pipe", "unknown command 'rnu'; did you mean 'run'?"),
    ("run pipe --iteration 10 --no-trace", "run: unrecognized arguments: --iteration 10; did you mean --iterations?"),
    ("explain FULL --medain", "explain: unrecognized arguments: --medain; did you mean --median?"),
    ("suite --bogus", "suite: unrecognized arguments: --bogus"),
    ("watch --keep-cpu 0 --keep FULL -- true", "--keep-cpu takes more than 0 and at most 100 percent"),
    ("watch --keep-cpu 101 --keep FULL -- true", "--keep-cpu takes more than 0 and at most 100 percent"),
    ("watch --keep-cpu 50 -- true", "watch --keep-cpu bounds the writing of what --keep DIR keeps"),
    ("", "no command given"),
]


@pytest.fixture
def places(tmp_path, monkeypatch):
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("precious\n")
    (tmp_path / "file").write_text("a file\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return {"FULL": str(full), "FILE": str(tmp_path / "file"), "MISSING": str(tmp_path / "missing")}, work


def one_line_exit_2(capsys, args):
    rc = cli.main(args)
    out, err = capsys.readouterr()
    assert rc == 2, (args, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipctrace: "), err
    assert "Traceback" not in out + err
    assert out == ""
    return lines[0]


@pytest.mark.parametrize("args,msg", BAD, ids=[b[0] or "(nothing)" for b in BAD])
def test_bad_input(capsys, places, args, msg):
    paths, work = places
    argv = [paths.get(a, a) for a in args.split()] + (["--quiet"] if args.startswith("run ") else [])
    line = one_line_exit_2(capsys, argv)
    assert msg in line
    assert sorted(os.listdir(paths["FULL"])) == ["x"]
    assert os.listdir(work) == [], "a rejected run left something in the working directory"


def test_unreadable_results(capsys, make_results, tmp_path):
    future = make_results("future", [1, 2, 3, 4, 5, 6], schema_version=2)
    ok = make_results("ok", [1, 2, 3, 4, 5, 6])
    assert "schema_version 2" in one_line_exit_2(capsys, ["compare", str(ok), str(future)])
    (ok / "iterations.parquet").write_bytes(b"PAR1 nonsense")
    assert "truncated or corrupted" in one_line_exit_2(capsys, ["export", str(ok), "--csv"])
    assert not (ok / "iterations.csv").exists()


@pytest.mark.parametrize("cmd", ["", "list", "run", "compare", "export", "clean", "setup"])
def test_help(capsys, cmd):
    with pytest.raises(SystemExit) as e:
        cli.main(([cmd] if cmd else []) + ["--help"])
    assert e.value.code == 0
    assert "usage: ipctrace" in capsys.readouterr().out


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for cmd in cli.BUILTIN:
        assert f"    {cmd} " in out


def test_list_json(capsys):
    assert cli.main(["list", "--json"]) == 0
    wls = json.loads(capsys.readouterr().out)["workloads"]
    names = {w["name"]: w for w in wls}
    for name in ["pipe", "pipe-self", "pipe-nonblock", "null-syscall", "orwc"]:
        w = names[name]
        assert w["primary_metric"] in w["metrics"] and w["summary"]
    assert names["pipe"]["metrics"][0] == "rtt"
    assert names["orwc"]["metrics"] == ["open", "read", "write", "close"]


def test_list_table(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["workload", "metrics"]
    pipe = next(line for line in out.splitlines() if line.startswith("pipe "))
    assert "rtt, one_way*" in pipe
    assert "report 003, 'Report Abgabe 1'" in out and ".txt" not in out


def test_compare(capsys, make_results):
    a = make_results("a", [1000 + i % 7 for i in range(200)], runs=2)
    b = make_results("b", [2000 + i % 7 for i in range(200)], runs=2)  # means 1002.985, 2002.985; medians 1003, 2003
    assert cli.main(["compare", str(a), str(a), str(b)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0][:2] == ["metric", "results"]
    assert rows[1][0] == "rtt" and rows[1][1] == str(a)
    same, double = rows[2], rows[3]
    assert same[0] == str(a) and same[-4:] == ["1.000", "1.000", "yes", "yes"]
    assert double[0] == str(b) and double[-4:-2] == ["1.997", "1.997"] and double[-2:] == ["no", "no"]


def test_export_csv(capsys, make_results):
    d = make_results("e", [5, 6, 7, 8])
    assert cli.main(["export", str(d), "--csv"]) == 0
    assert capsys.readouterr().out.strip() == str(d / "iterations.csv")
    lines = (d / "iterations.csv").read_text().splitlines()
    assert lines[0] == ",".join(results.ITER_COLUMNS)
    assert [int(line.split(",")[6]) for line in lines[1:]] == [5, 6, 7, 8]


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_clean_removes_only_what_dead_runs_left(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    dead, live = dead_pid(), os.getpid()
    shm_dead = f"/dev/shm/ipctrace-{dead}-0badc0de-sem0"
    shm_live = f"/dev/shm/ipctrace-{live}-0badc0de-sem0"
    priv_dead = tmp_path / f"ipctrace-{dead}-0badc0de"
    priv_live = tmp_path / f"ipctrace-{live}-0badc0de"
    other = tmp_path / "ipctrace-results"
    try:
        for p in (shm_dead, shm_live):
            open(p, "w").close()
        for d in (priv_dead, priv_live, other):
            d.mkdir()
            (d / "sock").write_text("")
        assert cli.main(["clean", "--dry-run"]) == 0
        assert os.path.exists(shm_dead) and priv_dead.exists()
        assert cli.main(["clean"]) == 0
        out = capsys.readouterr().out
        assert f"removed {shm_dead}" in out and f"removed {priv_dead}" in out
        assert not os.path.exists(shm_dead) and not priv_dead.exists()
        assert os.path.exists(shm_live) and priv_live.exists() and other.exists()
    finally:
        for p in (shm_dead, shm_live):
            if os.path.exists(p):
                os.unlink(p)


def test_internal_error_is_one_line(capsys, monkeypatch):
    def broken(args):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(cli, "cmd_list", broken)
    assert cli.main(["list"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == ["ipctrace: internal error: ZeroDivisionError: boom (IPCTRACE_DEBUG=1 shows where)"]


def test_launcher_bad_input_is_one_line(tmp_path):
    """Through the real launcher: the same contract, from a fresh process."""
    launcher = str(HOME / "ipctrace")
    p = subprocess.run([launcher, "run", "pipee", "--quiet"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 2
    assert p.stderr.splitlines() == ["ipctrace: unknown workload 'pipee'; did you mean 'pipe'? (ipctrace list)"]
    assert os.listdir(tmp_path) == []


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("ipctrace ")


def test_compare_and_explain_speak_json(capsys):
    """compare --json: per metric and directory its figures and those against the first;
    explain --json: the Explanation's fields, its chain as objects."""
    fixture = str(HOME / "tests" / "fixtures" / "pipe-traced")
    assert cli.main(["compare", fixture, fixture, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    first, second = doc["metrics"]["rtt"]
    assert doc["baseline"] == fixture and second["median_ratio"] == 1.0 and second["median_cis_overlap"] is True
    assert first["n"] == second["n"] > 0
    assert cli.main(["explain", fixture, "--median", "--json"]) == 0
    x = json.loads(capsys.readouterr().out)
    assert x["chain"][0]["at_ns"] == 0 and x["latency_ns"] == sum(x["components"][c] for c in x["components"])


def test_collect_then_compare_from_the_dataset(capsys, make_results, tmp_path):
    a = make_results("a", [1000 + i % 7 for i in range(200)], runs=2)
    b = make_results("b", [2000 + i % 7 for i in range(200)], runs=2)
    db = tmp_path / "course.duckdb"
    assert cli.main(["collect", str(a), str(b), "--into", str(db)]) == 0
    assert capsys.readouterr().out.strip() == f"{db}: 2 runs collected"
    assert cli.main(["compare", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"why rtt differs from {a} [" in out and "median +1.00 us" in out
    assert cli.main(["collect", str(a), "--into", str(db)]) == 2
    assert "exists" in capsys.readouterr().err


def test_help_cmd_is_cmd_help_and_internal_commands_are_not_listed(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["help", "explain"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("usage: ipctrace explain")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    listed = capsys.readouterr().out
    assert (
        "help " in listed and "bench " in listed and "bench-analysis" not in listed and "bench-workloads" not in listed
    )
    with pytest.raises(SystemExit) as e:
        cli.main(["bench-analysis", "--help"])  # still runnable
    assert e.value.code == 0


def test_list_says_what_each_mode_measures(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    spin = next(line for line in out.splitlines() if line.strip().startswith("spin-tas-threads") and "lock:" in line)
    assert "lock: lock+unlock under contention (lock_unlock); handoff: a flag passed there and back (rtt)" in spin


@pytest.mark.parametrize(
    "which, latency",
    [("max", 90), ("slowest:1", 90), ("slowest:3", 70), ("percentile:50", 50), ("p99", 90), ("median", 50)],
)
def test_explain_picks_by_rank(which, latency):
    # latencies 10, 20, ..., 90 (n = 9): the median is 50; the 99th percentile rounds up to the 9th
    it = pd.DataFrame(
        {"metric": "rtt", "run": 0, "iteration": range(9), "latency_ns": [10, 90, 20, 80, 30, 70, 40, 60, 50]}
    )
    row, _ = explain_model.pick(it, "rtt", which=which)
    assert row["latency_ns"] == latency


def test_explain_of_a_sweep_says_what_to_pass(capsys, make_results, tmp_path):
    d = make_results("sw", [1000, 2000, 3000])
    (d / "size-4096").mkdir()
    s = json.loads((d / "summary.json").read_text())
    fit = {"value": 1.0, "ci95": [0.5, 1.5]}
    size = {"dir": "size-4096", "bytes_per_iteration": 4096.0}
    sweep = {"kind": "sweep", "copy": {"ns_per_byte": fit, "fixed_ns": fit}, "per_size": {"4096": size}}
    (d / "summary.json").write_text(json.dumps({**s, **sweep}))
    line = one_line_exit_2(capsys, ["explain", str(d)])
    assert line == f"ipctrace: {d} is a sweep: explain one of its sizes, e.g. {d / 'size-4096'}"


def _subparsers():
    import argparse

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_option_of_every_command_is_described():
    """--help describes every option: no bare '--warmup WARMUP' (issue 28, point 5)."""
    import argparse

    bare = [
        f"{name} {a.option_strings[-1]}"
        for name, p in _subparsers().items()
        for a in p._actions
        if a.option_strings and a.help != argparse.SUPPRESS and not a.help
    ]
    assert bare == []


def test_json_prints_to_stdout_in_every_command_that_has_it():
    """--json alone means JSON on stdout everywhere; a file is --json-file FILE."""
    for name, p in _subparsers().items():
        for a in p._actions:
            if "--json" in a.option_strings:
                assert a.nargs == 0 or (a.nargs == "?" and a.const == "-"), name
            if "--json-file" in a.option_strings:
                assert a.nargs is None, name


def test_one_meaning_per_option_name():
    """--iteration is an iteration's index (explain); trace's function probe is --iteration-func."""
    shown = {
        name: {o for a in p._actions if a.help != "==SUPPRESS==" for o in a.option_strings}
        for name, p in _subparsers().items()
    }
    assert "--iteration" in shown["explain"] and "--iteration" not in shown["trace"]
    assert "--iteration-func" in shown["trace"]
    # a repetition of a run is --repetition (a "run" is a results directory in compare, collect)
    args = cli.build_parser("explain").parse_args(["explain", "d", "--repetition", "1", "--iteration", "3"])
    assert (args.run, args.iteration) == (1, 3)


def test_the_common_options_have_short_forms():
    args = cli.build_parser().parse_args(["run", "pipe", "-n", "10", "-w", "1", "-r", "3", "-o", "x", "-q", "-C", "0"])
    assert (args.iterations, args.warmup, args.runs, str(args.out), args.quiet) == (10, 1, 3, "x", True)


def test_the_readme_demo_parses_and_the_glossary_has_the_jargon():
    """The README's demo is commands a user can paste (each parses, with fixed --out names that
    the later steps read), and its glossary names the words the output uses (point 8)."""
    import re
    import shlex

    text = (HOME / "README.md").read_text()
    demo = text[text.index("## Demo: why is a cross-CPU round trip slower?") :]
    block = re.search(r"```\w*\n(.*?)```", demo, re.S).group(1)  # its first code block
    commands = [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("./ipctrace ")]
    assert len(commands) >= 5
    outs = set()
    for argv in commands:
        args = cli.build_parser(argv[0]).parse_args(argv)
        for d in getattr(args, "dirs", []) or [getattr(args, "dir", None)] * (argv[0] in ("explain", "export")):
            assert d is None or str(d) in outs, (argv, d)
        if argv[0] == "run":
            outs.add(str(args.out))
    glossary = text[text.index("## Glossary") :]
    for word in ("entry", "closure", "residual", "tp_btf", "critical path", "probe effect", "left out"):
        assert re.search(rf"\*\*[^*]*{re.escape(word)}[^*]*\*\*", glossary), word
