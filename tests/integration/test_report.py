"""`ipctrace report` and `export --perfetto` on real runs: the artefacts exist, hold what they
claim, and the page renders in headless Chromium without console errors."""

import json
import re
import subprocess
import xml.dom.minidom

import numpy as np
import pandas as pd
import pytest

from analysis.model import heatmaps
from analysis.run import flamegraphs
from analysis.store import folded as folded_file
from conftest import check_trace_events, cli_argv, needs_tracing, orphaned_programs, run_argv

needs_chromium = pytest.mark.skipif(
    flamegraphs.chromium() is None, reason="chromium is installed by tools/bootstrap --test"
)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """One traced, stack-sampled pipe run and its report, shared by the tests below."""

    from conftest import cli_env

    base = tmp_path_factory.mktemp("report")
    d = base / "pipe"
    run = subprocess.run(
        run_argv("pipe", str(d), "--sample-hz", "4999", "--calibrate", iterations="3000", warmup="300"),
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    rep = subprocess.run(cli_argv("report", str(d)), capture_output=True, text=True, env=cli_env(), timeout=300)
    assert rep.returncode == 0, rep.stderr
    return d


@needs_tracing
def test_report_writes_every_artefact(traced):
    names = {p.name for p in traced.iterdir()}
    assert {
        "oncpu.folded",
        "offcpu.folded",
        "breakdown.folded",
        "heatmap-latency.png",
        "heatmap-breakdown.png",
        "histogram-rtt.png",
        "report.html",
        "samples.json",
    } <= names
    if flamegraphs.chromium():
        assert {"flamegraph-oncpu.svg", "flamegraph-offcpu.svg", "flamegraph-breakdown.svg"} <= names
        for svg in traced.glob("flamegraph-*.svg"):
            xml.dom.minidom.parse(str(svg))


@needs_tracing
def test_no_sampler_program_outlives_the_run(traced):
    # the sampler's programs held by no process (those of other runs on this machine are held)
    assert orphaned_programs(["sample_oncpu", "switch_btf", "switch_raw", "fork_btf", "fork_raw"]) == []


@needs_tracing
def test_folded_totals_equal_what_the_sampler_counted(traced):
    samples = json.loads((traced / "samples.json").read_text())
    oncpu = folded_file.read_folded(traced / "oncpu.folded")
    offcpu = folded_file.read_folded(traced / "offcpu.folded")
    counted = sum(e["count"] for e in samples["oncpu"])
    assert oncpu.sum() == counted == samples["stats"]["samples"] - samples["stats"]["lost_samples"]
    assert counted > 0
    assert offcpu.sum() == sum(e["ns"] for e in samples["offcpu"]) > 0
    # The pipe's kernel side is visible in the on-CPU stacks.
    assert oncpu[oncpu.index.str.contains("pipe_(?:read|write)", regex=True)].sum() > 0


@needs_tracing
def test_breakdown_flame_adds_up_to_the_latency_within_the_closure_residual(traced):
    bd = pd.read_parquet(traced / "breakdown.parquet")
    summary = json.loads((traced / "summary.json").read_text())
    folded = folded_file.read_folded(traced / "breakdown.folded")
    latency = bd["latency_ns"].sum()
    residual = summary["breakdown"]["rtt"]["closure_residual_pct"] / 100 * latency
    # rounding: each folded line is rounded to whole ns
    assert abs(latency - folded.sum()) <= abs(residual) + len(folded) + 1e-6 * latency
    assert folded.sum() == pytest.approx(bd[heatmaps.component_columns(bd)].to_numpy().sum(), abs=len(folded))


@needs_tracing
def test_heat_map_buckets_count_every_iteration(traced):
    it = pd.read_parquet(traced / "iterations.parquet")
    grid = heatmaps.latency_heatmap(it, "rtt")
    assert grid.counts.sum() == len(it) == 3000
    _, counts = heatmaps.breakdown_heatmap(pd.read_parquet(traced / "breakdown.parquet"), "rtt")
    # the breakdown holds every iteration but those the tracer could not follow wholly: how many
    # those are depends on the load (switches the probe missed), that they are exactly the
    # missing ones does not
    left_out = json.loads((traced / "summary.json").read_text())["trace"]["iterations_left_out"]
    assert counts.sum() == 3000 - left_out > 0


@needs_tracing
def test_report_page_is_self_contained(traced):
    html = (traced / "report.html").read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"https?:", html)
    for heading in (
        "Summary",
        "Where the time goes",
        "Heat maps",
        "Histograms",
        "Flame graphs",
        "Copy cost",
        "attach modes and drops",
        "Probe-effect calibration",
        "Environment",
    ):
        assert heading in html
    assert html.count("data:image/png;base64,") >= 3
    assert "sampling" in html  # the copy cost from on-CPU samples sits beside the others
    # the header: placement, CPUs, traced with the untraced twin's ratio; no Python values
    head = re.search(r"<h1>.*?</p>", html, re.S).group(0)
    assert "placement " in head and "measuring on CPU" in head and "x the untraced twin" in head
    assert not re.search(r">[^<]*\b(True|False|None)\b[^<]*<", html.split("<script>")[0])


