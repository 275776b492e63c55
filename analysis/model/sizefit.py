"""The copy cost from a message-size sweep: a robust line (Theil-Sen over the per-size medians)
of the in-kernel time per iteration against the bytes copied per iteration, with a bootstrap
95 % interval over the sizes and each size's iterations: the slope is ns per byte, the
intercept the fixed cost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.errors import UsageError
from analysis.model import stats

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

BOOTSTRAP = 2000


def theil_sen(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Slope and intercept of Theil-Sen along the last axis; x has y's shape or is shared.

    Pairs with equal x have no slope; a row without any pair of different x gets NaN.
    """
    ys = np.asarray(y)
    xs = np.broadcast_to(x, ys.shape)
    i, j = np.triu_indices(xs.shape[-1], 1)
    dx = xs[..., j] - xs[..., i]
    with np.errstate(divide="ignore", invalid="ignore"):
        slopes = np.where(dx != 0, (ys[..., j] - ys[..., i]) / dx, np.nan)
    defined = ~np.isnan(slopes).all(axis=-1)
    slope = np.full(slopes.shape[:-1], np.nan)
    slope[defined] = np.nanmedian(slopes[defined], axis=-1)
    intercept = np.median(ys - slope[..., None] * xs, axis=-1)
    return slope, intercept


def non_negative(slope: np.ndarray, intercept: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lines that slope down made flat at the median of y (along the last axis), and their
    intercepts not below zero."""
    slope, intercept = np.asarray(slope, np.float64), np.asarray(intercept, np.float64)
    down = slope < 0
    flat = np.median(y, axis=-1)
    return np.where(down, 0.0, slope), np.maximum(np.where(down, flat, intercept), 0.0)


def fit(points: pd.DataFrame, reps: int = BOOTSTRAP, seed: int = 1) -> dict[str, Any]:
    """points: DataFrame size, x, y arrays per size -> the line and its 95 % intervals.

    Theil-Sen over the per-size medians (x: median bytes per iteration). The
    interval comes from BOOTSTRAP replicates that resample the sizes (so that a
    size measured while the machine was busier moves the line as much as it
    would in a rerun) and redraw each size's median from its own iterations.
    Copying takes no negative time, and a message no negative fixed cost: a line that
    would slope down is taken flat (slope 0, intercept the median time), in the estimate
    and in each replicate, so no interval reaches below zero.
    """
    x = np.array([np.median(v) for v in points["x"]])
    if len(np.unique(x)) < 2:
        raise UsageError("the sizes moved the same number of bytes per iteration: nothing to fit")
    y = np.array([np.median(v) for v in points["y"]])
    slope, intercept = non_negative(*theil_sen(x, y), y)
    rng = np.random.default_rng(seed)
    redrawn = np.stack([stats.median_replicates(v, reps, rng) for v in points["y"]], axis=1)
    pick = rng.integers(0, len(x), size=(reps, len(x)))
    drawn = np.take_along_axis(redrawn, pick, axis=1)
    b_slope, b_int = non_negative(*theil_sen(x[pick], drawn), drawn)
    ok = ~np.isnan(b_slope)  # replicates that drew a single size have no line
    b_slope, b_int = b_slope[ok], b_int[ok]
    xs = np.linspace(0, x.max(), 100)
    lines = b_int[:, None] + b_slope[:, None] * xs
    return {
        "x_median": x,
        "y_median": y,
        "ns_per_byte": float(slope),
        "ns_per_byte_ci95": [float(v) for v in np.percentile(b_slope, [2.5, 97.5])],
        "fixed_ns": float(intercept),
        "fixed_ns_ci95": [float(v) for v in np.percentile(b_int, [2.5, 97.5])],
        "band_x": xs,
        "band_lo": np.percentile(lines, 2.5, axis=0),
        "band_hi": np.percentile(lines, 97.5, axis=0),
    }
