"""ipctrace command line: one argparse convention for every command.

Built in: help, setup, list, run. The other commands live in modules analysis/cli/<name>.py
that expose register(subparsers) and run(args) -> int. COMMANDS is the table of every command:
its module and the line `ipctrace --help` shows for it, so that the listing, a typo and a
built-in command import no command's module; only the command given is imported (some take
seconds: pandas, scipy, matplotlib, duckdb), and only the modules it runs.
Exit codes: 0 ok, 1 measurement failed, 2 usage or environment (an error of the
system a file operation met: EROFS, ENOSPC, ENAMETOOLONG, EMFILE... outside a
measurement, which says it failed), 128+signal when interrupted. No traceback reaches
the user unless IPCTRACE_DEBUG=1. A second SIGINT or SIGTERM while the first is being
handled ends the process at once (130/143).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any, NoReturn

from analysis import HOME, freeze_imports
from analysis.errors import Interrupted, IpctraceError, UsageError, stopping, unmasked
from analysis.render.text import render
from analysis.run import runner
from analysis.run.options import RunOptions, add_run_options, run_options


@dataclass(frozen=True)
class Command:
    """A row of the command table: the module that defines and runs the command (None: one of
    this module's), and its line in `ipctrace --help` (None: internal, runnable but not listed)."""

    module: str | None
    help: str | None


# In the order `ipctrace --help` lists them.
COMMANDS = {
    "help": Command(None, "what a command does and takes: ipctrace help CMD (as CMD --help)"),
    "setup": Command(None, "install what is missing and build (the launcher does this anyway)"),
    "list": Command(None, "the workloads, their metrics and the reports they reproduce"),
    "run": Command(None, "measure one workload"),
    "compare": Command("compare", "compare the results of several runs"),
    "export": Command("export", "write a results directory as CSV (or other formats)"),
    "clean": Command("clean", "remove IPC objects and directories left by dead runs"),
    "doctor": Command("doctor", "what this kernel allows for tracing, and why"),
    "explain": Command("explain", "the causal chain of one iteration of a traced run"),
    "validate": Command("validate", "inject known costs and check the breakdown finds them"),
    "bench": Command("bench", "probe effect of tracing against untraced runs, the attach floor, bpftrace and perf"),
    "bench-workloads": Command("bench_workloads", None),  # developer benchmarks (make bench)
    "bench-analysis": Command("bench_analysis", None),
    "suite": Command("suite", "every experiment of the seed reports, beside the reports' figures"),
    "sweep": Command("sweep", "copy cost in ns per byte from a sweep over message sizes"),
    "report": Command("report", "write DIR/report.html: summary, breakdown, heat maps, flame graphs"),
    "collect": Command(
        "collect", "gather results directories into one DuckDB database (or a Parquet dataset: --into DIR/)"
    ),
    "trace": Command(
        "trace", "trace any program: -- CMD, --pid or --comm; iterations by --rtt, --markers or --iteration-func"
    ),
    "watch": Command(
        "watch",
        "trace a service continuously; keep each slow request explained (--keep DIR) and send it as an "
        "OpenTelemetry trace (--otlp URL)",
    ),
    "merge": Command("merge", "join two hosts' traces of one conversation: the round trip across hosts"),
    "lab": Command("lab", "guided OS-course experiments, explained from the figures they measure"),
}
BUILTIN = [name for name, c in COMMANDS.items() if c.module is None]


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one UsageError line instead of usage text and exit 2, naming
    the command they are about; options are taken only as written (no prefixes: --iteration
    is not --iterations)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("allow_abbrev", False)
        super().__init__(*args, **kw)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog.removeprefix('ipctrace ')}: {message}" if self.prog != "ipctrace" else message)


# --- built-in commands --------------------------------------------------------


