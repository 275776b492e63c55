"""Flame graphs: folded stacks in, SVG and interactive view out.

Folded stacks are the common `frame;frame;frame weight` lines (root first).
Three come from a run:
- oncpu.folded: perf_event samples of the workload's threads (weight: samples);
- offcpu.folded: stacks at sched_switch (weight: ns blocked);
- breakdown.folded: metric -> side -> component -> kernel function where stacks
  were sampled (weight: ns).
They are rendered by d3-flame-graph (analysis/render/vendor, bundled for offline use):
inline in report.html, and to SVG files by the same code in headless Chromium.
"""

import bisect
import contextlib
import html
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.errors import UsageError
from analysis.model import stats
from analysis.model.crosshost import PART_PLACES
from analysis.store import safeio
from analysis.store.jsonfiles import Mapped, SampledStack, Samples

VENDOR = Path(__file__).resolve().parent / "vendor"
D3_JS = VENDOR / "d3.v7.9.0.min.js"
FLAME_JS = VENDOR / "d3-flamegraph.v5.0.0.umd.min.js"
FLAME_CSS = VENDOR / "d3-flamegraph.v5.0.0.css"

LOST_FRAME = "[stack lost]"
UNKNOWN_FRAME = "[unknown]"
IN_PROBE_FRAME = "[bpf probe]"
PROBE_FRAMES = ("bpf_trace_run", "__bpf_trace_", "__traceiter_", "bpf_prog_")


# --- folded stacks ---------------------------------------------------------


def read_folded(path):
    """A folded-stack file -> Series (index: stack, value: int weight), equal stacks summed."""
    stacks, weights = [], []
    try:
        text = safeio.read_bytes(path).decode()
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not text: not a folded stack file") from None
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, sep, weight = line.rpartition(" ")
        if not sep or not stack or not weight.isdigit():
            raise UsageError(f"{path}:{lineno}: not a folded stack line (`a;b;c count`)")
        stacks.append(stack)
        weights.append(int(weight))
    s = pd.Series(weights, index=stacks, dtype=np.int64)
    return s.groupby(level=0, sort=False).sum()


def clean_frame(name):
    """A frame name safe inside a folded line: no ';', no newline, no trailing space-count ambiguity."""
    return re.sub(r"[;\n\r]", "_", str(name)).replace(" ", "_") or UNKNOWN_FRAME


def write_folded(path, folded):
    """Series stack -> weight, written heaviest first; zero weights are left out."""
    folded = folded[folded > 0].sort_values(ascending=False, kind="stable")
    safeio.write_text(path, "".join(f"{stack} {int(weight)}\n" for stack, weight in folded.items()))
    return path


def to_tree(folded, root="all"):
    """Folded stacks -> nested {name, value, children} with inclusive values, as d3-flame-graph reads."""
    tree = {"name": root, "value": 0, "children": {}}
    for stack, weight in folded.items():
        weight = int(weight)
        tree["value"] += weight
        node = tree
        for frame in stack.split(";"):
            node = node["children"].setdefault(frame, {"name": frame, "value": 0, "children": {}})
            node["value"] += weight

    def listify(node):
        node["children"] = [listify(c) for c in node["children"].values()]
        return node

    return listify(tree)


# --- breakdown flame graph -------------------------------------------------


class MetricSums:
    """Per metric, the sums of columns over its iterations, NaN skipped (pandas' sum of the
    metric's values, NaN as 0, without its copies), a column at a time: totals {metric:
    {column: sum}}, metrics in groupby's order (a category's order, else sorted), those
    without iterations left out."""

    def __init__(self, metric):
        self.codes, self.cats = (
            (metric.cat.codes.to_numpy(), list(metric.cat.categories))
            if isinstance(metric.dtype, pd.CategoricalDtype)
            else pd.factorize(metric, sort=True)
        )
        self.present = [k for k in range(len(self.cats)) if (self.codes == k).any()]
        self.totals = {str(self.cats[k]): {} for k in self.present}
        self.done = set()

    def add(self, name, x=None):
        """The sums of column `name`'s values x (None: a column of 0 and NaN alone, sums 0)."""
        for k in self.present:
            self.totals[str(self.cats[k])][name] = 0.0 if x is None else stats.group_sum(x, self.codes, k)
        self.done.add(name)


