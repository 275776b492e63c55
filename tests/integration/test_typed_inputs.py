"""Damaged inputs that are well-formed files (issue 25, finding 11): a count that fits no
64-bit column, a NaN where a time must be, a sweep whose size directories or fit are of the
wrong type, a dataset without a table, with a text version, a zeroed block or ill-typed rows,
and semantic damage (negative or INT64_MAX latencies, a metric the run does not have, more
iterations counted than the file holds). Each is refused where the store reads it, so every
command that reads it says one line and exits 2: never an "internal error", never read as if
it were fine."""

import json
import shutil
import subprocess

import duckdb
import pandas as pd
import pytest

from conftest import cli_argv, cli_env, needs_tracing, run_argv, run_cli


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=cli_env())
    assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """The intact inputs the cases damage: an untraced run, a sweep of two sizes, a dataset of
    two runs (and, where tracing works, a traced run)."""
    base = tmp_path_factory.mktemp("typed")
    ns = base / "ns"
    run(run_argv("null-syscall", ns, "--no-trace", iterations=300, warmup=10))
    run(run_argv("null-syscall", base / "ns2", "--no-trace", iterations=300, warmup=10))
    sizes = ("--sizes", "1,4096", "--iterations", 300, "--warmup", 10, "--runs", 1, "--no-trace", "--quiet")
    run(cli_argv("sweep", "pipe", *sizes, "--out", base / "sweep"))
    run(cli_argv("collect", ns, base / "ns2", "--into", base / "set.duckdb"))
    return base


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    d = tmp_path_factory.mktemp("typed-traced") / "pipe"
    run(run_argv("pipe", d, iterations=2000, warmup=100))
    return d


# --- how a results directory is damaged ----------------------------------------------------


def summary(edit):
    def change(d):
        s = json.loads((d / "summary.json").read_text())
        edit(s)
        (d / "summary.json").write_text(json.dumps(s))

    return change


def summary_text(old, new):
    def change(d):
        text = (d / "summary.json").read_text()
        assert old in text
        (d / "summary.json").write_text(text.replace(old, new, 1))

    return change


def parquet(name, edit):
    def change(d):
        df = pd.read_parquet(d / name)
        edit(df).to_parquet(d / name, index=False)

    return change


def metric_n(n):
    return summary(lambda s: s["metrics"]["syscall"].__setitem__("n", n))


def latencies(value, start=None):
    """Every latency value, t_end_ns moved with it (still t_end - t_start); start: t_start_ns too."""

    def edit(df):
        t0 = df.t_start_ns if start is None else start
        return df.assign(t_start_ns=t0, t_end_ns=t0 + value, latency_ns=value)

    return parquet("iterations.parquet", edit)


def per_size(field, value):
    return summary(lambda s: next(iter(s["per_size"].values())).__setitem__(field, value))


# (id, directory, damage, command (DIR: the damaged one, GOOD: an intact run), what the line says)
# before: what today's main did with it
RESULTS = [
    # before: exit 1, internal error: ConversionException (the BIGINT n column)
    ("n-1e30-collect", "ns", metric_n(10**30), "collect DIR --into OUT", "metrics.syscall.n"),
    # before: exit 0
    ("n-1e30-compare", "ns", metric_n(10**30), "compare GOOD DIR", "metrics.syscall.n"),
    # before: exit 1, internal error: ConversionException
    ("n-10^400-collect", "ns", summary_text('"n": 300', '"n": 1' + "0" * 400), "collect DIR --into OUT", "401-digit"),
    # before: exit 1, internal error: ValueError (Python's 4300-digit limit)
    ("n-10^5000-compare", "ns", summary_text('"n": 300', '"n": 1' + "0" * 5000), "compare GOOD DIR", "summary.json"),
    # before: exit 0 (300 iterations counted 10^9 times)
    ("n-beyond-rows", "ns", metric_n(10**9), "compare GOOD DIR", "the file holds 300"),
    # before: exit 0
    ("latency-negative", "ns", latencies(-5), "export DIR --csv", "column latency_ns"),
    ("latency-negative-collect", "ns", latencies(-5), "collect DIR --into OUT", "column latency_ns"),
    # before: exit 0
    ("latency-int64-max", "ns", latencies(2**63 - 1, start=0), "compare GOOD DIR", "column latency_ns"),
    (
        "latency-not-end-minus-start",
        "ns",
        parquet("iterations.parquet", lambda df: df.assign(latency_ns=2**63 - 1)),
        "report DIR",
        "column latency_ns",
    ),
    # before: exit 0
    (
        "metric-unknown",
        "ns",
        parquet("iterations.parquet", lambda df: df.assign(metric="bogus")),
        "compare GOOD DIR",
        "bogus is none of the metrics",
    ),
    (
        "summary-metric-without-rows",
        "ns",
        summary(lambda s: s["metrics"].__setitem__("bogus", s["metrics"]["syscall"])),
        "report DIR",
        "iterations of bogus",
    ),
    # before: exit 1, internal error: TypeError (PosixPath / int)
    ("sweep-dir-5", "sweep", per_size("dir", 5), "report DIR", "per_size.1.dir"),
    ("sweep-dir-5-collect", "sweep", per_size("dir", 5), "collect DIR --into OUT", "per_size.1.dir"),
    # before: exit 0, another directory's report made and linked
    ("sweep-dir-outside", "sweep", per_size("dir", "../../elsewhere"), "report DIR", "per_size.1.dir"),
    # before: exit 1, internal error: TypeError (string indices)
    ("sweep-copy-x", "sweep", summary(lambda s: s.__setitem__("copy", "x")), "report DIR", "field copy"),
    # before: exit 1, internal error: ValueError (int('x'))
    (
        "sweep-size-x-collect",
        "sweep",
        summary(lambda s: s["per_size"].__setitem__("x", s["per_size"].pop("1"))),
        "collect DIR --into OUT",
        "per_size.x",
    ),
]