@needs_tracing
def test_calibration_compares_with_the_untraced_twin_run(traced):
    summary = json.loads((traced / "summary.json").read_text())
    twin = json.loads((traced / "untraced" / "summary.json").read_text())
    assert twin["params"]["traced"] is False and twin["metrics"]["rtt"]["n"] == 3000
    pe = summary["probe_effect"]["metrics"]
    assert set(pe) == {"rtt"}  # one_way is derived from rtt, not measured
    e = pe["rtt"]
    assert e["untraced_median"] == twin["metrics"]["rtt"]["median"]
    assert e["traced_median"] == summary["metrics"]["rtt"]["median"]
    assert e["ratio"] == pytest.approx(e["traced_median"] / e["untraced_median"])
    assert e["ratio_ci95"][0] <= e["ratio"] <= e["ratio_ci95"][1]
    html = (traced / "report.html").read_text()
    assert "traced / untraced" in html and f"{e['ratio']:.3f}" in html


@needs_tracing
@needs_chromium
def test_report_renders_without_console_errors(traced, tmp_path):
    shot = tmp_path / "shot.png"
    p = subprocess.run(
        [
            flamegraphs.chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1400,3000",
            (traced / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0
    assert not re.search(r"CONSOLE.*(Error|Uncaught)", p.stderr), p.stderr
    import matplotlib.image

    img = matplotlib.image.imread(shot)
    # Charts are drawn: far from a blank page (a white page has one colour).
    assert len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)) > 500


@needs_tracing
def test_perfetto_export_of_a_real_run(traced):

    from conftest import cli_env

    p = subprocess.run(
        cli_argv("export", str(traced), "--perfetto"),
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    trace = json.loads((traced / "trace.perfetto.json").read_text())
    events = trace["traceEvents"]
    check_trace_events(events)
    cats = pd.Series([e.get("cat") for e in events]).value_counts()
    assert cats["iteration"] == 3000 and cats["syscall"] > 4 * 3000 and cats["sched"] > 0 and cats["wakeup"] > 0
    summary = json.loads((traced / "summary.json").read_text())
    # the workload's threads, and a track of the spans where the tracer lost records if it did
    from analysis.render.perfetto import LOST_TID

    assert {e["tid"] for e in events} - {LOST_TID} <= set(summary["trace"]["tids"])
    lost = [e for e in events if e["tid"] == LOST_TID and e["ph"] == "X"]
    assert len(lost) == len(json.loads((traced / "trace.json").read_text())["drops"]["lost_spans"])


def test_report_of_an_untraced_run_has_no_flame_graphs(ipctrace, make_results):
    rng = np.random.default_rng(2)
    d = make_results("untraced", rng.lognormal(9, 0.3, 2000).astype(int))
    p = ipctrace("report", d)
    assert p.returncode == 0, p.stderr
    html = (d / "report.html").read_text()
    assert "not traced" in html and not list(d.glob("*.folded"))
    # the header says what the figures are: placement, the threads' CPUs, untraced
    assert "placement cross-cpu" in html and "untraced: the figures are the workload" in html
    assert (d / "heatmap-latency.png").exists() and (d / "histogram-rtt.png").exists()


def test_several_dirs_make_a_comparison_page(ipctrace, make_results, tmp_path):
    a = make_results("a", np.full(100, 1000))
    b = make_results("b", np.full(100, 3000))
    p = ipctrace("report", a, b, "--compare-out", tmp_path / "cmp.html")
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "cmp.html").read_text()
    assert "3.00x" in html and "a/report.html" in html and (a / "report.html").exists() and (b / "report.html").exists()


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda d: d / "missing", "does not exist"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "no summary.json"),
    ],
)
def test_bad_directories_are_one_line_and_exit_2(ipctrace, tmp_path, make, message):
    p = ipctrace("report", make(tmp_path))
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and message in p.stderr


def test_corrupted_folded_file_is_named_and_the_page_still_made(ipctrace, make_results):
    d = make_results("bad", np.full(50, 1000))
    (d / "oncpu.folded").write_text("a;b 1\ngarbage\n")
    (d / "offcpu.folded").write_text("")
    p = ipctrace("report", d)
    assert p.returncode == 0 and p.stderr.count("\n") == 1 and "oncpu.folded:2" in p.stderr
    assert "oncpu.folded:2" in (d / "report.html").read_text()


