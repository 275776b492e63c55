"""Figures and columns as every terminal table prints them: the unit a value reads best in,
about three significant digits, a mean with its interval, aligned columns. The whole-trace
view and the run's table (table.py) both draw with these."""

from __future__ import annotations

UNITS = [(1e9, "s"), (1e6, "ms"), (1e3, "us"), (1, "ns")]


def pick_unit(ns: float | None) -> tuple[float, str]:
    """The unit in which a typical value ns reads best."""
    if ns is None:
        return 1, "ns"
    return next(((scale, name) for scale, name in UNITS if abs(ns) >= scale), (1, "ns"))


def places(x: float, scale: float) -> int:
    """Decimals that give about three significant digits (whole ns at most one decimal)."""
    if scale == 1:
        return 0 if abs(x) >= 100 else 1
    return 2 if abs(x) < 10 else 1 if abs(x) < 100 else 0


def fmt(v: float | None, scale: float) -> str:
    if v is None:
        return "-"
    x = v / scale
    return f"{x:.{places(x, scale)}f}"


def fmt_pm(mean: float | None, half: float | None, scale: float) -> str:
    """mean ± half-width, the half-width to the mean's decimals."""
    if mean is None:
        return "-"
    text = fmt(mean, scale)
    if half is None:
        return text
    d = places(mean / scale, scale)
    h = f"{half / scale:.{d}f}"
    return f"{text} ± {h}" if float(h) > 0 or half == 0 else f"{text} ± <{10**-d:.{d}f}"


def fmt_mean_ci(mean: float | None, ci: list[float] | None, scale: float) -> str:
    """mean ± half-width where the 95 % interval is symmetric (the t interval), else the mean
    and its interval's ends (a bootstrap's, kept above zero): never a ± that reaches below it."""
    if mean is None or ci is None:
        return fmt_pm(mean, None, scale)
    lo, hi = ci
    if abs((hi - mean) - (mean - lo)) <= 1e-9 * max(1.0, abs(mean)):
        return fmt_pm(mean, (hi - lo) / 2, scale)
    return f"{fmt(mean, scale)} [{fmt(lo, scale)}..{fmt(hi, scale)}]"


def render(rows: list[list[str]], header: list[str], left: int = 1) -> list[str]:
    """The first `left` columns (text) left-aligned, the others (figures) right-aligned."""
    table = [header] + rows
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in table
    ]
