"""`ipctrace export`: --out, a part of the run under a name of its own (never over the whole),
a replaced file said, and --around for the JSON export too (issue 28, point 4)."""

import json
import shutil

from conftest import HOME

FIXTURE = HOME / "tests" / "fixtures" / "pipe-traced"


def _copy(tmp_path):
    d = tmp_path / "run"
    shutil.copytree(FIXTURE, d)
    return d


def test_a_part_never_replaces_the_whole_export(ipctrace, tmp_path):
    d = _copy(tmp_path)
    p = ipctrace("export", d, "--perfetto-proto")
    assert p.returncode == 0, p.stderr
    whole = (d / "trace.perfetto-trace").read_bytes()
    p = ipctrace("export", d, "--perfetto-proto", "--around", "p99")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(d / "trace-around-p99.perfetto-trace")
    assert (d / "trace.perfetto-trace").read_bytes() == whole
    assert 0 < (d / "trace-around-p99.perfetto-trace").stat().st_size < len(whole)
    # the same export again replaces its file, and says so
    p = ipctrace("export", d, "--perfetto-proto")
    assert p.returncode == 0 and f"replacing {d / 'trace.perfetto-trace'} (" in p.stderr


def test_around_for_the_json_export_and_out(ipctrace, tmp_path):
    d = _copy(tmp_path)
    out = tmp_path / "slow.json"
    p = ipctrace("export", d, "--perfetto", "--around", "max", "-o", out)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(out) and not (d / "trace.perfetto.json").exists()
    iterations = [e for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "iteration"]
    assert 1 <= len(iterations) <= 11  # the slowest and five either side
    csvdir = tmp_path / "csv"
    csvdir.mkdir()
    p = ipctrace("export", d, "--csv", "--out", csvdir)
    assert p.returncode == 0, p.stderr
    assert (csvdir / "iterations.csv").exists() and not (d / "iterations.csv").exists()


def test_out_with_two_formats_is_refused(ipctrace, tmp_path):
    d = _copy(tmp_path)
    p = ipctrace("export", d, "--csv", "--perfetto", "--out", tmp_path / "x")
    assert p.returncode == 2 and "give one format with it" in p.stderr and p.stderr.count("\n") == 1


def test_explain_of_a_twin_and_of_a_whole_trace_say_what_they_are(ipctrace, tmp_path):
    """The error names what the directory is, not an option the user never gave (point 6)."""
    d = _copy(tmp_path)
    twin = d / "untraced"
    twin.mkdir()
    for name in ("iterations.parquet", "workload.json", "meta.json", "summary.json"):
        shutil.copy(FIXTURE / name, twin / name)
    s = json.loads((d / "summary.json").read_text())
    s["probe_effect"] = {"untraced_dir": "untraced", "metrics": {}}
    (d / "summary.json").write_text(json.dumps(s))
    p = ipctrace("explain", twin)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert f"is the untraced twin of {d.resolve()}" in p.stderr and "--no-trace" not in p.stderr
    whole = tmp_path / "whole"
    shutil.copytree(FIXTURE, whole)
    (whole / "iterations.parquet").unlink()
    p = ipctrace("explain", whole)
    assert p.returncode == 2 and "is a whole trace without iterations" in p.stderr
    assert "does not exist" not in p.stderr


def test_report_open_without_a_browser_is_not_a_failure(ipctrace, tmp_path):
    import os

    d = _copy(tmp_path)
    env = dict(os.environ, BROWSER="false")
    import subprocess

    from conftest import cli_argv, cli_env

    p = subprocess.run(
        cli_argv("report", d, "--open"), capture_output=True, text=True, env={**cli_env(), **env}, timeout=600
    )
    assert p.returncode == 0, p.stderr
    assert (d / "report.html").exists() and "open it yourself" not in p.stdout
    assert f"open {d / 'report.html'} yourself" in p.stderr
