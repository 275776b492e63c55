"""ipctrace collect DIR... --into FILE: many results directories (from this machine or copied
from others; a sweep's or a suite's directory gives its runs) as one DuckDB database, queryable
with plain SQL: tables runs, summaries, iterations, breakdown and breakdown_sides, joined by
run_id, every column a plain name, durations in ns (the README's "Datasets: the tables" lists
the columns); a traced run's untraced twin comes with it. `ipctrace compare FILE` reads it.
--into DIR/ (a trailing slash or a directory) writes a Hive-partitioned Parquet dataset instead,
the same tables for DuckDB, Spark or any engine of a fleet (store/fleet.py)."""

import argparse

from analysis.store import dataset, fleet


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "collect",
        description=__doc__,
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results, sweep or suite directories")
    p.add_argument(
        "--into",
        required=True,
        metavar="FILE",
        help="the database to write (a new file), or DIR/: a Parquet dataset directory",
    )
    p.add_argument("--append", action="store_true", help="add to FILE or DIR/ instead (runs already in it are skipped)")


def run(args: argparse.Namespace) -> int:
    into = fleet if fleet.wants_directory(args.into) else dataset
    added, already = into.collect(args.dirs, args.into, args.append)
    print(f"{args.into}: {added} runs collected" + (f", {already} already in it" if already else ""))
    return 0
