"""Line charts as small standalone SVG files, with no dependency: what the soak's report
renders its samples with (issue 47). One chart: a time axis in minutes, one or more series,
vertical markers for the disruptions, each labelled.

    from svgplot import chart
    svg = chart("pool replica RSS (MiB)", {"replica 0": [(t, v), ...]},
                markers=[(t, "apiserver restart"), ...])
    open("rss.svg", "w").write(svg)

`python3 scripts/realcluster/svgplot.py SAMPLES.csv OUTDIR` renders a samples file (first
column `t`, seconds; a `#marker,t,label` line per disruption): the columns `chart:line` as the
lines of one chart each (`rss_mib:pool-0`, `rss_mib:pool-1`), any other column alone.
"""

import csv
import html
import math
import os
import sys

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 36
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def nice_step(span, ticks=5):
    """A round step (1, 2 or 5 × 10^k) giving about `ticks` ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def fmt(v):
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.0f" % v
    return ("%.2f" % v).rstrip("0").rstrip(".")


def chart(title, series, markers=(), y_label="", width=WIDTH, height=HEIGHT):
    """An SVG line chart. `series`: name → [(seconds, value)]; `markers`: [(seconds, label)]."""
    points = [p for s in series.values() for p in s]
    if not points:
        points = [(0, 0)]
    t0 = min(t for t, _ in points)
    t1 = max(max(t for t, _ in points), t0 + 1)
    ys = [v for _, v in points]
    y0 = min(0, min(ys))
    y1 = max(ys) if max(ys) > y0 else y0 + 1
    step = nice_step(y1 - y0)
    y1 = math.ceil(y1 / step) * step
    pw, ph = width - LEFT - RIGHT, height - TOP - BOTTOM

    def x(t):
        return LEFT + (t - t0) / (t1 - t0) * pw

    def y(v):
        return TOP + ph - (v - y0) / (y1 - y0) * ph

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="11">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="16" font-size="13" font-weight="bold">%s</text>'
           % (LEFT, html.escape(title))]
    # Axes and grid.
    v = y0
    while v <= y1 + step / 2:
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/>'
                   % (LEFT, LEFT + pw, y(v), y(v)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (LEFT - 4, y(v) + 4, fmt(v)))
        v += step
    minutes = (t1 - t0) / 60
    xstep = nice_step(minutes, 8) * 60
    t = t0
    while t <= t1 + 1e-9:
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (x(t), TOP + ph + 14, fmt((t - t0) / 60)))
        t += xstep
    out.append('<text x="%d" y="%d" text-anchor="middle">minutes</text>'
               % (LEFT + pw / 2, height - 4))
    if y_label:
        out.append('<text x="12" y="%d" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>'
                   % (TOP + ph / 2, TOP + ph / 2, html.escape(y_label)))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>'
               % (LEFT, TOP, pw, ph))
    # Disruptions.
    for i, (t, label) in enumerate(markers):
        if t0 <= t <= t1:
            out.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999" '
                       'stroke-dasharray="3,3"/>' % (x(t), x(t), TOP, TOP + ph))
            out.append('<text x="%.1f" y="%d" fill="#666" font-size="9" '
                       'transform="rotate(-90 %.1f %d)" text-anchor="end">%s</text>'
                       % (x(t) + 3, TOP + 4, x(t) + 3, TOP + 4, html.escape(label)))
    # Series, and their legend.
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        path = " ".join("%s%.1f,%.1f" % ("M" if j == 0 else "L", x(t), y(v))
                        for j, (t, v) in enumerate(sorted(pts)))
        if path:
            out.append('<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>' % (path, color))
        lx = LEFT + pw - 150
        ly = TOP + 14 + 14 * i
        out.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/>'
                   % (lx, lx + 16, ly - 4, ly - 4, color))
        out.append('<text x="%d" y="%d">%s</text>' % (lx + 20, ly, html.escape(name)))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def read_samples(path):
    """A samples CSV: a header `t,<series>...`, rows of numbers (empty: no sample), and
    `#marker,<t>,<label>` lines. Returns ({series: [(t, v)]}, [(t, label)])."""
    series, markers, header = {}, [], None
    with open(path) as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "#marker":
                markers.append((float(row[1]), row[2]))
                continue
            if header is None:
                header = row
                series = {name: [] for name in header[1:]}
                continue
            t = float(row[0])
            for name, cell in zip(header[1:], row[1:]):
                if cell != "":
                    series[name].append((t, float(cell)))
    return series, markers


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    series, markers = read_samples(sys.argv[1])
    os.makedirs(sys.argv[2], exist_ok=True)
    for title, lines in grouped(series).items():
        safe = "".join(c if c.isalnum() else "-" for c in title).strip("-")
        with open(os.path.join(sys.argv[2], safe + ".svg"), "w") as f:
            f.write(chart(title, lines, markers))


def grouped(series):
    """Columns named `chart:line` drawn as lines of one chart (`rss_mib:pool-0`,
    `rss_mib:pool-1` → the chart `rss_mib`); a column without `:` is a chart of its own.
    Columns with no sample are left out."""
    charts = {}
    for name, pts in series.items():
        if not pts:
            continue
        title, _, line = name.partition(":")
        charts.setdefault(title, {})[line or title] = pts
    return charts


if __name__ == "__main__":
    main()
