"""Flame graphs to SVG files: the bundled d3-flame-graph (analysis/render/vendor) read here, run in
a headless Chromium on the page render/flame.py makes, and each graph written as
flamegraph-KEY.svg (zooming on a click)."""

import contextlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.errors import UsageError
from analysis.render import flame
from analysis.store import safeio

if TYPE_CHECKING:
    import pandas as pd

# a flame graph: (folded stacks: count by stack, title, unit)
Graph = tuple["pd.Series", str, str]

VENDOR = Path(flame.__file__).resolve().parent / "vendor"
D3_JS = VENDOR / "d3.v7.9.0.min.js"
FLAME_JS = VENDOR / "d3-flamegraph.v5.0.0.umd.min.js"
FLAME_CSS = VENDOR / "d3-flamegraph.v5.0.0.css"


def vendor_assets() -> flame.Assets:
    """The bundled renderer: (css, d3 js, d3-flame-graph js) as text."""
    try:
        return flame.Assets(FLAME_CSS.read_text(), D3_JS.read_text(), FLAME_JS.read_text())
    except OSError as e:
        raise UsageError(f"the bundled flame graph renderer is missing ({e.filename}); reinstall ipctrace") from None


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render_svgs(graphs: dict[str, Graph], width: int = 1200, timeout: float = 60) -> dict[str, str]:
    """graphs: {key: (folded Series, title, unit)} -> {key: SVG text}, one headless Chromium run.

    Raises UsageError when Chromium is missing (it is what runs the bundled renderer).
    """
    browser = chromium()
    if browser is None:
        raise UsageError("flame graph SVGs need chromium (apt-get install chromium, or tools/bootstrap --test)")
    page = flame.svg_page(graphs, width, vendor_assets())
    with _temporary_directory("ipctrace-flame-") as tmp:
        src = Path(tmp) / "render.html"
        src.write_text(page)
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp}/profile",
            "--virtual-time-budget=5000",
            "--dump-dom",
            src.as_uri(),
        ]
        stdout, returncode = _browse(cmd, tmp, timeout)
    m = re.search(r"<pre id=\"out\">(.*?)</pre>", stdout, re.S)
    if returncode != 0 or not m or not m.group(1):
        raise UsageError(f"chromium could not render the flame graphs (exit {returncode})")
    return json.loads(html.unescape(m.group(1)))


@contextlib.contextmanager
def _temporary_directory(prefix: str) -> Iterator[str]:
    """A temporary directory removed whatever ends the block, also where Ctrl-C lands while it
    is being removed (Chromium's profile is many files: a CI run's SIGINT left one half gone)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        yield tmp
    finally:
        try:
            shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _browse(cmd: list[str], tmp: str, timeout: float) -> tuple[str, int]:
    """(stdout, exit status) of a headless Chromium run. It runs in a process group of its
    own, with its temporary files in tmp, and whatever ends the wait (a timeout, Ctrl-C) the
    whole group is killed before tmp goes: no browser process or file outlives us."""
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        process_group=0,
        env={**os.environ, "TMPDIR": tmp, "HOME": tmp},
    )
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UsageError(f"chromium did not render the flame graphs within {timeout} s") from None
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return stdout, proc.returncode


def write_svgs(resdir: Path | str, graphs: dict[str, Graph]) -> list[Path]:
    """Render and write flamegraph-KEY.svg for each graph (they zoom on a click); returns the paths."""
    graphs = {k: v for k, v in graphs.items() if len(v[0]) and int(v[0].sum()) > 0}
    if not graphs:
        return []
    paths = []
    for key, svg in render_svgs(graphs).items():
        path = Path(resdir) / f"flamegraph-{key}.svg"
        safeio.write_text(path, '<?xml version="1.0" encoding="UTF-8"?>\n' + flame.with_zoom(svg) + "\n")
        paths.append(path)
    return paths