def test_suite_page_puts_our_figures_beside_the_reports(ipctrace, tmp_path):
    d = tmp_path / "suite"
    d.mkdir()
    common = {
        "experiment": "pipe",
        "title": "pipe",
        "workload": "pipe",
        "options": "pipe",
        "metric": "rtt",
        "status": "complete",
        "n": 100,
        "mean_ns": 8000.0,
        "ci95_lo_ns": 7000.0,
        "ci95_hi_ns": 9000.0,
        "median_ns": 6000.0,
    }
    rows = [
        {
            **common,
            "report": "003.txt",
            "machine": "Linux box",
            "report_value_ns": 4000.0,
            "report_statistic": "median",
        },
        {
            **common,
            "report": "004.txt",
            "machine": "other box",
            "report_value_ns": 4000.0,
            "report_statistic": "mean",
            "note": "a mean over 10 runs of its own",
        },
        {**common, "experiment": "orwc", "metric": "open", "mean_ns": 2000.0, "median_ns": 1900.0},
    ]
    (d / "suite.json").write_text(
        json.dumps(
            {
                "started": "now",
                "host": {},
                "placement": "default",
                "runs": 1,
                "iterations": 100,
                "traced": False,
                "rows": rows,
            }
        )
    )
    p = ipctrace("report", d)
    assert p.returncode == 0, p.stderr
    html = (d / "report.html").read_text()
    # median vs the report's median: 1.50x; mean vs the report's mean: 2.00x
    assert "1.50x" in html and "2.00x" in html and "Linux box" in html
    assert (d / "suite.png").stat().st_size > 0
    # suite.md's footnotes: the note on a report's figure, marked beside it; no Python value shown
    assert '<a href="#note-1">[1]</a>' in html and '<li id="note-1">a mean over 10 runs of its own</li>' in html
    assert "not traced" in html and "False" not in html and "True" not in html


def test_suite_page_links_each_experiments_own_report(ipctrace, tmp_path, make_results):
    d = tmp_path / "suite"
    d.mkdir()
    exp = make_results("pipe", np.full(100, 1000))
    exp.rename(d / "pipe")
    row = {"experiment": "pipe", "title": "pipe", "workload": "pipe", "options": "pipe", "metric": "rtt"}
    row.update(status="complete", n=100, mean_ns=1000.0, median_ns=1000.0, ci95_lo_ns=1000.0, ci95_hi_ns=1000.0)
    row.update(report=None, machine=None, report_value_ns=None, report_statistic=None, note=None)
    (d / "suite.json").write_text(json.dumps({"started": "now", "host": {}, "traced": True, "rows": [row]}))
    p = ipctrace("report", d)
    assert p.returncode == 0, p.stderr
    assert (d / "pipe" / "report.html").exists() and 'href="pipe/report.html"' in (d / "report.html").read_text()


def test_the_summary_table_leads_with_the_untraced_twin_and_the_environment_is_tables(make_results):
    """The report's headline is the terminal's: the untraced median and the probe effect beside
    the traced median; the environment is tables of what was set, not a JSON dump with
    "ringbuf_mb": 0 (issue 28, points 1 and 10)."""
    from analysis.render import report as report_render
    from analysis.store import results as results_store
    from analysis.store.summaryfile import RunSummary

    d = make_results("t", np.full(100, 10_700))
    s = results_store.read_summary(d)
    s["probe_effect"] = {"metrics": {"rtt": {"traced_median": 10_700, "untraced_median": 7_700, "ratio": 1.39}}}
    s["params"] = {"iterations": 100, "ringbuf_mb": 0, "keep_raw": False, "traced": True}
    s = RunSummary.from_json(s)
    head = re.search(r"<tr>(.*?)</tr>", report_render.metrics_table(s), re.S).group(1)
    cells = re.findall(r"<th[^>]*>(.*?)</th>", head)
    assert cells[2:5] == ["traced median", "untraced median", "probe effect"]
    assert "1.39x" in report_render.metrics_table(s)
    (d / "meta.json").write_text(json.dumps({"command_line": "ipctrace run pipe", "start_time": "now"}))
    env = report_render.environment_section(s, results_store.meta_file(d))
    assert "ringbuf" not in env and "keep raw" not in env and "<pre>" not in env
    assert re.search(r"<td[^>]*>iterations</td>\s*<td[^>]*>100</td>", env)


def test_the_attach_modes_are_one_row_per_mode():
    """Fifty probes, three ways: three rows, each listing its probes (issue 28, point 10)."""
    from analysis.render import report as report_render
    from analysis.store.summaryfile import RunSummary

    attach = {f"p{k}": "tp_btf" for k in range(40)}
    attach |= {f"f{k}": "absent: no fentry (load on anon_pipe_write: Operation not permitted)" for k in range(9)}
    attach["x"] = "raw_tp"
    trace = {"attach": attach, "drops": {"total": 0}}
    html = report_render.trace_section(RunSummary.from_json({"schema_version": 1, "metrics": {}, "trace": trace}))
    table = html[html.index("attached as") :]
    assert table.count("anon_pipe_write") == 1 and table.count("<tr>") == 1 + 3
    assert "40: p0, p1" in table


def test_the_comparison_page_overlays_the_distributions_and_marks_traced_runs(ipctrace, make_results, tmp_path):
    a = make_results("a", np.full(100, 1000))
    b = make_results("b", np.full(100, 3000))
    p = ipctrace("report", a, b, "--compare-out", tmp_path / "cmp.html")
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "cmp.html").read_text()
    assert "the runs' distributions" not in html  # drawn into the picture, which is embedded
    assert (tmp_path / "cmp-rtt.png").stat().st_size > 0 and html.count("data:image/png;base64,") >= 1
    assert html.count("<span class=muted>untraced</span>") == 2
