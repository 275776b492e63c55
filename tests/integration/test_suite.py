"""`ipctrace suite` and the seed reports' figures it compares with."""

import csv
import dataclasses
import json
import os

import pytest

from analysis import DRIVER
from analysis.cli import suite as cmd_suite
from analysis.model import seeds
from analysis.model.seeds import EXPERIMENTS, FIGURES, MACHINES
from analysis.model.suite import Row, table_rows
from analysis.render.suite import markdown, terminal
from analysis.store.jsonfiles import Host, SuiteFacts
from analysis.store.results import suite_file
from analysis.store.summaryfile import RunSummary
from conftest import HOME, run_cli


@pytest.fixture(scope="module")
def catalog():
    import subprocess

    p = subprocess.run([str(DRIVER), "list"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return {w["name"]: w for w in json.loads(p.stdout)["workloads"]}


@pytest.mark.skipif(not seeds.SEED_DIR.is_dir(), reason=f"the seed reports are not at {seeds.SEED_DIR}")
@pytest.mark.parametrize("fig", FIGURES, ids=[f"{f.experiment}-{f.report_id}-{f.metric}" for f in FIGURES])
def test_every_figure_is_quoted_from_its_report(fig):
    text = (seeds.SEED_DIR / fig.report).read_text()
    assert text.count(fig.quote) == 1, fig.quote
    if fig.ci95_ns:
        lo, hi = fig.ci95_ns
        assert lo <= fig.value_ns <= hi


def test_every_report_has_a_machine_and_a_figure():
    assert {f.report for f in FIGURES} == set(MACHINES)
    if seeds.SEED_DIR.is_dir():
        assert set(MACHINES) == {p.name for p in seeds.SEED_DIR.glob("*.txt")}


@pytest.mark.skipif(not DRIVER.exists(), reason="run 'make' first")
def test_experiments_name_real_workloads_modes_and_metrics(catalog):
    ids = [e.id for e in EXPERIMENTS]
    assert len(ids) == len(set(ids))
    for e in EXPERIMENTS:
        w = catalog[e.workload]
        if e.mode:
            assert e.mode in w["modes"], e
        if e.fresh:
            assert "fresh" in w["flags"], e
        figs = seeds.figures_for(e.id)
        assert figs, f"{e.id} has no figure from a report"
        for f in figs:
            assert f.metric in w["metrics"] + list(w.get("derived") or {}), f
    assert {f.experiment for f in FIGURES} <= set(ids)


def test_figures_of_002_compare_with_one_way():
    """002 halved its round trips; comparing them with rtt would be off by two."""
    for f in FIGURES:
        if f.report.startswith("002_"):
            assert f.metric == "one_way", f


def summary_of(mean, lo, hi, median, n, **more):
    """A run's summary of one metric, rtt (more: its other sections, as in summary.json)."""
    metrics = {"rtt": {"mean": mean, "ci95_mean": [lo, hi], "median": median, "n": n}}
    return RunSummary.from_json({"schema_version": 1, "metrics": metrics, "warnings": [], **more})


def test_table_puts_the_figure_beside_the_reports():
    e = next(e for e in EXPERIMENTS if e.id == "zmq-ipc")
    row = Row(e, ["rtt"], status="complete", summary=summary_of(61234.0, 60000.0, 62468.0, 58000.0, 4000))
    failed = Row(next(e for e in EXPERIMENTS if e.id == "kspin"), ["lock_unlock"], status="failed: kspin needs root")
    head = dataclasses.replace(SUITE_HEAD, traced=False)
    md = markdown([row, failed], head)
    line = next(line for line in md.splitlines() if line.startswith("| ZeroMQ ipc"))
    assert "| 4000 | 61.2 us [60.0, 62.5] | 58.0 us |" in line
    assert "000 (macOS, MacBook Pro): 49.5 us [48.8, 50.2]" in line
    assert "001 (WSL, Ubuntu on Windows 11): 97.8 us [90.4, 105]" in line
    assert "failed: kspin needs root" in md
    rows = list(table_rows([row]))
    assert [r["report"] for r in rows] == ["000_6716c315987b0d95.txt", "001_58aa7d8e1e25a57e.txt"]
    assert rows[0]["mean_ns"] == 61234.0 and rows[0]["report_value_ns"] == 49500.0
    assert "IQR" not in md


SUITE_HEAD = SuiteFacts(
    host=Host(cpu_model="CPU X", cores=2, online_cpus="0-1", kernel="6.18"),
    placement="cross-cpu",
    runs=2,
    iterations=2000,
    warmup=200,
    traced=True,
    quick=True,
    started="now",
    interrupted=False,
)


def test_a_traced_suite_compares_the_untraced_twin_with_the_reports():
    """The reports measured without probes: a traced row is compared through its untraced
    twin, its traced median and the probe effect beside it (issue 28, point 1)."""
    e = next(e for e in EXPERIMENTS if e.id == "pipe")
    effect = {"metrics": {"rtt": {"ratio": 1.39, "traced_median": 10700, "untraced_median": 7700}}}
    traced = summary_of(11000.0, 10900.0, 11100.0, 10700.0, 4000, trace={"attach": {}}, probe_effect=effect)
    row = Row(e, ["rtt"], status="complete", summary=traced, untraced=summary_of(8000.0, 7900.0, 8100.0, 7700.0, 4000))
    got = next(table_rows([row]))
    assert got["median_ns"] == 7700.0 and got["mean_ns"] == 8000.0 and got["measured"] == "untraced twin"
    assert got["traced_median_ns"] == 10700 and got["probe_effect"] == 1.39
    md = markdown([row], SUITE_HEAD)
    assert "untraced twin" in md and "| 10.7 us (1.39x) |" in md
    assert "report 003, 'Report Abgabe 1'" in md
    text = terminal([row], SUITE_HEAD)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("experiment"))
    first = next(line for line in lines if line.startswith("pipe "))
    assert header.split()[:7] == ["experiment", "metric", "n", "median", "mean", "traced", "effect"]
    assert first.split()[:10] == ["pipe", "rtt", "4000", "7.70", "us", "8.00", "us", "10.7", "us", "1.39x"]
    # 003's mean beside the twin's mean, not the traced run's
    assert f"{8000 / 6710:.2f}x" in text and f"{11000 / 6710:.2f}x" not in text
    assert "<br>" not in text and "|" not in text


def test_suite_makes_untraced_twins_by_default():
    from analysis.cli.main import build_parser

    args = build_parser().parse_args(["suite", "--quick"])
    assert cmd_suite.base_options(args).calibrate
    args = build_parser().parse_args(["suite", "--quick", "--no-calibrate"])
    assert not cmd_suite.base_options(args).calibrate


def test_table_adds_the_iqr_mean_when_asked():
    e = next(e for e in EXPERIMENTS if e.id == "spin-handoff-tas")
    s = {
        "metrics": {
            "one_way": {
                "mean": 300.0,
                "ci95_mean": [250.0, 350.0],
                "median": 120.0,
                "n": 4000,
                "iqr": {"mean": 118.5, "ci95_mean": [118.0, 119.0], "n": 3900, "removed": 100},
            }
        },
        "warnings": [],
    }
    head = dataclasses.replace(SUITE_HEAD, host=Host(), traced=False, iqr=True)
    s = RunSummary.from_json({"schema_version": 1, **s})
    md = markdown([Row(e, ["one_way"], status="complete", summary=s)], head)
    assert "| here: 1.5 IQR mean [95 % CI] |" in md
    assert "| 300 ns [250, 350] | 120 ns | 118 ns [118, 119], 100 removed | 002 (macOS, MacBook Air M2)" in md
    row = next(table_rows([Row(e, ["one_way"], status="complete", summary=s)]))
    assert row["iqr_mean_ns"] == 118.5 and row["iqr_removed"] == 100


def test_suite_rejects_a_workload_variant(ipctrace, tmp_path):
    p = ipctrace("suite", "--quick", "--no-trace", "--mode", "lock", "--out", tmp_path / "s")
    assert p.returncode == 2 and "--mode chooses one workload's variant" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "s").exists()


