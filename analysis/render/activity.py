"""The whole-trace view (summary.json "activity", model/activity.py) for a person: the terminal
tables (threads x states, the wake-up graph's busiest edges, the system calls that took the most
time) and the report's section, whose wake-up graph is drawn as an inline SVG (a circular
layout computed here: no dependency).

They read nothing but the summary's "activity" data, as the other tables read the summary."""

from __future__ import annotations

import html
import math

from analysis.render.htmlparts import esc, html_table
from analysis.render.text import fmt, render
from analysis.store.summaryfile import STATES, Activity

US = 1e3  # the tables' unit: µs
TOP_EDGES = 10
TOP_THREADS = 20  # the busiest threads the terminal's table shows; the rest are counted
TOP_SYSCALLS = 15
GRAPH_EDGES = 24  # the busiest edges drawn, and the nodes they join


def _name(comm: str | None, tid: int) -> str:
    if tid == 0 and not comm:
        return "idle/0"
    return f"{comm or '?'}/{tid}"


def _pct(part: float, whole: float) -> str:
    return "-" if not whole else f"{100 * part / whole:.1f}%"


def _shown_states(act: Activity) -> list[str]:
    """The states any thread spent time in (copy and entry are never carved here: left out)."""
    return [s for s in STATES if any(t.states_ns[s] for t in act.threads)]


def thread_lines(act: Activity, top: int = TOP_THREADS) -> list[str]:
    """Threads x states: us and the share of the thread's span; the top busiest (most time on a
    CPU) first, the rest counted with their time on a CPU in one line."""
    if not act.threads:
        return ["no followed thread has events"]
    shown = _shown_states(act)
    busiest = sorted(act.threads, key=lambda t: (-t.on_cpu_ns, t.tid))
    kept, rest = busiest[:top], busiest[top:]
    rows = []
    for t in kept:
        span = t.span_ns
        rows.append(
            [_name(t.comm, t.tid), fmt(span, US)]
            + [f"{fmt(t.states_ns[s], US)} {_pct(t.states_ns[s], span)}" for s in shown]
            + [_pct(t.off_cpu_ns, span)]
        )
    head = "threads: time in each state over the thread's span (us, share of the span)"
    if rest:
        head += f"; the {len(kept)} busiest (most time on a CPU) of {len(busiest)}"
    lines = [head]
    lines += render(rows, ["thread", "span"] + shown + ["off CPU"])
    if rest:
        lines.append(
            f"  ... and {len(rest)} more threads, {fmt(sum(t.on_cpu_ns for t in rest), US)} us on a CPU in all "
            "(summary.json's activity has every thread)"
        )
    for t in kept:
        if t.preempted_by:
            lines.append(
                f"  {_name(t.comm, t.tid)} preempted by: "
                + ", ".join(f"{_name(p.comm, p.tid)} {fmt(p.ns, US)} us ({p.count}x)" for p in t.preempted_by)
            )
    return lines


def edge_lines(act: Activity, top: int = TOP_EDGES) -> list[str]:
    """The busiest edges of the wake-up graph, with the delay from the wake-up to the switch in."""
    if not act.wake_edges:
        return ["wake-ups: none recorded"]
    rows = [
        [
            f"{_name(e.waker_comm, e.waker)} -> {_name(e.wakee_comm, e.wakee)}",
            f"{e.count:,}",
            f"{e.hardirq:,}",
            fmt(e.delay_p50_ns, US),
            fmt(e.delay_p90_ns, US),
            fmt(e.delay_p99_ns, US),
            fmt(e.delay_max_ns, US),
        ]
        for e in act.wake_edges[:top]
    ]
    more = len(act.wake_edges) - top
    lines = ["wake-ups: waker -> wakee, delay from the wake-up to the wakee running (us)"]
    lines += render(rows, ["waker -> wakee", "count", "in hard irq", "p50", "p90", "p99", "max"])
    if more > 0:
        lines.append(f"  ... and {more} more edges")
    return lines