def totals_by_metric(metric, column, names, zero=lambda name: False, sums=None):
    """{metric: {column: its sum over the metric's iterations, NaN skipped}} for the given
    column names (MetricSums); column(name) gives one column of breakdown.parquet (a frame's,
    or read from the file one at a time: a long run's whole breakdown is never in memory);
    zero(name): the column is known to hold nothing but 0 and NaN (its sums are 0, it is not
    read); sums: a MetricSums of the metric with some of the columns already summed."""
    sums = sums or MetricSums(metric)
    for name in names:
        if name in sums.done:
            continue
        if zero(name):
            sums.add(name)
            continue
        x = column(name)
        sums.add(name, x)
        del x  # not beside the next column while it is read
    return sums.totals


def folded_from_totals(totals, components, kernel=None):
    """Per metric, the breakdown's column sums (totals_by_metric) -> folded stacks
    `metric;side;component` in ns.

    The weights are the critical-path components, so per metric they add up to
    the measured latency less the closure residual. A component the sides work
    on (user, entry, syscall, copy, irq, wakeup, runqueue, preempted) is split between the
    sides in proportion to each side's own time in it (the `ROLE.component`
    columns); `blocked` (nobody works on the message) and `residual` (no known
    state) belong to no side and hang under `-`. kernel: {side: Series kernel
    function -> share} (kernel_shares) splits each side's syscall time by where its
    sampled in-kernel stacks were, one level deeper.
    """
    columns = {c for t in totals.values() for c in t}
    roles = sorted({c.split(".", 1)[0] for c in columns if "." in c}, key=lambda r: (r != "measuring", r))
    shared = ("blocked", "residual")
    rows = []
    for metric, t in totals.items():
        for comp in components:
            total = t[comp]
            own = {r: t[f"{r}.{comp}"] for r in roles if f"{r}.{comp}" in t}
            own = {r: v for r, v in own.items() if v > 0}
            if not own and comp in PART_PLACES:
                # a part of a merged round trip across two hosts: it happened on the client, the
                # server or the network between them
                rows.append((f"{clean_frame(metric)};{PART_PLACES[comp][0]};{comp}", total))
                continue
            if comp in shared or not own:
                rows.append((f"{clean_frame(metric)};-;{comp}", total))
                continue
            whole = sum(own.values())
            for r, v in own.items():
                stack, weight = f"{clean_frame(metric)};{clean_frame(r)};{comp}", total * v / whole
                shares = (kernel or {}).get(r) if comp == "syscall" else None
                if shares is None or not len(shares):
                    rows.append((stack, weight))
                    continue
                rows += [(f"{stack};{clean_frame(fn)}_[k]", weight * share) for fn, share in shares.items()]
    folded = pd.Series([w for _, w in rows], index=[s for s, _ in rows], dtype=np.float64)
    folded = folded.round().astype(np.int64)
    return folded[folded > 0]


# --- sampled stacks (loaders/sample.c writes samples.json) -----------------


class KernelSymbols:
    """/proc/kallsyms as sorted arrays; text symbols only."""

    def __init__(self, path="/proc/kallsyms"):
        addrs, names = [], []
        try:
            with open(path) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 3 and parts[1] in "tTwW":
                        addrs.append(int(parts[0], 16))
                        names.append(parts[2])
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror}") from None
        order = np.argsort(np.array(addrs, dtype=np.uint64), kind="stable")
        self.addrs = np.array(addrs, dtype=np.uint64)[order]
        self.names = [names[i] for i in order]
        if len(self.addrs) and not self.addrs.any():
            raise UsageError(f"{path} shows only zero addresses (kptr_restrict); run as root")

    def name(self, addr):
        i = int(np.searchsorted(self.addrs, np.uint64(addr), side="right")) - 1
        return self.names[i] if i >= 0 else UNKNOWN_FRAME


