"""Least-squares slopes of a soak's samples (issue 47): for each column of a samples CSV
(svgplot.py's format: `t` in seconds, then `series:line` columns, `#marker` lines), the mean, the
slope per hour and the slope in % of the mean per hour — the figure a soak's "flat" is judged by
(≤ 2 %/h). Three windows, as the load tool's soak report gives them:

- `all`: every sample from AFTER seconds on (default 600: caches and the allocator's arenas grow
  to their size first);
- `cycles`: every sample from the first marker (disruption) at or after AFTER to the end — whole
  cycles of disruption and recovery when the last disruption left an interval before the end;
- `settled`: the last sample before each of those markers, and the last of all — the levels each
  recovery left.

    python3 scripts/realcluster/slopes.py SAMPLES.csv [AFTER] [WINDOW] [PREFIX...]

WINDOW: all (default), cycles or settled. PREFIX: only columns starting with one of them (e.g.
rss_mib tasks).
"""

import sys

from agents import least_squares
from svgplot import read_samples

WINDOWS = ("all", "cycles", "settled")


def window_points(pts, after, starts, window):
    """The (t, v) of `pts` that `window` takes; `starts`: the markers at or after `after`."""
    if window == "all" or (window == "cycles" and not starts):
        return [(t, v) for t, v in pts if t >= after]
    if window == "cycles":
        return [(t, v) for t, v in pts if t >= starts[0]]
    picked = []
    for end in starts:
        before = [p for p in pts if p[0] < end]
        if before and before[-1] not in picked:
            picked.append(before[-1])
    if pts and pts[-1] not in picked:
        picked.append(pts[-1])
    return picked


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    after = float(sys.argv[2]) if len(sys.argv) > 2 else 600.0
    rest = sys.argv[3:]
    window = rest.pop(0) if rest and rest[0] in WINDOWS else "all"
    prefixes = tuple(rest)
    series, markers = read_samples(sys.argv[1])
    starts = sorted(t for t, _ in markers if t >= after)
    for name, pts in series.items():
        if prefixes and not name.startswith(prefixes):
            continue
        chosen = window_points(pts, after, starts, window)
        fit = least_squares([(t / 3600.0, v) for t, v in chosen])
        if fit is None:
            continue
        mean, per_hour = fit
        pct = per_hour / mean * 100 if mean else 0.0
        print("%-42s mean %10.1f  %+10.2f/h  %+8.2f %%/h" % (name, mean, per_hour, pct))


if __name__ == "__main__":
    main()