def cmd_setup(args: argparse.Namespace) -> int:
    """The launcher already ran tools/bootstrap and make; --test adds the test tools."""
    if args.test:
        p = subprocess.run([str(HOME / "tools" / "bootstrap"), "--test"])
        if p.returncode:
            return p.returncode
    runner.require_driver()
    print(f"ipctrace is ready in {HOME}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from analysis.model.seeds import citation, cite_in

    wls = runner.catalog()
    if args.json:
        print(json.dumps({"workloads": wls}, indent=2))
        return 0
    rows = []
    for w in wls:
        derived = list(w.get("derived") or {})
        rows.append([w["name"], ", ".join(w["metrics"] + [d + "*" for d in derived]), w.get("summary", "")])
    for line in render(rows, ["workload", "metrics (primary first)", "what it measures"], left=3):
        print(line)
    print("* derived from a measured metric, not measured itself")
    modes = [(w["name"], w.get("mode_help") or ", ".join(w["modes"])) for w in wls if w.get("modes")]
    if modes:
        print("\nmodes (--mode M; the first is the default), and what each measures:")
        for line in render([[n, m] for n, m in modes], ["workload", "modes"], left=2):
            print("  " + line)
    seeds = [(w["name"], *cite_in(w["seed"])) for w in wls if w.get("seed")]
    if seeds:
        print("\nreproduces:")
        for line in render([[n, s] for n, s, _ in seeds], ["workload", "seed report"], left=2):
            print("  " + line)
        for report in sorted({r for _, _, cited in seeds for r in cited}):
            print("  " + citation(report))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    opts = run_options(args, calibrate_by_default=True)
    try:
        resdir = runner.run_workload(args.workload, opts, args.out, trace=not args.no_trace, quiet=args.quiet)
    except Interrupted as e:
        if e.resdir:
            show_summary(e.resdir, args.json)
        raise
    show_summary(resdir, args.json)
    if not args.json:
        _after_the_table(resdir, opts, not args.no_trace)
    return 0


def _after_the_table(resdir: Path, opts: RunOptions, traced: bool) -> None:
    """--hist: each measured metric's histogram; --break-at: the iteration that crossed it,
    explained when the run was traced."""
    from analysis.render.table import hist_lines
    from analysis.store.results import read_iterations, read_workload

    if opts.hist:
        iters = read_iterations(resdir)
        for metric, group in iters.groupby(iters["metric"].astype(str), sort=False, observed=True):
            print()
            print("\n".join(hist_lines(group["latency_ns"].to_numpy(), f"{metric} latency (ns)")))
    stop = read_workload(resdir).get("break")
    if stop:
        print(
            f"\nstopped at --break-at: run {stop['run']} iteration {stop['iteration']} took "
            f"{stop['latency_ns'] / 1000:,.1f} us (threshold {stop['threshold_ns'] / 1000:,.1f} us)"
        )
        if traced:
            from analysis.model import explain
            from analysis.render.explain import render as render_explanation
            from analysis.store.rundir import explain_inputs

            with explain_inputs(resdir) as inputs:
                x = inputs.answer(explain.explain(inputs, run=stop["run"], iteration=stop["iteration"]))
                print(render_explanation(x))


def show_summary(resdir: Path | str, as_json: bool) -> None:
    from analysis.render.table import table
    from analysis.store.results import read_summary, run_summary_file

    if as_json:
        print(json.dumps(read_summary(resdir), indent=2))  # the file as it is
    else:
        print(table(run_summary_file(resdir)))
        print(f"results: {resdir}")


# --- parser -------------------------------------------------------------------


class Commands(argparse._SubParsersAction):
    """The sub-command action whose parsers take their --help line from COMMANDS (the one place
    it is written); an internal command, without one, is not listed."""

    def add_parser(self, name: str, **kw: Any) -> argparse.ArgumentParser:
        row = COMMANDS.get(name)
        if row is not None and row.help is not None:
            kw.setdefault("help", row.help)
        return super().add_parser(name, **kw)


class VersionAction(argparse.Action):
    """--version: the version is looked up only when asked for."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: Any = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(f"ipctrace {runner.version()}")
        parser.exit()


def build_parser(command: str | None = None, listing: bool = False) -> Parser:
    """The parser of every command (their modules imported); for the front end (listing), the
    command given is the only one whose module is imported and whose options are defined, the
    others are their line of --help."""
    parser = Parser(
        prog="ipctrace",
        description="Measure IPC latency and split it into its costs.",
        epilog="ipctrace CMD --help describes each command.",
    )
    parser.register("action", "parsers", Commands)
    parser.add_argument("--version", action=VersionAction, help="show program's version number and exit")
    sub = parser.add_subparsers(title="commands", dest="command", metavar="CMD", parser_class=Parser)

    for name, row in COMMANDS.items():
        if listing and name != command:
            if row.help is not None:
                sub.add_parser(name)
        elif row.module is None:
            _builtin(name, sub, parser)
        else:
            _register(sub, importlib.import_module(f"analysis.cli.{row.module}"))
    return parser


def _builtin(name: str, sub: argparse._SubParsersAction, parser: argparse.ArgumentParser) -> None:
    """The commands defined here."""
    p = sub.add_parser(name)
    if name == "help":
        p.add_argument("cmd", nargs="?", metavar="CMD")

        def show_help(args: argparse.Namespace) -> int:
            parser.print_help()
            return 0

        p.set_defaults(_run=show_help)
    elif name == "setup":
        p.add_argument("--test", action="store_true", help="also install what the test suite needs")
        p.set_defaults(_run=cmd_setup)
    elif name == "list":
        p.add_argument("--json", action="store_true", help='print {"workloads": [...]}')
        p.set_defaults(_run=cmd_list)
    elif name == "run":
        p.description = "Measure one workload and print its summary; the results directory keeps every iteration."
        p.add_argument("workload", metavar="WORKLOAD", help="name from 'ipctrace list'")
        add_run_options(p)
        p.set_defaults(_run=cmd_run)


def _register(sub: argparse._SubParsersAction, mod: ModuleType) -> None:
    """mod.register(sub) adds its parsers; each new one runs mod.run."""
    before = set(sub.choices)
    mod.register(sub)
    for name in set(sub.choices) - before:
        sub.choices[name].set_defaults(_run=mod.run)


# --- entry point ----------------------------------------------------------------


def _terminated(signum: int, frame: FrameType | None) -> NoReturn:
    stopping(signum)  # its exception may be replaced on the way up (errors.unmasked)
    _rearm()
    raise Interrupted(signum)


def _interrupted(signum: int, frame: FrameType | None) -> NoReturn:
    stopping(signum)
    _rearm()
    raise KeyboardInterrupt


def _rearm() -> None:
    """After the first signal, the next one ends the process at once (we are winding down)."""
    signal.signal(signal.SIGINT, exit_now)
    signal.signal(signal.SIGTERM, exit_now)


def exit_now(signum: int, frame: FrameType | None) -> NoReturn:
    """Signal handler: one line, then exit 128 + signal without unwinding (nothing to keep)."""
    try:
        os.write(2, b"ipctrace: interrupted\n")
    finally:
        os._exit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    stopping(0)
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGINT, _interrupted)
    try:
        argv = sys.argv[1:] if argv is None else argv
        if argv[:1] == ["help"] and len(argv) > 1:
            argv = [argv[1], "--help"]  # ipctrace help CMD is CMD --help
        command = next((a for a in argv if not a.startswith("-")), None)
        if command is not None and command not in COMMANDS:
            near = difflib.get_close_matches(command, list(COMMANDS), n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise UsageError(f"unknown command '{command}'{hint} (ipctrace --help lists them)")
        parser = build_parser(command, listing=True)
        args, extra = parser.parse_known_args(argv)
        if extra:
            raise UsageError(
                f"{command or 'ipctrace'}: unrecognized arguments: {' '.join(extra)}"
                + _near_option(parser, command, extra)
            )
        if not getattr(args, "_run", None):
            raise UsageError("no command given (ipctrace --help lists them)")
        freeze_imports()
        if command in WHOLE_FIRST:
            _written_whole(args)
        try:
            rc = args._run(args)
        except Exception as e:
            if (cause := unmasked(e)) is not e:
                raise cause from None
            raise
        sys.stdout.flush()
        return rc or 0
    except IpctraceError as e:
        _say(str(e))
        return e.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return 128 + signal.SIGINT
    except BrokenPipeError:
        # The reader of our output went away (| head): nothing left to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        # What the system refused (a read-only or full file system, a name too long, too
        # many open files...): the environment, not a bug of ours.
        _say(f"{e.filename}: {e.strerror or e}" if e.filename else f"{e.strerror or e}")
        return 2
    except MemoryError:
        _say("out of memory")
        return 2
    except Exception as e:
        if os.environ.get("IPCTRACE_DEBUG") == "1":
            traceback.print_exc()
        _say(f"internal error: {type(e).__name__}: {e} (IPCTRACE_DEBUG=1 shows where)")
        return 1


# the commands that read results directories: a request `ipctrace watch` kept raw is written
# whole first (the keeper writes them whole as its CPU share allows; the others when opened)
WHOLE_FIRST = {"explain", "report", "export", "collect", "compare"}


def _written_whole(args: argparse.Namespace) -> None:
    from analysis.store.results import KEPT_RAW

    one = getattr(args, "dir", None)
    dirs = [one] if isinstance(one, (str, os.PathLike)) else list(getattr(args, "dirs", None) or [])
    raw = [d for d in dirs if isinstance(d, (str, os.PathLike)) and os.path.lexists(os.path.join(d, KEPT_RAW))]
    if raw:
        from analysis.run.watch import written_whole

        for d in raw:
            written_whole(os.fspath(d))


def _near_option(parser: argparse.ArgumentParser, command: str | None, extra: Sequence[str]) -> str:
    """'; did you mean --iterations?' for the first unknown option close to one of command's."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    own = sub.choices.get(command) if sub and command else parser
    names = [o for o in (own or parser)._option_string_actions if o.startswith("--")]
    for word in (e.split("=", 1)[0] for e in extra if e.startswith("--")):
        near = difflib.get_close_matches(word, names, n=1, cutoff=0.75)
        if near:
            return f"; did you mean {near[0]}? (ipctrace {command} --help)"
    return ""


def _say(message: str) -> None:
    print("ipctrace: " + " ".join(message.split("\n")), file=sys.stderr)
