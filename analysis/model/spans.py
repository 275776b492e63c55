"""One kept request as the spans of an OpenTelemetry trace (`ipctrace watch --otlp`), as data:
a root span for the request and, under it, one span per stretch of its critical path in order,
on the thread where it happened. Rendering them (OTLP/HTTP protobuf) is render/otlp.py's job;
nothing here knows the wire format.

The names and attributes (docs/DESIGN.md, "ipctrace watch"):
- the root span is named after what the request is ("round trip" for --rtt, "iteration" for
  markers, the function's name for --iteration-func); the resource has OpenTelemetry's
  `service.name` (the traced program), `host.name` and `process.pid`; the root span has
  `thread.id` and `thread.name` of the thread that asked, as the semantic conventions name them;
- each child span is named after its component as `ipctrace explain` and breakdown.parquet
  name it (user, entry, copy, irq, wakeup, runqueue, blocked, preempted, steal, residual), a
  system call's time by the call's name (recvfrom, sendto, ...), and carries `thread.id`,
  `thread.name` and, in the `ipctrace.` namespace, what no convention names: the component,
  the CPU, the task that held the CPU while the thread waited (runqueue, preempted), the call;
- an interrupt (irq, steal) or a preemption between two stretches of one thread in one component
  (user time, or one system call) nests inside one span for that stretch: the thread never left
  it. A 2 ms spin cut by a timer tick, or by a kworker that ran 30 us, is one user span with the
  tick or the preemption inside, not two spans of 1 ms;
- times are the kernel's (CLOCK_MONOTONIC) plus one offset to wall-clock time taken once per
  trace (`ipctrace.clock.offset_ns` on the root span)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# Components that happen to a running thread without its leaving the stretch it is in (it stays
# runnable): they nest inside the span of that stretch when the same stretch goes on after them.
NESTING = ("irq", "steal", "preempted")
# Components of a thread waiting for a CPU: the span names who held it.
WAITING = ("runqueue", "preempted")
ROOT_NAMES = {"rtt": "round trip", "markers": "iteration"}

AttrValue = str | int | float | bool


@dataclass(frozen=True)
class Piece:
    """One segment of a request's critical path: [start_ns, end_ns) since the request began,
    the thread on the path, the component it counts to, the system call it was in (syscall and
    copy time; "" elsewhere), the CPU (-1: not known) and, for waiting time, the task that held
    the CPU ("" if idle or none recorded)."""

    start_ns: int
    end_ns: int
    tid: int
    thread_name: str
    component: str
    syscall: str = ""
    cpu: int = -1
    holder: str = ""


@dataclass(frozen=True)
class Request:
    """A kept request: who asked, when (the kernel's CLOCK_MONOTONIC ns), its critical path,
    and what the trace is about (service, host, the clock offset taken once per trace)."""

    how: str  # rtt, markers or function
    name: str  # the function's name for --iteration-func, else ""
    service: str
    host: str
    pid: int
    tid: int
    thread_name: str
    start_ns: int
    end_ns: int
    clock_offset_ns: int  # wall-clock ns = CLOCK_MONOTONIC ns + this
    path: Sequence[Piece]
    components: dict[str, float] = field(default_factory=dict)
    closed: bool = True  # whether the path's segments sum to the latency (explain's critical_path)
    iteration: int = -1
    kept: str = ""  # the results directory that keeps it


@dataclass(frozen=True)
class Span:
    """A span to send: wall-clock [start_ns, end_ns), parent an index into the same list
    (None: the root)."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, AttrValue]
    parent: int | None


def resource(req: Request) -> dict[str, AttrValue]:
    """The attributes of the resource the spans come from (OpenTelemetry's resource conventions)."""
    return {"service.name": req.service, "host.name": req.host, "process.pid": req.pid}


def root_name(req: Request) -> str:
    return req.name if req.how == "function" and req.name else ROOT_NAMES.get(req.how, "iteration")


def _same_stretch(a: Piece, b: Piece) -> bool:
    return a.tid == b.tid and a.component == b.component and a.syscall == b.syscall


def stretches(path: Sequence[Piece]) -> list[tuple[Piece, list[Piece]]]:
    """The path as (stretch, the pieces nested in it): adjacent pieces of one thread in one
    component (and call) joined, and an irq, steal or preemption between two pieces of one stretch nested
    inside it (NESTING)."""
    out: list[tuple[Piece, list[Piece]]] = []
    for p in path:
        if out:
            last, inner = out[-1]
            if _same_stretch(last, p) and last.cpu == p.cpu and last.holder == p.holder:
                out[-1] = (_joined(last, p), inner)
                continue
            # A, irq..., A' on one thread: one stretch A..A' with the interrupts inside
            k = len(out) - 1
            while k >= 0 and out[k][0].component in NESTING and out[k][0].tid == p.tid and not out[k][1]:
                k -= 1
            # (on the CPU it was on: a preempted thread resumed elsewhere starts a stretch anew)
            if (
                0 <= k < len(out) - 1
                and _same_stretch(out[k][0], p)
                and out[k][0].cpu == p.cpu
                and p.component not in NESTING
            ):
                nested = out[k][1] + [s for s, _ in out[k + 1 :]]
                out[k + 1 :] = []
                out[k] = (_joined(out[k][0], p), nested)
                continue
        out.append((p, []))
    return out


def _joined(a: Piece, b: Piece) -> Piece:
    return Piece(a.start_ns, b.end_ns, a.tid, a.thread_name, a.component, a.syscall, a.cpu, a.holder)


def piece_name(p: Piece) -> str:
    """A span's name: a system call's time by the call's name, else the component's."""
    return p.syscall if p.component == "syscall" and p.syscall else p.component


def piece_attributes(p: Piece) -> dict[str, AttrValue]:
    attrs: dict[str, AttrValue] = {"thread.id": p.tid, "thread.name": p.thread_name, "ipctrace.component": p.component}
    if p.syscall:
        attrs["ipctrace.syscall"] = p.syscall
    if p.cpu >= 0:
        attrs["ipctrace.cpu"] = p.cpu
    if p.component in WAITING:
        attrs["ipctrace.cpu_holder"] = p.holder or "idle"
    return attrs


def spans(req: Request) -> list[Span]:
    """The request's spans, the root first, then each stretch of its path in order, each
    followed by the pieces nested in it."""
    wall = req.start_ns + req.clock_offset_ns
    root_attrs: dict[str, AttrValue] = {
        "thread.id": req.tid,
        "thread.name": req.thread_name,
        "ipctrace.latency_ns": req.end_ns - req.start_ns,
        "ipctrace.critical_path.closed": req.closed,
        "ipctrace.clock.offset_ns": req.clock_offset_ns,
    }
    if req.iteration >= 0:
        root_attrs["ipctrace.iteration"] = req.iteration
    if req.kept:
        root_attrs["ipctrace.kept"] = req.kept
    for c, ns in req.components.items():
        if ns:
            root_attrs[f"ipctrace.components.{c}_ns"] = int(round(ns))
    out = [Span(root_name(req), wall, req.end_ns + req.clock_offset_ns, root_attrs, None)]
    for stretch, inner in stretches(req.path):
        out.append(
            Span(piece_name(stretch), wall + stretch.start_ns, wall + stretch.end_ns, piece_attributes(stretch), 0)
        )
        parent = len(out) - 1
        for p in inner:
            out.append(Span(piece_name(p), wall + p.start_ns, wall + p.end_ns, piece_attributes(p), parent))
    return out
