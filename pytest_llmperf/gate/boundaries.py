"""Group-sequential critical values: each look's level once the looks' correlation is counted.

A statistic looked at after ``n_1 < n_2 < ...`` pairs is a running sum: the look at ``n_k``
contains the pairs of every earlier look, so two looks' standardized statistics are
correlated by ``sqrt(n_j / n_k)``. Giving each look its share of the error rate as if the
looks were unrelated (the union bound) is safe but wastes much of the error rate on paths an
earlier look has already counted. Here look ``k``'s critical value ``c_k`` is the one at
which the chance of crossing for the *first* time at look ``k`` equals its share (Lan and
DeMets), computed from the joint distribution of a standard Brownian motion observed at the
looks' information levels: the density of the running sum on the paths that have not crossed
yet, carried from one look to the next by a normal convolution on a grid (the recursion of
Armitage, McPherson and Rowe).

The chance of crossing at any look is the sum of the shares. A test that is stricter than
``c_k`` at some look (a discrete statistic that cannot reach the level exactly) only removes
crossings, so the sum stays a bound. Pure numpy, milliseconds for a few dozen looks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float64]

# The grid covers the running sum to this many standard deviations either side of zero:
# beyond it lies no probability that matters to a share (8 sd: below 1e-15).
_REACH_SD = 8.0
# Grid points per standard deviation of the smallest step between looks: the convolved
# densities are smooth on that scale, and the trapezoid rule is then accurate to ~1e-5.
_POINTS_PER_STEP_SD = 4.0


def _trapezoid_weights(points: Vector) -> Vector:
    gaps = np.diff(points)
    weights = np.zeros_like(points)
    weights[:-1] += gaps / 2.0
    weights[1:] += gaps / 2.0
    return weights


def _carried_density(points: Vector, origins: Vector, masses: Vector, step: float) -> Vector:
    """The density at ``points`` of the sum after an independent normal step of variance
    ``step``, from probability ``masses`` sitting at ``origins``."""
    spread = math.sqrt(step)
    z = (points[:, None] - origins[None, :]) / spread
    kernel: Vector = np.exp(-0.5 * z * z) / (spread * math.sqrt(2.0 * math.pi))
    return kernel @ masses


def _tail_masses(points: Vector, density: Vector) -> Vector:
    """Per grid point, the probability above it (trapezoid rule, summed from the top)."""
    segments = np.diff(points) * (density[:-1] + density[1:]) / 2.0
    tails = np.zeros_like(points)
    tails[:-1] = np.cumsum(segments[::-1])[::-1]
    return tails


def _boundary(points: Vector, tails: Vector, share: float) -> float:
    """The point above which ``share`` of the probability lies: between grid points,
    interpolated on the log of the tail (a normal tail is nearly log-linear)."""
    above = int(np.searchsorted(-tails, -share, side="right"))  # first point with tail < share
    if above == 0:
        return float(points[0])
    if above >= len(points) or tails[above] <= 0.0:
        return float(points[above - 1])
    low, high = float(tails[above - 1]), float(tails[above])
    fraction = (math.log(low) - math.log(share)) / (math.log(low) - math.log(high))
    return float(points[above - 1] + fraction * (points[above] - points[above - 1]))


def one_sided_levels(information: Sequence[float], shares: Sequence[float]) -> tuple[float, ...]:
    """Per look, the one-sided level ``1 - Phi(c_k)`` of its critical value, so that a
    standard Brownian motion observed at ``information`` (increasing, in pairs) first lies
    above ``c_k`` standard deviations at look ``k`` with probability ``shares[k]``. A share
    of 0 gives level 0: that look may not decide."""
    if len(information) != len(shares) or not information:
        raise ValueError("one share per look, and at least one look")
    if information[0] <= 0 or any(b <= a for a, b in itertools.pairwise(information)):
        raise ValueError(f"information must increase from above 0, got {list(information)}")
    if any(not 0.0 <= share < 0.5 for share in shares):
        raise ValueError(f"each share must lie in [0, 0.5), got {list(shares)}")
    steps = np.diff(np.concatenate(([0.0], np.asarray(information, dtype=float))))
    spacing = math.sqrt(float(steps.min())) / _POINTS_PER_STEP_SD
    normal = NormalDist()
    # Before the first look every path sits at 0.
    origins: Vector = np.zeros(1)
    masses: Vector = np.ones(1)
    levels = []
    for info, step, share in zip(information, steps, shares, strict=True):
        reach = _REACH_SD * math.sqrt(info)
        points: Vector = np.arange(-reach, reach + spacing, spacing, dtype=np.float64)
        density = _carried_density(points, origins, masses, float(step))
        if share <= 0.0:
            levels.append(0.0)
            bound = math.inf
        elif not levels:  # the first look: no earlier look took paths away, exactly normal
            levels.append(share)
            bound = normal.inv_cdf(1.0 - share) * math.sqrt(info)
        else:
            bound = _boundary(points, _tail_masses(points, density), share)
            levels.append(normal.cdf(-bound / math.sqrt(info)))
        # The paths that did not cross go on to the next look.
        below = points < bound
        kept: Vector = points[below]
        kept_density: Vector = density[below]
        if math.isfinite(bound):
            kept = np.append(kept, bound)
            edge = _carried_density(np.array([bound]), origins, masses, float(step))
            kept_density = np.append(kept_density, edge)
        origins, masses = kept, kept_density * _trapezoid_weights(kept)
    return tuple(levels)