class ElfSymbols:
    """Function symbols of one ELF file (.symtab, else .dynsym), found by file offset."""

    def __init__(self, path):
        self.loads, self.starts, self.names = [], np.zeros(0, np.uint64), []
        data = safeio.read_named_file(path)
        if not data or data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2:  # 64-bit only, as the kernel
            return
        try:
            self._read(data)
        except (struct.error, IndexError, ValueError, UnicodeDecodeError):
            # not an ELF file we understand (cut short, damaged): its frames stay unnamed
            self.loads, self.starts, self.names = [], np.zeros(0, np.uint64), []

    def _read(self, data):
        starts, names = [], []
        (phoff, shoff) = struct.unpack_from("<QQ", data, 0x20)
        (phentsize, phnum, shentsize, shnum) = struct.unpack_from("<HHHH", data, 0x36)
        for i in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
            if p_type == 1:  # PT_LOAD
                self.loads.append((p_offset, p_vaddr, p_filesz))
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        for wanted in (2, 11):  # SHT_SYMTAB, then SHT_DYNSYM
            for sh in sections:
                if sh[1] != wanted:
                    continue
                strtab = sections[sh[6]]
                for off in range(sh[4], sh[4] + sh[5], 24):
                    st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, off)
                    if st_info & 0xF == 2 and st_shndx != 0 and st_value:  # STT_FUNC, defined
                        end = data.index(b"\0", strtab[4] + st_name)
                        starts.append(st_value)
                        names.append(data[strtab[4] + st_name : end].decode(errors="replace"))
            if starts:
                break
        order = np.argsort(np.array(starts, dtype=np.uint64), kind="stable")
        self.starts = np.array(starts, dtype=np.uint64)[order]
        self.names = [names[i] for i in order]

    def name(self, file_offset):
        for p_offset, p_vaddr, p_filesz in self.loads:
            if p_offset <= file_offset < p_offset + p_filesz:
                vaddr = file_offset - p_offset + p_vaddr
                i = int(np.searchsorted(self.starts, np.uint64(vaddr), side="right")) - 1
                return self.names[i] if i >= 0 else None
        return None


class UserSymbols:
    """Resolves (pid, address) with the /proc/PID/maps snapshot the sampler took."""

    def __init__(self, maps: dict[int, list[Mapped]]):
        self.maps = {pid: sorted((m.start, m.end, m.offset, m.path) for m in entries) for pid, entries in maps.items()}
        self.elves: dict[str, ElfSymbols] = {}

    def name(self, pid, addr):
        entries = self.maps.get(int(pid))
        if not entries:
            return UNKNOWN_FRAME
        i = bisect.bisect_right(entries, (addr, float("inf"))) - 1
        if i < 0 or not entries[i][0] <= addr < entries[i][1]:
            return UNKNOWN_FRAME
        start, _, offset, path = entries[i]
        if not path.startswith("/"):
            return f"[{path.strip('[]') or 'anon'}]"
        if path not in self.elves:
            self.elves[path] = ElfSymbols(path)
        sym = self.elves[path].name(addr - start + offset)
        return sym or f"[{os.path.basename(path)}]"


def kernel_frames(kstack, ksyms):
    """Names of a kernel stack, innermost first, without the probes' own frames
    (the innermost ones up to the tracepoint's dispatcher).

    A sample can interrupt a BPF program where the unwinder gets no further (e.g.
    its JIT code before the frame is set up): such a stack is probe frames only,
    and its time is the probe's, so it is [IN_PROBE_FRAME], never empty."""
    names = [ksyms.name(a) for a in kstack]
    probe = [i for i, n in enumerate(names[:8]) if n.startswith(PROBE_FRAMES)]
    if not probe:
        return names
    return names[probe[-1] + 1 :] or [IN_PROBE_FRAME]


