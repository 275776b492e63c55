"""The text of an Explanation (model/explain.py), as `ipctrace explain` prints it and the
report shows it."""

from analysis.model import breakdown as bd
from analysis.model.explain import Explanation, us
from analysis.render.table import iteration_noun

STATE_WORDS = {
    "user": "user space",
    "entry": "kernel entry/exit path (estimated)",
    "syscall": "in a syscall",
    "copy": "copying data",
    "irq": "interrupt",
    "blocked": "blocked: nobody works on it",
    "wakeup": "being woken (IPI, idle exit)",
    "runqueue": "woken, in the run queue",
    "preempted": "preempted by another task",
    "steal": "the hypervisor had the CPU (steal)",
    "residual": "no known state",
}


def render(x: Explanation) -> str:
    """The text of an Explanation."""
    out = [
        f"{x.workload} {x.metric}, repetition {x.run} iteration {x.iteration} ({x.how}): {us(x.latency_ns)}",
        ", ".join(x.legend),
        "",
        "time since start  who  what",
    ]
    for rel, who, text in x.chain:
        out.append(f"  {'+' + us(rel):>14}  {who:<3}  {text}")
    out += [
        "",
        f"critical path (what the end of the {iteration_noun(x.metric)} waited on, walked back from its end):"
        if x.critical_path
        else "where the time went:",
    ]
    for seg in x.path:
        words = STATE_WORDS[seg.component]
        if seg.holder:
            words += f" (CPU held by {seg.holder})"
        # the duration before the words: a long "CPU held by ..." cannot push it out of its column
        out.append(
            f"  {'+' + us(seg.start_ns):>14} .. {'+' + us(seg.end_ns):>14}  {seg.who:<3} "
            f"{us(seg.end_ns - seg.start_ns):>12}  {words}"
        )
    lat = x.latency_ns
    out += ["", "components of this iteration (the sums of the segments above):"]
    for c in bd.COMPONENTS:
        v = x.components[c]
        note = {"copy": x.copy_note, "entry": x.entry_note}.get(c, "")
        out.append(f"  {c:<12} {us(v):>12}  {100 * v / lat:5.1f} %{'  ' + note if note and v else ''}")
    measured = sum(x.components[c] for c in bd.MEASURED)
    out.append(f"  {'sum':<12} {us(measured):>12}  {100 * measured / lat:5.1f} % of the measured {us(lat)}")
    for role, comp in x.sides.items():
        parts = ", ".join(f"{c} {us(v)}" for c, v in comp.items() if v > 0)
        out.append(f"  {role} side alone: {parts}")
    if not x.critical_path:
        out.append("  (one thread only: no critical path across sides)")
    if x.steal_ns > 0:
        out.append(
            f"  the hypervisor took a CPU of the workload for {us(x.steal_ns)} during this iteration "
            f"({us(x.components.get('steal', 0.0))} of it on the critical path: `steal` above)"
        )
    if x.tail_label:
        out.append(f"  above p99 of {x.metric}; in its window: {x.tail_label.replace(',', ', ')}")
    return "\n".join(out)
