"""The size sweep for real: its bad input, and a traced sweep with its report."""

import json

import pytest

from conftest import needs_tracing


@pytest.mark.parametrize(
    "sizes,message",
    [("64", "at least two"), ("64,64", "at least two"), ("64,abc", "not a size"), ("0,64", "at least 1 byte")],
)
def test_bad_sizes_are_one_line_and_exit_2(ipctrace, sizes, message):
    p = ipctrace("sweep", "pipe", "--sizes", sizes, "--iterations", "10")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and message in p.stderr


def test_size_option_is_refused(ipctrace):
    p = ipctrace("sweep", "pipe", "--size", "64", "--iterations", "10")
    assert p.returncode == 2 and "--sizes" in p.stderr


@pytest.mark.parametrize("flag", [["--hist"], ["--break-at", "100"]])
def test_a_runs_options_a_sweep_does_not_take_are_neither_offered_nor_taken(ipctrace, flag):
    assert "--hist" not in ipctrace("sweep", "--help").stdout
    p = ipctrace("sweep", "pipe", *flag, "--iterations", "10")
    assert p.returncode == 2 and f"--{flag[0][2:]} does not apply" in p.stderr


def test_workload_without_sizes_is_refused(ipctrace, tmp_path):
    p = ipctrace("sweep", "null-syscall", "--sizes", "1,64", "--iterations", "10", "--out", tmp_path / "s")
    assert p.returncode == 2 and "--size" in p.stderr
    assert not (tmp_path / "s").exists()


@needs_tracing
@pytest.mark.timing
def test_traced_pipe_sweep_measures_a_positive_copy_cost(ipctrace, tmp_path):
    out = tmp_path / "s"
    p = ipctrace(
        "sweep",
        "pipe",
        "--sizes",
        "64,8192,32768",
        "--iterations",
        "1500",
        "--warmup",
        "200",
        "--runs",
        "1",
        "--quiet",
        "--out",
        out,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    s = json.loads((out / "summary.json").read_text())
    c = s["copy"]
    # the terminal gets a row per size before the fit: its in-kernel and its round trip's median
    head = next(line for line in p.stdout.splitlines() if line.startswith("size (B)"))
    assert head.split()[:3] == ["size", "(B)", "bytes"] and "in-kernel median" in head and "rtt median" in head
    assert [line.split()[0] for line in p.stdout.splitlines() if line[:1].isdigit()] == ["64", "8192", "32768"]
    assert all(e["metric_median_ns"] > 0 for e in s["per_size"].values())
    assert c["ns_per_byte"]["value"] > 0
    lo, hi = c["ns_per_byte"]["ci95"]
    assert lo <= c["ns_per_byte"]["value"] <= hi
    assert c["fixed_ns"]["ci95"][0] <= c["fixed_ns"]["value"] <= c["fixed_ns"]["ci95"][1]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["size-32768", "size-64", "size-8192"]
    assert not (out / "INCOMPLETE").exists() and (out / "sweep.png").stat().st_size > 0
    for _size, entry in s["per_size"].items():
        sub = json.loads((out / entry["dir"] / "summary.json").read_text())
        est = sub["copy_estimate"]
        # Each size's copy estimate is its bytes x the fitted slope, and its breakdown uses that slope.
        assert est["estimated"] and est["ns"] == pytest.approx(est["bytes"] * c["ns_per_byte"]["value"])
        assert (
            "from the size sweep" in sub["breakdown"]["rtt"]["copy_source"]
            or sub["breakdown"]["rtt"]["copy_source"] == "measured"
        )
    # pipe rtt copies each message four times (two writes, two reads)
    assert s["per_size"]["8192"]["bytes_per_iteration"] == 4 * 8192
    # Its report: the fit, and the latency against the size on log axes, beside each size's page.
    r = ipctrace("report", out, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Latency against size" in (out / "report.html").read_text()
    assert (out / "sweep-latency.png").stat().st_size > 0 and (out / "size-64" / "report.html").exists()