def check_refused(args, rc, out, err, says):
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in out + err and "internal error" not in err, (args, rc, err[-400:])
    assert rc == 2, (args, rc, out[-300:], err[-300:])
    assert len(lines) == 1 and lines[0].startswith("ipctrace: "), err
    assert says in lines[0], lines[0]


def command(template, tmp_path, **names):
    return [str(names[a]) if a in names else a for a in template.split()]


@pytest.mark.parametrize("src,change,template,says", [c[1:] for c in RESULTS], ids=[c[0] for c in RESULTS])
def test_damaged_results(good, tmp_path, src, change, template, says):
    d = tmp_path / "d"
    shutil.copytree(good / src, d)
    change(d)
    args = command(template, tmp_path, DIR=d, GOOD=good / "ns2", OUT=tmp_path / "out.duckdb")
    check_refused(args, *run_cli(args), says)
    assert not (tmp_path / "out.duckdb").exists()


@needs_tracing
@pytest.mark.parametrize("rows", ["all", "one"])
@pytest.mark.parametrize("template", ["export DIR --perfetto-proto", "report DIR", "compare DIR DIR"])
def test_breakdown_nan(traced, tmp_path, rows, template):
    """NaN in a component of the critical path (before: export --perfetto-proto exit 1,
    internal error: ValueError; report and compare exit 0)."""
    d = tmp_path / "d"
    shutil.copytree(traced, d)
    parquet(
        "breakdown.parquet", lambda df: df.assign(user=df.user.where(df.index != 5) if rows == "one" else float("nan"))
    )(d)
    args = command(template, tmp_path, DIR=d)
    check_refused(args, *run_cli(args), "column user")


# --- how a dataset is damaged --------------------------------------------------------------


def sql(*statements):
    def change(path):
        con = duckdb.connect(str(path))
        for s in statements:
            con.execute(s)
        con.close()

    return change


def zeroed_block(path):
    """The first 4 KiB of the first block of data that DuckDB reads only when a query needs it
    (opening the file and the catalog still work): its checksum then fails mid-command."""
    raw = path.read_bytes()
    block = 256 * 1024
    for at in range(12288 + block, len(raw), block):
        path.write_bytes(raw[:at] + bytes(4096) + raw[at + 4096 :])
        try:
            con = duckdb.connect(str(path), read_only=True)
        except duckdb.Error:
            continue
        try:
            for t in ("runs", "iterations", "summaries"):
                con.execute(f"SELECT * FROM {t}").fetchall()
        except duckdb.Error:
            return
        finally:
            con.close()
    pytest.fail("no block of the dataset is read lazily: the case needs another layout")


def ids_as_numbers(path):
    sql(
        "CREATE TABLE r2 AS SELECT * REPLACE (42 AS run_id) FROM runs",
        "DROP TABLE runs",
        "ALTER TABLE r2 RENAME TO runs",
    )(path)


