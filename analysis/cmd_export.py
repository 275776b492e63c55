"""ipctrace export DIR --FORMAT...: write a results directory in other formats, next to its files.

--csv is built in. Every further format is one entry in FORMATS:
--NAME runs function(resdir: Path) of its module, which returns the path (or
list of paths) it wrote; a format whose module is absent is not offered.
"""
import importlib
import importlib.util
import os
from pathlib import Path

from analysis import events as events_mod, safeio
from analysis.errors import UsageError
from analysis.results import read_iterations, read_summary

FORMATS = {  # name: (module, function, help)
    "perfetto": ("analysis.perfetto", "write", "trace.perfetto.json, for ui.perfetto.dev or chrome://tracing"),
}


def export_csv(resdir):
    """iterations.csv, and events.csv when the run was traced."""
    from analysis.perfetto import was_traced

    resdir = Path(resdir)
    df = read_iterations(resdir)
    ev = None
    if os.path.lexists(resdir / "events.parquet"):
        ev = events_mod.read_parquet(resdir)
    elif was_traced(read_summary(resdir)):
        # Said, never left out in silence: the run has events, this directory lost them.
        raise UsageError(f"{resdir} was traced but its events.parquet is missing: events.csv cannot be written")
    written = [_write_csv(df, resdir / "iterations.csv")]
    if ev is not None:
        written.append(_write_csv(ev, resdir / "events.csv"))
    return written


def _write_csv(df, path):
    try:
        with safeio.created(path) as p:
            df.to_csv(p, index=False)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None
    return path


def exporters():
    """{format: help} of the formats present (their modules are imported only when chosen)."""
    found = {"csv": "iterations.csv (and events.csv when traced)"}
    found.update({name: text for name, (modname, _, text) in FORMATS.items()
                  if importlib.util.find_spec(modname) is not None})
    return found


def exporter(name):
    if name == "csv":
        return export_csv
    modname, func, _ = FORMATS[name]
    return getattr(importlib.import_module(modname), func)


def register(sub):
    p = sub.add_parser("export", help="write a results directory as CSV (or other formats)",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("dir", metavar="DIR", type=Path, help="results directory")
    for name, text in exporters().items():
        p.add_argument(f"--{name}", action="store_true", help=text)


def run(args):
    chosen = [exporter(n) for n in exporters() if getattr(args, n)]
    if not chosen:
        raise UsageError("export: say which format: " + " ".join(f"--{n}" for n in exporters()))
    read_summary(args.dir)
    for fn in chosen:
        written = fn(args.dir)
        for path in written if isinstance(written, list) else [written]:
            print(path)
    return 0
