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

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from analysis.model import stats
from analysis.model.crosshost import PART_PLACES
from analysis.store.jsonfiles import SampledStack, Samples
from analysis.store.symbols import UNKNOWN_FRAME, KernelSymbols, UserSymbols

LOST_FRAME = "[stack lost]"
IN_PROBE_FRAME = "[bpf probe]"
PROBE_FRAMES = ("bpf_trace_run", "__bpf_trace_", "__traceiter_", "bpf_prog_")


# --- folded stacks ---------------------------------------------------------


def clean_frame(name: object) -> str:
    """A frame name safe inside a folded line: no ';', no newline, no trailing space-count ambiguity."""
    return re.sub(r"[;\n\r]", "_", str(name)).replace(" ", "_") or UNKNOWN_FRAME


def to_tree(folded: pd.Series | Mapping[str, float], root: str = "all") -> dict[str, Any]:
    """Folded stacks -> nested {name, value, children} with inclusive values, as d3-flame-graph reads."""
    tree: dict[str, Any] = {"name": root, "value": 0, "children": {}}
    for stack, weight in folded.items():
        weight = int(weight)
        tree["value"] += weight
        node = tree
        for frame in stack.split(";"):
            node = node["children"].setdefault(frame, {"name": frame, "value": 0, "children": {}})
            node["value"] += weight

    def listify(node: dict[str, Any]) -> dict[str, Any]:
        node["children"] = [listify(c) for c in node["children"].values()]
        return node

    return listify(tree)


# --- breakdown flame graph -------------------------------------------------


class MetricSums:
    """Per metric, the sums of columns over its iterations, NaN skipped (pandas' sum of the
    metric's values, NaN as 0, without its copies), a column at a time: totals {metric:
    {column: sum}}, metrics in groupby's order (a category's order, else sorted), those
    without iterations left out."""

    def __init__(self, metric: pd.Series) -> None:
        self.cats: Any
        self.codes, self.cats = (
            (metric.cat.codes.to_numpy(), list(metric.cat.categories))
            if isinstance(metric.dtype, pd.CategoricalDtype)
            else pd.factorize(metric, sort=True)
        )
        self.present = [k for k in range(len(self.cats)) if (self.codes == k).any()]
        self.totals: dict[str, dict[str, float]] = {str(self.cats[k]): {} for k in self.present}
        self.done: set[str] = set()

    def add(self, name: str, x: np.ndarray | None = None) -> None:
        """The sums of column `name`'s values x (None: a column of 0 and NaN alone, sums 0)."""
        for k in self.present:
            self.totals[str(self.cats[k])][name] = 0.0 if x is None else stats.group_sum(x, self.codes, k)
        self.done.add(name)


def totals_by_metric(
    metric: pd.Series,
    column: Callable[[str], np.ndarray],
    names: Iterable[str],
    zero: Callable[[str], bool] = lambda name: False,
    sums: MetricSums | None = None,
) -> dict[str, dict[str, float]]:
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


def folded_from_totals(
    totals: Mapping[str, Mapping[str, float]],
    components: Iterable[str],
    kernel: Mapping[str, pd.Series] | None = None,
) -> pd.Series:
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


def kernel_frames(kstack: Iterable[int], ksyms: KernelSymbols) -> list[str]:
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


def kernel_shares(samples: Samples, roles: Mapping[int, str], ksyms: KernelSymbols) -> dict[str, pd.Series]:
    """{role: Series(kernel function -> share)}: where each side's in-kernel on-CPU samples
    were, by innermost function (self time). roles: {tid: role}; ksyms: the kernel's symbols
    (store.symbols.KernelSymbols)."""
    rows = [
        (roles[e.tid], kernel_frames(e.kstack, ksyms)[0], e.count) for e in samples.oncpu if e.tid in roles and e.kstack
    ]
    if not rows:
        return {}
    df = pd.DataFrame(rows, columns=["role", "fn", "n"])
    counts = df.groupby(["role", "fn"])["n"].sum()
    shares = counts / counts.groupby(level="role").transform("sum")
    return {role: shares.xs(role).sort_values(ascending=False) for role in shares.index.unique(level="role")}


def fold_samples(samples: Samples, ksyms: KernelSymbols, users: UserSymbols) -> tuple[pd.Series, pd.Series]:
    """samples.json -> (oncpu, offcpu) folded Series.

    Frames: comm; user frames root first; kernel frames suffixed `_[k]`. A sample
    whose stack the kernel could not take keeps its weight under `[stack lost]`,
    so the folded total always equals the samples (or ns) taken. ksyms, users: the kernel's
    and the sampled processes' symbols (store.symbols KernelSymbols, UserSymbols).
    """
    cache: dict[tuple[object, ...], str] = {}

    def fold(entry: SampledStack) -> str:
        key = (entry.pid, entry.comm, entry.ustack, entry.kstack, entry.lost)
        if key not in cache:
            frames = [clean_frame(entry.comm or f"pid {entry.pid}")]
            if entry.lost:
                frames.append(LOST_FRAME)
            frames += [clean_frame(users.name(entry.pid, a)) for a in reversed(entry.ustack)]
            frames += [clean_frame(n) + "_[k]" for n in reversed(kernel_frames(entry.kstack, ksyms))]
            cache[key] = ";".join(frames)
        return cache[key]

    def series(entries: list[SampledStack], weights: list[int]) -> pd.Series:
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


class Assets(NamedTuple):
    """The bundled renderer as text (run/flamegraphs.py vendor_assets reads it)."""

    css: str
    d3js: str
    flamejs: str


def script_json(obj: object) -> str:
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


def svg_page(graphs: Mapping[str, tuple[pd.Series, str, str]], width: float, assets: Assets) -> str:
    """The page headless Chromium runs to draw graphs ({key: (folded Series, title, unit)}) as
    SVG: it prints them as JSON in its <pre id=out>."""
    css, d3js, flamejs = assets
    payload = {
        k: {"tree": to_tree(f, root=title.split(":")[0]), "title": title, "unit": unit}
        for k, (f, title, unit) in graphs.items()
    }
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<style>{css}</style><script>{d3js}</script><script>{flamejs}</script></head>"
        "<body><pre id='out'></pre><script>"
        f"const GRAPHS={script_json(payload)};const WIDTH={int(width)};const CSS={script_json(css)};"
        f"{_RENDER_JS}</script></body></html>"
    )


def with_zoom(svg: str) -> str:
    """The serialised SVG with SVG_ZOOM_JS inside it, so that the file zooms on its own."""
    return svg.replace("</svg>", f"<script><![CDATA[{SVG_ZOOM_JS}]]></script></svg>", 1)