def kernel_shares(samples: Samples, roles, ksyms=None):
    """{role: Series(kernel function -> share)}: where each side's in-kernel on-CPU samples
    were, by innermost function (self time). roles: {tid: role}."""
    ksyms = ksyms or KernelSymbols()
    rows = [
        (roles[e.tid], kernel_frames(e.kstack, ksyms)[0], e.count) for e in samples.oncpu if e.tid in roles and e.kstack
    ]
    if not rows:
        return {}
    df = pd.DataFrame(rows, columns=["role", "fn", "n"])
    counts = df.groupby(["role", "fn"])["n"].sum()
    shares = counts / counts.groupby(level="role").transform("sum")
    return {role: shares.xs(role).sort_values(ascending=False) for role in shares.index.unique(level="role")}


def fold_samples(samples: Samples, ksyms=None):
    """samples.json -> (oncpu, offcpu) folded Series.

    Frames: comm; user frames root first; kernel frames suffixed `_[k]`. A sample
    whose stack the kernel could not take keeps its weight under `[stack lost]`,
    so the folded total always equals the samples (or ns) taken.
    """
    users = UserSymbols(samples.maps)
    ksyms = ksyms or KernelSymbols()
    cache = {}

    def fold(entry: SampledStack):
        key = (entry.pid, entry.comm, entry.ustack, entry.kstack, entry.lost)
        if key not in cache:
            frames = [clean_frame(entry.comm or f"pid {entry.pid}")]
            if entry.lost:
                frames.append(LOST_FRAME)
            frames += [clean_frame(users.name(entry.pid, a)) for a in reversed(entry.ustack)]
            frames += [clean_frame(n) + "_[k]" for n in reversed(kernel_frames(entry.kstack, ksyms))]
            cache[key] = ";".join(frames)
        return cache[key]

    def series(entries: list[SampledStack], weights: list[int]):
        if not entries:
            return pd.Series(dtype=np.int64)
        s = pd.Series(weights, index=[fold(e) for e in entries], dtype=np.int64)
        return s.groupby(level=0, sort=False).sum()

    # the schema's OFFCPU_STACK: every off-CPU entry has its ns
    return (
        series(samples.oncpu, [e.count for e in samples.oncpu]),
        series(samples.offcpu, [int(e.ns or 0) for e in samples.offcpu]),
    )


# --- rendering --------------------------------------------------------------


def vendor_assets():
    """The bundled renderer: (css, d3 js, d3-flame-graph js) as text."""
    try:
        return FLAME_CSS.read_text(), D3_JS.read_text(), FLAME_JS.read_text()
    except OSError as e:
        raise UsageError(f"the bundled flame graph renderer is missing ({e.filename}); reinstall ipctrace") from None


def script_json(obj):
    """JSON safe inside a <script> element."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


# d3-flame-graph animates widths and labels with d3 transitions, which a headless
# browser (screenshot, virtual time) does not advance; the final width of each frame
# is already on its <g>, so settle() applies it at once. Zooming still animates.
SETTLE_JS = """
function settle(svg) {
  d3.select(svg).selectAll("*").interrupt();
  svg.querySelectorAll("g.frame").forEach(f => {
    f.querySelector("rect").setAttribute("width", f.getAttribute("width"));
    const label = f.querySelector("div");
    if (label) label.textContent = f.getAttribute("name");
  });
}
function drawFlame(el, g, width) {
  const chart = flamegraph.default().width(width).cellHeight(18).minFrameSize(1).sort(true).title(g.title || "")
    .label(d => d.data.name + " (" + d.data.value.toLocaleString("en") + " " + g.unit + ", "
                + (100 * d.data.value / g.tree.value).toFixed(2) + " %)");
  d3.select(el).datum(g.tree).call(chart);
  const svg = el.querySelector("svg");
  settle(svg);
  return svg;
}
"""

# One page renders every graph, then serialises each SVG with the stylesheet inside it.
_RENDER_JS = (
    SETTLE_JS
    + """
