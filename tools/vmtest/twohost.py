"""Host side of tools/vmtest/twohost: finish the two guests' traces as `ipctrace trace` would
(the client's round trips by --rtt, the server's whole trace), each said to come from its guest's
host, join them with `ipctrace merge`, and judge the join: >= 99 % of the round trips joined, a
consistent clock alignment with its error bound, and the server's spin recovered as server_user
within 10 %.
    twohost.py OUT RELEASE ITERATIONS SPIN_US"""

import json
import re
import subprocess
import sys
from pathlib import Path

from analysis.run import analyse_run, trace
from analysis.store.results import read_json, write_json

HOME = Path(__file__).resolve().parents[2]


def finish(d: Path, role: str, release: str, rtt: bool) -> None:
    target = trace.Target(
        command=["netpp", role],
        pids=[],
        comms=[],
        duration_s=0,
        iterations_from="rtt" if rtt else None,
        marker_binaries=[],
        functions=[],
        messages=True,
    )
    tj = analyse_run.read_trace_json(d)
    trace.analyse(d, target, tj, "complete", 0, lambda *a, **k: None)
    s = read_json(d / "summary.json")
    s["host"] = {**(s.get("host") or {}), "hostname": f"guest-{role}", "kernel": release}
    write_json(d / "summary.json", s)


def main() -> int:
    out, release, iterations, spin_us = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    problems = []
    sides = {}
    for role in ("server", "client"):
        d = out / role / "results" / role
        rc = (
            (out / role / "results" / f"{role}.rc").read_text().strip()
            if (out / role / "results" / f"{role}.rc").exists()
            else "?"
        )
        if rc != "0" or not (d / "events.bin").exists():
            err = out / role / "results" / f"{role}.err"
            problems.append(
                f"{role}: the guest's traced run failed (exit {rc}): {err.read_text().strip()[-300:] if err.exists() else ''}"
            )
            continue
        finish(d, role, release, rtt=role == "client")
        sides[role] = d
    if problems:
        print("\n".join(f"vmtest-twohost: {p}" for p in problems))
        return 1
    merged = out / "merged"
    r = subprocess.run(
        [sys.executable, "-m", "analysis", "merge", sides["client"], sides["server"], "--out", merged],
        cwd=HOME,
        capture_output=True,
        text=True,
    )
    print(r.stdout, end="")
    if r.returncode:
        print(f"vmtest-twohost: merge failed (exit {r.returncode}): {r.stderr.strip()}")
        return 1
    doc = read_json(merged / "merge.json")
    joined, total = doc["joined"], doc["round_trips"]
    clock = doc["clock"]
    user = doc["parts"]["server_user"]["median"] / 1e3 if doc["parts"]["server_user"] else float("nan")
    if total < iterations or joined < 0.99 * total:
        problems.append(f"{joined} of {total} round trips joined (want >= 99 % of {iterations})")
    if not clock["consistent"]:
        problems.append(f"the clock alignment is inconsistent (off by {clock['error_bound_ns'] / 1e3:.1f} us)")
    # the spin as the server timed it: under TCG on a busy host the guest's clock runs on while
    # QEMU is not running, and a deadline spin with it (its nominal length is a floor)
    said = (out / "server" / "results" / "server.out").read_text()
    m = re.search(r"work median (\d+) ns", said)
    timed = int(m.group(1)) / 1e3 if m else float("nan")
    if not abs(user - timed) <= 0.1 * timed:
        problems.append(f"server_user median {user:.1f} us, not the server's own {timed:.1f} us within 10 %")
    figures = {
        "release": release,
        "round_trips": total,
        "joined": joined,
        "offset_s": clock["offset_ns"] / 1e9,
        "drift_ppm": clock["drift_ppm"],
        "error_bound_us": clock["error_bound_ns"] / 1e3,
        "server_user_us": user,
        "spin_us": spin_us,
        "spin_as_timed_us": timed,
    }
    (out / "figures.json").write_text(json.dumps(figures, indent=1) + "\n")
    if problems:
        print("\n".join(f"vmtest-twohost: {p}" for p in problems))
        return 1
    print(
        f"vmtest-twohost: passed on {release}: {joined} of {total} round trips joined, clocks "
        f"{clock['offset_ns'] / 1e9:+.6f} s apart ±{clock['error_bound_ns'] / 1e3:.1f} us, "
        f"server_user {user:.1f} us for a {spin_us} us spin that took {timed:.1f} us by the server's clock"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
