"""ipctrace export DIR --FORMAT...: write a results directory in other formats, next to its files.

--csv is built in. A further format NAME comes from a module
analysis/export_NAME.py (listed in FORMATS) that defines HELP (one line) and
export(resdir: Path) -> list[Path] (the files written); it adds --NAME.
"""
import importlib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from analysis.errors import UsageError
from analysis.results import read_iterations, read_summary

FORMATS = ["csv", "perfetto"]


def export_csv(resdir):
    """iterations.csv, and events.csv when the run was traced."""
    written = []
    df = read_iterations(resdir)
    written.append(_write_csv(df, resdir / "iterations.csv"))
    events = resdir / "events.parquet"
    if events.exists():
        try:
            ev = pq.read_table(events).to_pandas()
        except (pa.ArrowException, OSError) as e:
            raise UsageError(f"{events} is truncated or corrupted ({str(e).splitlines()[0]})") from None
        written.append(_write_csv(ev, resdir / "events.csv"))
    return written


def _write_csv(df, path):
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        df.to_csv(tmp, index=False)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    return path


def exporters():
    """{format: (help, function)} of the formats present."""
    found = {"csv": ("iterations.csv (and events.csv when traced)", export_csv)}
    for name in FORMATS[1:]:
        modname = f"analysis.export_{name}"
        try:
            mod = importlib.import_module(modname)
        except ModuleNotFoundError as e:
            if e.name == modname:
                continue
            raise
        found[name] = (mod.HELP, mod.export)
    return found


def register(sub):
    p = sub.add_parser("export", help="write a results directory as CSV (or other formats)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("dir", metavar="DIR", type=Path, help="results directory")
    for name, (text, _) in exporters().items():
        p.add_argument(f"--{name}", action="store_true", help=text)


def run(args):
    chosen = {n: f for n, (_, f) in exporters().items() if getattr(args, n)}
    if not chosen:
        raise UsageError("export: say which format: " + " ".join(f"--{n}" for n in exporters()))
    read_summary(args.dir)
    for fn in chosen.values():
        for path in fn(args.dir):
            print(path)
    return 0