const out = {};
for (const [key, g] of Object.entries(GRAPHS)) {
  const div = document.createElement("div");
  document.body.appendChild(div);
  const svg = drawFlame(div, g, WIDTH);
  svg.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  const style = document.createElementNS("http://www.w3.org/2000/svg", "style");
  style.textContent = CSS + " svg{background:#fff} text,div{font-family:Verdana,sans-serif}";
  svg.insertBefore(style, svg.firstChild);
  out[key] = new XMLSerializer().serializeToString(svg);
}
document.getElementById("out").textContent = JSON.stringify(out);
"""
)


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def render_svgs(graphs, width=1200, timeout=60):
    """graphs: {key: (folded Series, title, unit)} -> {key: SVG text}, one headless Chromium run.

    Raises UsageError when Chromium is missing (it is what runs the bundled renderer).
    """
    browser = chromium()
    if browser is None:
        raise UsageError("flame graph SVGs need chromium (apt-get install chromium, or tools/bootstrap --test)")
    css, d3js, flamejs = vendor_assets()
    payload = {
        k: {"tree": to_tree(f, root=title.split(":")[0]), "title": title, "unit": unit}
        for k, (f, title, unit) in graphs.items()
    }
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<style>{css}</style><script>{d3js}</script><script>{flamejs}</script></head>"
        "<body><pre id='out'></pre><script>"
        f"const GRAPHS={script_json(payload)};const WIDTH={int(width)};const CSS={script_json(css)};"
        f"{_RENDER_JS}</script></body></html>"
    )
    with tempfile.TemporaryDirectory(prefix="ipctrace-flame-", ignore_cleanup_errors=True) as tmp:
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


def _browse(cmd, tmp, timeout):
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


# The standalone SVG's own zoom (the serialised graph has no d3 behind it): a click on a frame
# widens it and what stands on it to the full width, keeps the frames below it (its callers)
# at full width and hides the rest; a click on the bottom frame shows everything again.
SVG_ZOOM_JS = """
(function () {
  const svg = (document.currentScript && document.currentScript.ownerSVGElement) || document.documentElement;
  const W = +svg.getAttribute("width") || 1200;
  const frames = Array.from(svg.querySelectorAll("g.frame")).map(function (g) {
    const m = /translate\\(([-\\d.e]+),\\s*([-\\d.e]+)\\)/.exec(g.getAttribute("transform"));
    return { g: g, x: +m[1], y: +m[2], w: +g.getAttribute("width") };
  });
  const eps = 1e-6;
  function place(f, x, w, shown) {
    f.g.style.display = shown ? "" : "none";
    if (!shown) return;
    f.g.setAttribute("transform", "translate(" + x + "," + f.y + ")");
    f.g.querySelector("rect").setAttribute("width", w);
    const fo = f.g.querySelector("foreignObject");
    if (fo) fo.setAttribute("width", w);
    const label = f.g.querySelector("div");
    if (label) label.style.display = w > 35 ? "block" : "none";
  }
  function zoom(z) {
    frames.forEach(function (f) {
      if (f.y >= z.y) {
        place(f, 0, W, f.x <= z.x + eps && f.x + f.w >= z.x + z.w - eps);
      } else {
        place(f, (f.x - z.x) / z.w * W, f.w / z.w * W, f.x >= z.x - eps && f.x + f.w <= z.x + z.w + eps);
      }
    });
  }
  frames.forEach(function (f) { f.g.addEventListener("click", function () { zoom(f); }); });
})();
"""


def with_zoom(svg):
    """The serialised SVG with SVG_ZOOM_JS inside it, so that the file zooms on its own."""
    return svg.replace("</svg>", f"<script><![CDATA[{SVG_ZOOM_JS}]]></script></svg>", 1)


def write_svgs(resdir, graphs):
    """Render and write flamegraph-KEY.svg for each graph (they zoom on a click); returns the paths."""
    graphs = {k: v for k, v in graphs.items() if len(v[0]) and int(v[0].sum()) > 0}
    if not graphs:
        return []
    paths = []
    for key, svg in render_svgs(graphs).items():
        path = Path(resdir) / f"flamegraph-{key}.svg"
        safeio.write_text(path, '<?xml version="1.0" encoding="UTF-8"?>\n' + with_zoom(svg) + "\n")
        paths.append(path)
    return paths
