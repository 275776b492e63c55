"""ipctrace export DIR --FORMAT...: write a results directory in other formats, next to its files.

Each format is one entry in FORMATS: --NAME runs its function(resdir: Path, args), which
returns the path (or list of paths) it wrote.
"""

import os
from pathlib import Path

from analysis.errors import UsageError
from analysis.store import events as events_mod
from analysis.store import safeio
from analysis.store.results import read_iterations, read_summary, was_traced


def export_csv(resdir, args=None):
    """iterations.csv, and events.csv when the run was traced."""
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


def export_perfetto(resdir, args=None):
    from analysis.render import perfetto  # imported only when chosen

    return perfetto.write(resdir)


def export_perfetto_proto(resdir, args=None):
    from analysis.render import perfetto_proto  # imported only when chosen

    return perfetto_proto.write(resdir, getattr(args, "window", None), getattr(args, "around", None))


FORMATS = {  # name: (function, help)
    "csv": (export_csv, "iterations.csv (and events.csv when traced)"),
    "perfetto": (export_perfetto, "trace.perfetto.json, for ui.perfetto.dev or chrome://tracing"),
    "perfetto-proto": (
        export_perfetto_proto,
        "trace.perfetto-trace: the binary Perfetto trace (interned names, delta times, CPU tracks, each "
        "iteration's breakdown as arguments), compact for long runs",
    ),
}


def register(sub):
    p = sub.add_parser(
        "export", help="write a results directory as CSV (or other formats)", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("dir", metavar="DIR", type=Path, help="results directory")
    for name, (_, text) in FORMATS.items():
        p.add_argument(f"--{name}", action="store_true", help=text)
    p.add_argument(
        "--window",
        metavar="A:B",
        help="--perfetto-proto: only iterations A to B (their positions in time order), or a time span since "
        "the first iteration (1.5s:2s, 200ms:250ms)",
    )
    p.add_argument(
        "--around",
        metavar="p99|max|K",
        help="--perfetto-proto: only the iteration at the p99, the slowest one, or iteration K, with 5 either side",
    )


def run(args):
    chosen = [fn for n, (fn, _) in FORMATS.items() if getattr(args, n.replace("-", "_"))]
    if not chosen:
        raise UsageError("export: say which format: " + " ".join(f"--{n}" for n in FORMATS))
    if (args.window or args.around) and not args.perfetto_proto:
        raise UsageError("export: --window and --around choose a part of the run for --perfetto-proto")
    read_summary(args.dir)
    for fn in chosen:
        written = fn(args.dir, args)
        for path in written if isinstance(written, list) else [written]:
            print(path)
    return 0