@pytest.mark.skipif(not DRIVER.exists() or os.geteuid() != 0, reason="needs the driver and root")
def test_quick_suite_runs_every_experiment(ipctrace, tmp_path, catalog):
    out = tmp_path / "suite"
    p = ipctrace("suite", "--quick", "--all", "--no-trace", "--quiet", "--out", out, timeout=600)
    assert p.returncode == 0, p.stderr
    md = (out / "suite.md").read_text()
    # the terminal gets an aligned table, not the Markdown of suite.md
    assert "<br>" not in p.stdout and "|---" not in p.stdout and str(out / "suite.md") in p.stdout
    for machine in MACHINES.values():
        assert machine in md
    with open(out / "suite.csv") as fh:
        rows = list(csv.DictReader(fh))
    want = cmd_suite.QUICK["runs"] * cmd_suite.QUICK["iterations"]
    for r in rows:
        assert r["status"] == "complete", r
        assert int(r["n"]) == want, r
        assert float(r["mean_ns"]) > 0 and float(r["ci95_lo_ns"]) <= float(r["mean_ns"]) <= float(r["ci95_hi_ns"])
    reported = {(r["experiment"], r["report"], r["metric"]) for r in rows if r["report"]}
    assert reported == {(f.experiment, f.report, f.metric) for f in FIGURES}
    # --all: every workload is in the table, each in a results directory of its own
    assert {r["workload"] for r in rows} == set(catalog)
    for d in {r["experiment"] for r in rows}:
        assert (out / d / "summary.json").is_file()


