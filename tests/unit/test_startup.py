"""The command line answers at once (issue 35): --help, list, --version, a command's --help and
an error import none of the heavy libraries, which only the code that computes with them
imports; and the command table is the one place a command's --help line is written."""

import subprocess

import pytest

from conftest import HOME, cli_argv, cli_env, needs_driver

HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "matplotlib", "duckdb")


def imported(*args):
    """(exit status, stderr without the import lines, the top-level packages imported) of
    `python -X importtime -m analysis ARGS`, what the launcher execs."""
    argv = cli_argv(*args)
    argv[1:1] = ["-X", "importtime"]
    p = subprocess.run(argv, capture_output=True, text=True, env=cli_env(), cwd=HOME, timeout=60)
    lines = p.stderr.splitlines()
    packages = {line.split("|")[-1].strip().split(".")[0] for line in lines if line.startswith("import time:")}
    return p.returncode, [line for line in lines if not line.startswith("import time:")], packages


@pytest.mark.parametrize(
    "args, rc",
    [
        (["--help"], 0),
        (["help"], 0),
        (["--version"], 0),
        (["run", "--help"], 0),
        (["lsit"], 2),  # a mistyped command
        (["run", "pipe", "--iteration", "3"], 2),  # a mistyped option
        (["run"], 2),  # a missing argument
    ],
)
def test_answers_without_the_heavy_libraries(args, rc):
    status, err, packages = imported(*args)
    assert status == rc
    assert rc == 0 or (len(err) == 1 and err[0].startswith("ipctrace: "))
    assert not packages & set(HEAVY), f"{' '.join(args)} imported {sorted(packages & set(HEAVY))}"


@needs_driver
def test_list_without_the_heavy_libraries():
    status, _, packages = imported("list")
    assert status == 0 and not packages & set(HEAVY), sorted(packages & set(HEAVY))


def test_the_check_sees_a_heavy_import(tmp_path):
    """The same reading of -X importtime finds numpy when it is imported."""
    p = subprocess.run(
        [*cli_argv()[:1], "-X", "importtime", "-c", "import numpy"], capture_output=True, text=True, timeout=60
    )
    assert "numpy" in {line.split("|")[-1].strip() for line in p.stderr.splitlines()}


def test_the_table_lists_every_command_and_the_modules_define_them():
    """Every command of the table is defined by its module (or main's built-ins), and the help
    line listed is the table's: a module names no help of its own for its command."""
    import argparse

    from analysis.cli import main as cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(cli.COMMANDS)
    listed = {a.dest: a.help for a in sub._choices_actions}
    assert listed == {name: row.help for name, row in cli.COMMANDS.items() if row.help is not None}
    # the front end's parser for one command: the others are their line only
    lazy = cli.build_parser("export", listing=True)
    sub = next(a for a in lazy._actions if isinstance(a, argparse._SubParsersAction))
    assert "--csv" in sub.choices["export"]._option_string_actions
    assert set(sub.choices["compare"]._option_string_actions) == {"-h", "--help"}
