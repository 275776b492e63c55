"""ipctrace compare DIR DIR...: one table, metric by metric, against the first directory.

For each metric and directory: n, median, mean with its 95 % interval, the
ratio of means and of medians to the first directory, and whether the 95 %
intervals of the mean (and of the median) overlap those of the first.
"""

from analysis.errors import UsageError
from analysis.model.summary import fmt, fmt_pm, pick_unit, render
from analysis.store.results import read_summary


def register(sub):
    p = sub.add_parser("compare", help="compare the results of several runs", description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results directories; the first is the baseline")


def overlap(a, b):
    if a is None or b is None:
        return "-"
    return "yes" if a[0] <= b[1] and b[0] <= a[1] else "no"


def ratio(x, base):
    return "-" if x is None or not base else f"{x / base:.3f}"


def compare_rows(summaries):
    """summaries: [(label, summary)]; rows of the comparison table."""
    names = []
    for _, s in summaries:
        names += [m for m in s["metrics"] if m not in names]
    rows = []
    for name in names:
        base = summaries[0][1]["metrics"].get(name)
        scale, unit = pick_unit(
            (base or next(s["metrics"][name] for _, s in summaries if name in s["metrics"])).get("median")
        )
        for i, (label, s) in enumerate(summaries):
            m = s["metrics"].get(name)
            if m is None:
                rows.append([name if i == 0 else "", label, "-", "-", "-", "-", "-", "-", "-"])
                continue
            ci = m.get("ci95_mean")
            half = None if ci is None else (ci[1] - ci[0]) / 2
            if i == 0:
                vs = ["1", "1", "", ""]
            elif base is None:
                vs = ["-", "-", "-", "-"]
            else:
                vs = [
                    ratio(m.get("mean"), base.get("mean")),
                    ratio(m.get("median"), base.get("median")),
                    overlap(ci, base.get("ci95_mean")),
                    overlap(m.get("ci95_median"), base.get("ci95_median")),
                ]
            rows.append(
                [
                    name + ("*" if m.get("derived") else "") if i == 0 else "",
                    label,
                    str(m["n"]),
                    f"{fmt(m.get('median'), scale)} {unit}",
                    f"{fmt_pm(m.get('mean'), half, scale)} {unit}",
                    *vs,
                ]
            )
    return rows


def run(args):
    if len(args.dirs) < 2:
        raise UsageError("compare needs at least two results directories")
    summaries = [(d, read_summary(d)) for d in args.dirs]
    header = [
        "metric",
        "results",
        "n",
        "median",
        "mean ± 95% CI",
        "mean ratio",
        "median ratio",
        "mean CIs overlap",
        "median CIs overlap",
    ]
    for line in render(compare_rows(summaries), header, left=2):
        print(line)
    print(f"ratios and overlaps are against {args.dirs[0]}; * derived, not measured")
    return 0
