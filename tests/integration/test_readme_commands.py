"""Every shell command README.md shows runs here, or is listed below with the reason it cannot
(issue 34: the README's examples had drifted from the tool). The commands are taken from the
README itself: each logical line of a ```sh block, each `$ ` (or `host$ `) line of a
```console block. A block's commands that run here run together, as a reader would type them,
in a directory of the test's own (./ipctrace and .output linked into it, `ipctrace` on PATH),
so the results/ they write are the test's; `sudo ` is left out (the tests run as root, as
`sudo make test` does; the path under sudo is tests/integration/test_broker.py's)."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from conftest import HOME, cli_env, needs_tracing

README = HOME / "README.md"

# A command that cannot run here: the reason, and where its substance is tested instead.
NOT_RUN = {
    "sudo ./ipctrace run pipe": "the default measurement, 5 runs x 100 000 traced iterations and their analysis, "
    "takes minutes on a test machine; `ipctrace run pipe --same-cpu --iterations 3000 --hist` runs here, and "
    "the last block's run pipe",
    "sudo make test": "the whole test suite, this test among it",
    "ipctrace collect suites/* --into course.duckdb": "collects the suites of a course's students (suites/*), "
    "which are not here; tests/unit/store/test_readme_queries.py collects into course.duckdb and runs its query",
    'duckdb all.duckdb "': "the duckdb program is not a dependency: the query runs through the duckdb module "
    "in tests/unit/store/test_readme_queries.py, taken from the README",
    'duckdb course.duckdb "': "as for all.duckdb: tests/unit/store/test_readme_queries.py",
    "ipctrace collect web-*/results/* --into fleet/": "collects the results of other machines (web-*); "
    "tests/unit/store/test_readme_queries.py collects into fleet/ and runs the query below it",
    'duckdb -c "': "as for all.duckdb: tests/unit/store/test_readme_queries.py",
    "go install github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0 && ~/go/bin/jaeger &": "downloads Jaeger "
    "(a network and a Go toolchain); tests/integration/test_watch.py sends --otlp to a receiver of its own",
    ".output/examples/known_pingpong tcp --cpus 0,1 --iterations 100000000 --spin-ns 2000000 --spin-every 100 &": (
        "the service of the Jaeger walk-through, watched until the reader stops it; test_watch.py watches "
        "known_pingpong with --slower-than, --keep and --otlp"
    ),
    "sudo ./ipctrace watch --rtt -p $(pgrep -d, known_pingpong) --slower-than 1ms --keep kept --max-disk 500M "
    "--otlp http://127.0.0.1:4318": "sends to the Jaeger above and runs until stopped; test_watch.py",
    "xdg-open 'http://127.0.0.1:16686/search?service=known_pingpong'": "opens a browser",
    "./ipctrace explain kept/requests/$(ls kept/requests | tail -1)": "explains what the watch above kept; "
    "test_watch.py explains a kept request",
    "sudo ./ipctrace trace --messages --rtt --out C -- ./client --host server ...": "the reader's own client, "
    "on another host; tests/integration/test_merge.py traces a client and a server in two network namespaces "
    "with --messages and merges them",
    "sudo ./ipctrace trace --messages --out S -- ./server ...": "the reader's own server, on another host; "
    "test_merge.py",
    "./ipctrace merge C S --out M": "merges the two traces above; test_merge.py",
    "ipctrace compare results/pipe-cross results/pipe-same": "two runs of --runs 3 each "
    "named in the text around it; the last block's compare runs here on two runs it made",
    "ipctrace lab same-vs-cross --quick --out lab1": "a lab takes minutes of measurements; "
    "tests/integration/test_lab_runs.py runs same-vs-cross --quick",
}

# What a command that runs here runs with instead of the README's text, and why.
SUBSTITUTED = {
    "/tmp/r/": "the redis socket's directory: the test's own, made first",
    "results/trace-taskset-...": "the trace the line before made (the README elides its date)",
}


def commands() -> list[tuple[int, str]]:
    """(block number, command) of every command the README's sh and console blocks show, in
    order: a command's first line (a duckdb query's SQL goes on to its closing quote), without
    its `$ ` prompt or a trailing comment."""
    out = []
    for k, (lang, body) in enumerate(re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(), re.S | re.M)):
        if lang == "sh":
            lines = iter(body.splitlines())
            for line in lines:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                first, whole = line, line
                while not _complete(whole):
                    whole += "\n" + next(lines)
                out.append((k, _command(first), whole))
        elif lang == "console":
            for line in body.splitlines():
                m = re.match(r"^\w*\$ (.*)$", line)
                if m:
                    out.append((k, _command(m.group(1)), m.group(1)))
    return out


def _complete(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:  # a quote still open: the command goes on
        return False
    return True


def _command(line: str) -> str:
    """line without a trailing comment (two spaces or more, then #), as NOT_RUN names it."""
    return re.split(r"\s{2,}#(?=[^'\"]*$)", line.rstrip())[0] if "  #" in line else line.rstrip()


def test_every_command_runs_or_has_a_reason():
    """A command is run by test_the_readme_block_runs unless NOT_RUN gives its reason; a reason
    for a command the README no longer shows is an error (it would excuse nothing)."""
    shown = [c for _, c, _ in commands()]
    assert len(shown) >= 30 and any(c.startswith("duckdb") for c in shown)
    assert not set(NOT_RUN) - set(shown), set(NOT_RUN) - set(shown)
    assert sum(len(x) for x in runnable_blocks().values()) == len(shown) - len(NOT_RUN)


def runnable_blocks() -> dict[int, list[str]]:
    """{block: the commands of it that run here, whole, as the README has them}."""
    blocks: dict[int, list[str]] = {}
    for k, first, whole in commands():
        if first not in NOT_RUN:
            blocks.setdefault(k, []).append(whole)
    return blocks


def _script(cmds: list[str], work: Path) -> str:
    text = "\n".join(c.removeprefix("sudo ") for c in cmds)
    text = text.replace("/tmp/r/", f"{work}/r/").replace("results/trace-taskset-...", "results/trace-taskset-*")
    # what a command left running in the background (the redis server) ends with the block
    stop = "status=$?; for j in $(jobs -p); do kill $j; done; wait; exit $status"
    return f"set -e\nmkdir -p r\ntrap '{stop}' EXIT\n{text}\n"


def test_the_substitutions_are_the_readmes():
    """Each substituted text is in a command that runs, so none outlives the README's."""
    ran = "\n".join(c for cmds in runnable_blocks().values() for c in cmds)
    for text in SUBSTITUTED:
        assert text in ran, text


@needs_tracing
@pytest.mark.parametrize("block", sorted(runnable_blocks()))
def test_the_readme_block_runs(tmp_path, block):
    cmds = runnable_blocks()[block]
    work = tmp_path / "work"
    (work / "bin").mkdir(parents=True)
    os.symlink(HOME / "ipctrace", work / "ipctrace")
    os.symlink(HOME / "ipctrace", work / "bin" / "ipctrace")
    os.symlink(HOME / ".output", work / ".output")
    env = dict(cli_env(), PATH=f"{work / 'bin'}:{os.environ['PATH']}")
    p = subprocess.run(
        ["bash", "-c", _script(cmds, work)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 0, f"{cmds}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr, p.stderr
