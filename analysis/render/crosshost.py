"""The text of `ipctrace explain` on a merged directory (ipctrace merge): one round trip across
two hosts, part by part on the client's clock, each part where it happened."""


def explain_text(x: dict) -> str:
    c = x["clock"]
    lines = [
        f"round trip {x['iteration']} of run {x['run']}: {x['latency_ns'] / 1e3:.2f} us "
        f"(rank {x['rank']} of the {x['of']} joined), client {x['hosts']['client']}, server {x['hosts']['server']}",
        f"on the client's clock; the server's is aligned to within ±{c['error_bound_ns'] / 1e3:.3f} us"
        + ("" if c["consistent"] else " (INCONSISTENT: no clock line keeps every bound)"),
        "",
        f"{'at us':>10}  {'where':<8} {'part':<16} {'us':>10}  what",
    ]
    for name, where, start, ns, what in x["parts"]:
        lines.append(f"{start / 1e3:>10.2f}  {where:<8} {name:<16} {ns / 1e3:>10.2f}  {what}")
    lines.append(f"{x['latency_ns'] / 1e3:>10.2f}  the answer is back: the round trip ends")
    return "\n".join(lines)