@pytest.mark.skipif("IPCTRACE_SEEDS" in os.environ, reason="IPCTRACE_SEEDS names another place")
def test_the_seeds_are_looked_for_beside_the_checkout():
    """Where the checkout's ../shared/seeds is (the figures' tests skip when it is absent, so a
    wrong default would only show as skips)."""
    assert seeds.SEED_DIR == HOME.resolve().parent / "shared" / "seeds"


@pytest.mark.skipif(not DRIVER.exists(), reason="run 'make' first")
def test_list_cites_the_reports_by_title(ipctrace):
    """`list` names a seed report by its number and title, not by a file the checkout lacks."""
    p = ipctrace("list")
    assert p.returncode == 0, p.stderr
    assert ".txt" not in p.stdout
    for report in MACHINES:
        assert seeds.citation(report) in p.stdout


def test_the_suite_page_says_its_figures_are_the_untraced_twins(tmp_path):
    from analysis.run import report as report_run
    from analysis.run import suite as suite_run

    e = next(e for e in EXPERIMENTS if e.id == "pipe")
    effect = {"metrics": {"rtt": {"ratio": 1.39, "traced_median": 10700, "untraced_median": 7700}}}
    traced = summary_of(11000.0, 10900.0, 11100.0, 10700.0, 4000, trace={"attach": {}}, probe_effect=effect)
    row = Row(e, ["rtt"], status="complete", summary=traced, untraced=summary_of(8000.0, 7900.0, 8100.0, 7700.0, 4000))
    suite_run.write_files(tmp_path, [row], dataclasses.replace(SUITE_HEAD, iqr=False))
    html = report_run.write_suite_report(tmp_path, suite_file(tmp_path)).read_text()
    assert "here: each experiment's untraced twin" in html and "untraced twin</td>" in html
    assert "10.7 us (1.39x)" in html and "<pre>" not in html


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"rows": [{"metric": "rtt"}]}, "field rows[0].experiment: missing"),
        ({"rows": [{"experiment": "pipe", "metric": "rtt", "mean_ns": "fast"}]}, "rows[0].mean_ns"),
        ({"host": {"cores": "two"}, "rows": []}, "field host.cores"),
        ({"started": "now"}, "field rows: missing"),
    ],
)
def test_a_damaged_suite_json_is_one_line(tmp_path, doc, says):
    """suite.json is read through its schema (store/schema.py SUITE): a row without its
    experiment, a figure that is no number, a host of the wrong kind is one line, exit 2
    (before: a KeyError or TypeError deep in the page)."""
    (tmp_path / "suite.json").write_text(json.dumps(doc))
    rc, out, err = run_cli(["report", tmp_path])
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and "Traceback" not in err and len(lines) == 1, err
    assert lines[0].startswith("ipctrace: ") and "suite.json" in lines[0] and says in lines[0], lines[0]
