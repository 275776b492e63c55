"""`ipctrace doctor`: what this kernel lets ipctrace trace, and how each probe would attach.

The answers come from the tracer itself (`ipctrace-loader --doctor`), which tries
each feature for real; this command only prints them.
"""

import argparse
import json

from analysis.errors import UsageError
from analysis.run import doctor

# Display names, in the order of the table.
FEATURES = (
    ("privileges", "privileges"),
    ("btf", "BTF"),
    ("tp_btf", "tp_btf (BTF tracepoints)"),
    ("raw_tp", "raw_tp (raw tracepoints)"),
    ("tracepoint", "classic tracepoints"),
    ("kprobe", "kprobe/kretprobe"),
    ("fentry", "fentry/fexit"),
    ("perf_sampling", "perf_event sampling"),
    ("uprobe", "uprobes (trace --iteration-func)"),
    ("usdt", "USDT (trace --markers)"),
    ("ringbuf", "BPF ring buffer"),
    ("lockdown", "lockdown mode"),
    ("memlock", "memlock limit"),
    ("clock", "clock read"),
    ("steal", "hypervisor steal time"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("doctor", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the tracer's answers as JSON")


def run(args: argparse.Namespace) -> int:
    d = doctor.probe()
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        feats = d.get("features", {})
        width = max(len(name) for _, name in FEATURES)
        print("kernel features")
        for key, name in FEATURES:
            f = feats.get(key, {"ok": False, "detail": "not reported"})
            print(f"  {name:<{width}}  {'yes' if f['ok'] else 'NO ':<3}  {f['detail']}")
        attach = d.get("attach", {})
        print("\nattach mode of each probe")
        pw = max((len(k) for k in attach), default=0)
        for probe_name, mode in attach.items():
            print(f"  {probe_name:<{pw}}  {mode}")
    if not d.get("possible"):
        raise UsageError(
            f"tracing is not possible here: {d.get('why_impossible') or 'see the table'}; "
            f"'ipctrace run --no-trace' still measures"
        )
    return 0