# (id, damage, what the line says); each under compare and collect --append
DATASETS = [
    # before: exit 1, internal error: CatalogException (both commands)
    ("no-runs", sql("DROP TABLE runs"), "no runs table"),
    ("no-iterations", sql("DROP TABLE iterations"), "no iterations table"),
    # before: exit 1, internal error: TypeError (both)
    (
        "version-text",
        sql("DROP TABLE dataset", "CREATE TABLE dataset AS SELECT 'x' AS version"),
        "column version: expected",
    ),
    ("version-null", sql("UPDATE dataset SET version = NULL"), "expected one version"),
    # before: compare exit 1, internal error: IOException; collect --append exit 0, the damage kept
    ("zeroed-block", zeroed_block, "is damaged (DuckDB: "),
    # before: exit 1, internal error: ConversionException (both)
    ("run-id-number", ids_as_numbers, "column run_id: expected"),
    # before: compare exit 1, internal error: JSONDecodeError / TypeError; collect --append exit 0
    (
        "summary-not-json",
        sql("ALTER TABLE runs ALTER summary TYPE VARCHAR", "UPDATE runs SET summary = 'not json'"),
        "is not valid JSON",
    ),
    ("summary-number", sql("UPDATE runs SET summary = '5'"), "not an ipctrace summary"),
    ("summary-null", sql("UPDATE runs SET summary = NULL"), "without a summary"),
    # before: exit 0 (the label 5, the latencies read as text)
    ("label-number", sql("ALTER TABLE runs ALTER label TYPE INTEGER USING 5"), "column label: expected"),
    (
        "latency-text",
        sql("ALTER TABLE iterations ALTER latency_ns TYPE VARCHAR", "UPDATE iterations SET latency_ns = 'x'"),
        "column latency_ns: expected",
    ),
    ("latency-gone", sql("ALTER TABLE iterations DROP COLUMN latency_ns"), "lacks the column latency_ns"),
]
# semantic damage in the rows (before: exit 0 under both)
DATASET_ROWS = [
    ("latency-negative", sql("UPDATE iterations SET latency_ns = -5"), "column latency_ns"),
    ("latency-int64-max", sql("UPDATE iterations SET latency_ns = 9223372036854775807"), "column latency_ns"),
    ("metric-unknown", sql("UPDATE iterations SET metric = 'bogus'"), "bogus is none of the metrics"),
]


@pytest.mark.parametrize("how", ["compare", "append"])
@pytest.mark.parametrize(
    "change,says", [c[1:] for c in DATASETS + DATASET_ROWS], ids=[c[0] for c in DATASETS + DATASET_ROWS]
)
def test_damaged_dataset(good, tmp_path, change, says, how):
    path = tmp_path / "set.duckdb"
    shutil.copy(good / "set.duckdb", path)
    change(path)
    before = path.read_bytes()
    args = ["compare", path] if how == "compare" else ["collect", good / "sweep", "--into", path, "--append"]
    check_refused(args, *run_cli(args), says)
    assert str(path) in run_cli(args)[2]  # the user's file named, not a private copy
    assert path.read_bytes() == before


def test_intact_inputs_still_read(good, tmp_path):
    """The checks refuse damage, not ipctrace's own files: the intact ones read as before."""
    assert run_cli(["compare", good / "ns", good / "ns2"])[0] == 0
    assert run_cli(["compare", good / "set.duckdb"])[0] == 0
    shutil.copy(good / "set.duckdb", tmp_path / "set.duckdb")
    rc, out, err = run_cli(["collect", good / "sweep", "--into", tmp_path / "set.duckdb", "--append"])
    assert rc == 0 and "2 runs collected" in out, err
    assert run_cli(["compare", tmp_path / "set.duckdb"])[0] == 0
    assert run_cli(["report", good / "sweep"])[0] == 0


@needs_tracing
@pytest.mark.parametrize("template", ["export DIR --perfetto-proto", "report DIR", "compare DIR DIR"])
def test_breakdown_metric_unknown(traced, tmp_path, template):
    """breakdown.parquet's rows of a metric the run does not have (before: exit 0, compare's
    components the mean of nothing)."""
    d = tmp_path / "d"
    shutil.copytree(traced, d)
    parquet("breakdown.parquet", lambda df: df.assign(metric=pd.Categorical(["bogus"] * len(df))))(d)
    args = command(template, tmp_path, DIR=d)
    check_refused(args, *run_cli(args), "bogus is none of the metrics")