def syscall_lines(act: Activity, top: int = TOP_SYSCALLS) -> list[str]:
    """The system calls that took the most time: latency percentiles and where the time went."""
    if not act.syscalls:
        return ["system calls: none completed"]
    rows = []
    for s in act.syscalls[:top]:
        tot = s.total_ns
        rows.append(
            [
                s.name,
                f"{s.count:,}",
                fmt(tot, US),
                fmt(s.p50_ns, US),
                fmt(s.p90_ns, US),
                fmt(s.p99_ns, US),
                fmt(s.max_ns, US),
                _pct(s.on_cpu_ns, tot),
                _pct(s.states_ns["blocked"], tot),
                _pct(s.states_ns["wakeup"] + s.states_ns["runqueue"], tot),
                _pct(s.states_ns["preempted"], tot),
            ]
        )
    lines = [f"system calls: the {min(top, len(act.syscalls))} with the most time (us; shares of their time)"]
    lines += render(
        rows, ["syscall", "count", "total", "p50", "p90", "p99", "max", "on CPU", "blocked", "waking", "preempted"]
    )
    if act.unpaired_syscalls:
        n = act.unpaired_syscalls
        lines.append(f"  {n:,} system call record{'s' if n > 1 else ''} of no complete call (at the trace's ends)")
    return lines


def activity_lines(act: Activity) -> list[str]:
    """The three terminal tables of summary.json "activity"."""
    head = []
    if act.start_ns is not None and act.end_ns is not None:
        head = [f"whole trace: {fmt(act.end_ns - act.start_ns, US)} us, {len(act.threads)} threads"]
    return head + thread_lines(act) + [""] + edge_lines(act) + [""] + syscall_lines(act)


# --- the wake-up graph as SVG ---------------------------------------------------------------

NODE_R = 26
CHORD = 150.0
FOLLOWED_FILL, OTHER_FILL = "#cfe3f7", "#eeeeee"
# A text's box at font-size 11 (system-ui): as wide as its digits, wider than most letters, and a
# glyph's overhang each side (checked in Chromium, tests/unit/render/test_activity_render.py), so
# that boxes that do not meet leave the texts apart.
CHAR_W, ASCENT, DESCENT, OVERHANG = 7.0, 10.5, 4.0, 1.5
PAD = 6.0  # around the picture


def _x(v: float) -> str:
    return f"{v:.1f}"


