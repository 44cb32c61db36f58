"""Least-squares slopes of a soak's samples (issue 47): for each column of a samples CSV
(svgplot.py's format: `t` in seconds, then `series:line` columns, `#marker` lines), from
AFTER seconds on (default 600: caches and the allocator's arenas grow to their size first), the
mean, the slope per hour and the slope in % of the mean per hour — the figure a soak's "flat"
is judged by (≤ 2 %/h).

    python3 scripts/realcluster/slopes.py SAMPLES.csv [AFTER] [PREFIX...]

PREFIX: only columns starting with one of them (e.g. rss_mib tasks).
"""

import sys

from agents import least_squares
from svgplot import read_samples


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    after = float(sys.argv[2]) if len(sys.argv) > 2 else 600.0
    prefixes = tuple(sys.argv[3:])
    series, _ = read_samples(sys.argv[1])
    for name, pts in series.items():
        if prefixes and not name.startswith(prefixes):
            continue
        fit = least_squares([(t / 3600.0, v) for t, v in pts if t >= after])
        if fit is None:
            continue
        mean, per_hour = fit
        pct = per_hour / mean * 100 if mean else 0.0
        print("%-42s mean %10.1f  %+10.2f/h  %+8.2f %%/h" % (name, mean, per_hour, pct))


if __name__ == "__main__":
    main()
