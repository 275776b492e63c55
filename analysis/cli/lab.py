"""ipctrace lab [NAME] [--quick] [--json] [--out DIR]: guided experiments for an OS course.

Without NAME, the labs with their questions. With NAME, the lab states its question, runs the
measurements it needs (each a results directory under DIR), and answers in words written from
the figures it measured: every claim is checked against them, and where this machine does not
show the textbook's effect the text says what it showed instead. DIR/handout.html is the page
to print or project; --json prints the figures and the claims.
"""

import argparse
import json
import os

from analysis import LOADER
from analysis.errors import IpctraceError, UsageError
from analysis.render import lab as render_lab
from analysis.render.table import render
from analysis.run import lab as labs
from analysis.run import runner
from analysis.store.results import INCOMPLETE


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lab",
        description=__doc__.split("\n\n")[0] + " " + __doc__.split("\n\n")[1].replace("\n", " "),
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="the lab to run (without: the list)")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"small counts ({labs.QUICK['iterations']} iterations a run, fewer in the slow runs the README names; 1 run; "
        "under a minute a lab) instead of "
        f"{labs.DEFAULT['iterations']} iterations x {labs.DEFAULT['runs']} runs (under three minutes)",
    )
    p.add_argument("--json", action="store_true", help="print the lab's figures, claims and exercises as JSON")
    p.add_argument("--out", metavar="DIR", help="the lab's directory (default results/lab-NAME-YYYYmmdd-HHMMSS)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def run(args: argparse.Namespace) -> int:
    if not args.name:
        if args.json:
            print(json.dumps({"labs": [{"name": x.name, "title": x.title, "question": x.question} for x in labs.LABS]}))
            return 0
        # A line starts with a lab's name only on that lab's own line (scripts read the list so);
        # the question it answers follows on a line of its own (each starts with a capital).
        lines = render([[x.name, x.title] for x in labs.LABS], ["Lab", "Title"], left=2)
        print(lines[0])
        for x, line in zip(labs.LABS, lines[-len(labs.LABS) :]):
            print(line)
            print("      " + x.question)
        print(
            "\nRun one with: ipctrace lab NAME [--quick] [--out DIR]; it states its question first.\n"
            "README.md ('For a course') and docs/TEACHING.md say how to build a session from them."
        )
        return 0
    lab = labs.by_name(args.name)
    if not os.access(LOADER, os.X_OK):
        raise UsageError(f"the labs trace their runs, and tracing is not built ({LOADER} is missing); run 'make'")
    labs.check(lab, args.quick)
    rd = runner.open_new_outdir(args.out, f"lab-{lab.name}")
    try:
        runner.mark_incomplete(rd, "a lab")
        outcome = labs.run_lab(lab, args.quick, rd.path, rd.shown, args.quiet or args.json)
        os.unlink(INCOMPLETE, dir_fd=rd.fd)
    except IpctraceError as e:
        e.args = (rd.show(str(e)),)
        raise
    finally:
        rd.close()
    if args.json:
        print(json.dumps(outcome.as_json(), indent=1, default=labs.json_default))
    else:
        print(render_lab.text(outcome))
    return 0