def _text_box(x: float, y: float, text: str, anchor: str) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) of text drawn at (x, y) (its baseline) with that anchor."""
    w = CHAR_W * len(text)
    left = x - {"start": 0.0, "middle": w / 2, "end": w}[anchor]
    return left - OVERHANG, y - ASCENT, left + w + OVERHANG, y + DESCENT


def _meet(a: tuple[float, ...], b: tuple[float, ...], gap: float = 1.0) -> bool:
    return a[0] < b[2] + gap and b[0] < a[2] + gap and a[1] < b[3] + gap and b[1] < a[3] + gap


class _Taken:
    """The boxes of what is drawn so far (nodes, their labels, edge labels): where a label may
    go without covering another."""

    def __init__(self) -> None:
        self.boxes: list[tuple[float, float, float, float]] = []

    def free(self, box: tuple[float, float, float, float]) -> bool:
        return not any(_meet(box, b) for b in self.boxes)

    def take(self, box: tuple[float, float, float, float]) -> None:
        self.boxes.append(box)


def _on_curve(
    t: float, p0: tuple[float, float], p1: tuple[float, float], p2: tuple[float, float]
) -> tuple[float, float]:
    """The point at t of the quadratic Bézier curve p0, p1 (control), p2."""
    a, b, c = (1 - t) ** 2, 2 * (1 - t) * t, t * t
    return a * p0[0] + b * p1[0] + c * p2[0], a * p0[1] + b * p1[1] + c * p2[1]


# where along its edge a label is tried, the middle first
LABEL_AT = (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78)


def wake_graph_svg(act: Activity, max_edges: int = GRAPH_EDGES) -> str:
    """The wake-up graph: a node per thread (comm/tid; the followed threads blue, other
    wakers grey) on a circle, an arrow per edge waker -> wakee labelled with its count and
    median delay; the busiest max_edges edges. Both directions between two nodes bend apart.
    Node labels go outside the circle; each edge's label where along its edge it covers no node,
    node label or other edge label (busiest edges first); one that finds no such place is left
    out (the arrow's tooltip and the table below have it; the <svg> says how many in
    data-labels-left-out). The picture is the extent of what is drawn, scaled down to the
    page's width."""
    edges = act.wake_edges[:max_edges]
    followed = {t.tid for t in act.threads}
    names: dict[int, str] = {t.tid: _name(t.comm, t.tid) for t in act.threads}
    for e in edges:
        names.setdefault(e.waker, _name(e.waker_comm, e.waker))
        names.setdefault(e.wakee, _name(e.wakee_comm, e.wakee))
    nodes = sorted({e.waker for e in edges} | {e.wakee for e in edges}, key=lambda t: (t not in followed, t))
    if not nodes:
        return ""
    # A hub (a dispatcher, a server: on every edge but a few) goes in the middle, the rest on
    # the circle, neighbours CHORD apart: room for their labels and the arrows between them.
    degree = {t: sum(t in (e.waker, e.wakee) for e in edges) for t in nodes}
    hub = max(nodes, key=lambda t: (degree[t], -nodes.index(t)))
    ring = [t for t in nodes if t != hub] if len(nodes) >= 4 and degree[hub] >= 0.75 * len(edges) else nodes
    n = len(ring)
    radius = 0.0 if n == 1 else max(CHORD / 2 / math.sin(math.pi / n), 1.2 * CHORD)
    angle = {t: math.pi + 2 * math.pi * i / n for i, t in enumerate(ring)}
    pos = {t: (radius * math.cos(a), radius * math.sin(a)) for t, a in angle.items()}
    if hub not in pos:
        angle[hub], pos[hub] = math.pi / 2, (0.0, 0.0)
    taken = _Taken()
    extent = _Taken()  # everything drawn, for the picture's size
    for t in nodes:
        x, y = pos[t]
        box = (x - NODE_R, y - NODE_R, x + NODE_R, y + NODE_R)
        taken.take(box)
        extent.take(box)
    node_svg = []
    for t in nodes:
        x, y = pos[t]
        fill = FOLLOWED_FILL if t in followed else OTHER_FILL
        # the label outside the circle of nodes, where no arrow runs (the hub's below it)
        ux, uy = (math.cos(angle[t]), math.sin(angle[t])) if len(pos) > 1 else (0.0, 1.0)
        anchor = "start" if ux > 0.35 else "end" if ux < -0.35 else "middle"
        lx, ly = x + ux * (NODE_R + 6), y + uy * (NODE_R + 6) + 4 + (8 if anchor == "middle" and uy > 0 else 0)
        box = _text_box(lx, ly, names[t], anchor)
        taken.take(box)
        extent.take(box)
        node_svg.append(
            f'<g class="node"><title>{html.escape(names[t])}</title>'
            f'<circle cx="{_x(x)}" cy="{_x(y)}" r="{NODE_R}" fill="{fill}" stroke="#357"/>'
            # a white halo: an arrow under the label does not hide it
            f'<text x="{_x(lx)}" y="{_x(ly)}" text-anchor="{anchor}" stroke="#fff" stroke-width="3" '
            f'paint-order="stroke">{html.escape(names[t])}</text></g>'
        )
    top = max(e.count for e in edges)
    pairs = {(e.waker, e.wakee) for e in edges}
    edge_svg, label_svg, left_out = [], [], 0
    for e in edges:
        width = 1 + 3 * math.log1p(e.count) / math.log1p(top)
        label = f"{e.count:,}x" + (f" {fmt(e.delay_p50_ns, US)} us" if e.delay_p50_ns is not None else "")
        if e.hardirq:
            label += f" ({e.hardirq:,} irq)"
        title = (
            f"{names[e.waker]} woke {names[e.wakee]} {e.count:,} times ({e.hardirq:,} in a hard interrupt); "
            f"delay to running p50 {fmt(e.delay_p50_ns, US)} us, p99 {fmt(e.delay_p99_ns, US)} us"
        )
        (x1, y1), (x2, y2) = pos[e.waker], pos[e.wakee]
        if e.waker == e.wakee:  # a loop above the node
            path = (
                f"M{_x(x1 - 10)},{_x(y1 - NODE_R + 2)} C{_x(x1 - 40)},{_x(y1 - NODE_R - 50)} "
                f"{_x(x1 + 40)},{_x(y1 - NODE_R - 50)} {_x(x1 + 10)},{_x(y1 - NODE_R + 2)}"
            )
            extent.take((x1 - 40, y1 - NODE_R - 50, x1 + 40, y1))
            spots = [(x1, y1 - NODE_R - 42)]
        else:
            dx, dy = x2 - x1, y2 - y1
            d = math.hypot(dx, dy) or 1.0
            ux, uy = dx / d, dy / d
            bend = 0.18 * d if (e.wakee, e.waker) in pairs else 0.0
            # the control point to the right of the direction of travel: the two ways part
            mx, my = (x1 + x2) / 2 - uy * bend, (y1 + y2) / 2 + ux * bend
            # start and end on the nodes' circles, towards the control point
            sx, sy = _towards(x1, y1, mx, my, NODE_R)
            ex, ey = _towards(x2, y2, mx, my, NODE_R + 2)
            path = f"M{_x(sx)},{_x(sy)} Q{_x(mx)},{_x(my)} {_x(ex)},{_x(ey)}"
            curve = [_on_curve(k / 10, (sx, sy), (mx, my), (ex, ey)) for k in range(11)]
            extent.take(
                (min(p[0] for p in curve), min(p[1] for p in curve), max(p[0] for p in curve), max(p[1] for p in curve))
            )
            spots = [_on_curve(t, (sx, sy), (mx, my), (ex, ey)) for t in LABEL_AT]
        for lx, ly in spots:
            box = _text_box(lx, ly + 4, label, "middle")
            if taken.free(box):
                taken.take(box)
                extent.take(box)
                # on a white card: the arrows crossing it do not show through
                label_svg.append(
                    f'<g class="edge-label"><title>{html.escape(title)}</title>'
                    f'<rect x="{_x(box[0])}" y="{_x(box[1])}" width="{_x(box[2] - box[0])}" '
                    f'height="{_x(box[3] - box[1])}" rx="2" fill="#fff" fill-opacity="0.9"/>'
                    f'<text x="{_x(lx)}" y="{_x(ly + 4)}" text-anchor="middle" fill="#333">'
                    f"{html.escape(label)}</text></g>"
                )
                break
        else:
            left_out += 1
        edge_svg.append(
            f'<g class="edge"><title>{html.escape(title)}</title><path d="{path}" fill="none" stroke="#555" '
            f'stroke-width="{width:.2f}" marker-end="url(#wake-arrow)"/></g>'
        )
    x0 = min(b[0] for b in extent.boxes) - PAD
    y0 = min(b[1] for b in extent.boxes) - PAD
    w = max(b[2] for b in extent.boxes) + PAD - x0
    h = max(b[3] for b in extent.boxes) + PAD - y0
    out = [
        # at most its own size, scaled down to the page's width (never cut at the right edge)
        f'<svg xmlns="http://www.w3.org/2000/svg" class="wakegraph" width="{_x(w)}" height="{_x(h)}" '
        f'style="max-width:100%;height:auto" data-labels-left-out="{left_out}" '
        f'viewBox="{_x(x0)} {_x(y0)} {_x(w)} {_x(h)}" font-family="system-ui,sans-serif" font-size="11">',
        '<defs><marker id="wake-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10" '
        'markerHeight="10" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    # the arrows first, their labels over every arrow, the nodes over both
    return "".join(out + edge_svg + label_svg + node_svg + ["</svg>"])


def _towards(x: float, y: float, tx: float, ty: float, r: float) -> tuple[float, float]:
    """The point at distance r from (x, y) in the direction of (tx, ty)."""
    d = math.hypot(tx - x, ty - y) or 1.0
    return x + (tx - x) * r / d, y + (ty - y) * r / d


# --- the report's section ----------------------------------------------------------------------


def activity_section(act: Activity | None) -> str:
    """The report's whole-trace section (HTML) of a summary's activity, "" without one."""
    if act is None:
        return ""
    out = []
    if act.start_ns is not None and act.end_ns is not None:
        out.append(
            f"<p class=muted>The whole trace: {esc(fmt(act.end_ns - act.start_ns, US))} us, "
            f"{len(act.threads)} threads followed; each thread from its first to its last record.</p>"
        )
    shown = _shown_states(act)
    rows = []
    for t in act.threads:
        rows.append(
            [esc(_name(t.comm, t.tid)), esc(fmt(t.span_ns, US))]
            + [
                f"{esc(fmt(t.states_ns[s], US))} <span class=muted>{_pct(t.states_ns[s], t.span_ns)}</span>"
                for s in shown
            ]
            + [esc(", ".join(f"{_name(p.comm, p.tid)} {fmt(p.ns, US)} us" for p in t.preempted_by)) or "-"]
        )
    out.append("<h3>Threads: time in each state (us)</h3>")
    out.append(html_table(["thread", "span"] + shown + ["preempted by"], rows))
    out.append("<h3>Who wakes whom</h3>")
    svg = wake_graph_svg(act)
    if svg:
        left_out = int(svg.split('data-labels-left-out="', 1)[1].split('"', 1)[0])
        out.append(
            "<p class=muted>An arrow per waker &rarr; wakee: wake-ups and the median delay from the wake-up "
            "to the wakee running (blue: followed threads)"
            + (
                f"; {left_out} arrow{'s' if left_out > 1 else ''} without a label where it would cover another "
                "(hover an arrow; the table below has the busiest edges)"
                if left_out
                else ""
            )
            + ".</p>"
            + svg
        )
        out.append(
            html_table(
                ["waker → wakee", "count", "in hard irq", "delay p50", "p90", "p99", "max"],
                [
                    [
                        esc(f"{_name(e.waker_comm, e.waker)} → {_name(e.wakee_comm, e.wakee)}"),
                        f"{e.count:,}",
                        f"{e.hardirq:,}",
                        *(esc(f"{fmt(v, US)} us") for v in (e.delay_p50_ns, e.delay_p90_ns, e.delay_p99_ns)),
                        esc(f"{fmt(e.delay_max_ns, US)} us"),
                    ]
                    for e in act.wake_edges[:TOP_EDGES]
                ],
            )
        )
    else:
        out.append("<p>No wake-ups were recorded.</p>")
    out.append(f"<h3>System calls: the {TOP_SYSCALLS} with the most time (us)</h3>")
    out.append(
        html_table(
            ["syscall", "count", "total", "p50", "p90", "p99", "max", "on CPU", "off CPU", "blocked", "preempted"],
            [
                [
                    esc(s.name),
                    f"{s.count:,}",
                    *(esc(fmt(v, US)) for v in (s.total_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.max_ns)),
                    _pct(s.on_cpu_ns, s.total_ns),
                    _pct(s.off_cpu_ns, s.total_ns),
                    _pct(s.states_ns["blocked"], s.total_ns),
                    _pct(s.states_ns["preempted"], s.total_ns),
                ]
                for s in act.syscalls[:TOP_SYSCALLS]
            ],
        )
    )
    return "".join(out)
