"""Line charts as inline SVG text, and a palette of distinct colours (for the SVG and PNG reports).

A chart is plain SVG markup meant to sit inside an HTML page: no script, no external resource.
Every text in it (title, labels, series names) goes through :func:`html.escape`, so a name read
from a log is shown as text and never becomes markup.

    svg = line_chart([Line("matmul", "#1f77b4", [1, 2, 3], [10.0, 12.5, 12.5])],
                     title="best so far", xlabel="trial", ylabel="GFLOP/s", chart_id="curve")
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Line", "line_chart", "palette"]


def palette(n: int) -> list[str]:
    """``n`` distinct colours as ``#rrggbb``: hues evenly spaced around the colour wheel, visited
    with a stride so that neighbours (in a legend) are far apart, the lightness alternating."""
    if n <= 0:
        return []
    stride = max(1, round(n * 0.382))
    while math.gcd(stride, n) != 1:
        stride += 1
    colours = []
    for i in range(n):
        hue = (i * stride % n) / n
        r, g, b = colorsys.hls_to_rgb(hue, 0.40 if i % 2 == 0 else 0.52, 0.75)
        colours.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    return colours


@dataclass(frozen=True)
class Line:
    """One series: its name, colour, points (a NaN or infinite y: no point there) and a key that the
    chart writes into the line's ``data-key`` attribute."""

    label: str
    colour: str
    xs: Sequence[float]
    ys: Sequence[float]
    key: str = ""


def ticks(lo: float, hi: float, count: int = 5, *, integer: bool = False) -> list[float]:
    """About ``count`` round values (1, 2 or 5 times a power of ten apart; whole numbers if
    ``integer``) covering [lo, hi]."""
    if not hi > lo:
        hi = lo + (abs(lo) * 0.1 or 1.0)
    raw = (hi - lo) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integer:
        step = max(step, 1.0)
    first = math.floor(lo / step + 1e-9) * step
    out = []
    k = 0
    while first + k * step <= hi + step * 1e-9:
        out.append(first + k * step)
        k += 1
    if out[-1] < hi:
        out.append(out[-1] + step)
    return out


def _label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    return f"{value:,.{min(decimals, 6)}f}"


def _finite(line: Line) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in zip(line.xs, line.ys, strict=True)
            if math.isfinite(x) and math.isfinite(y)]


_W, _H = 640, 320
_LEFT, _RIGHT, _TOP, _BOTTOM = 72, 16, 30, 46


def line_chart(
    lines: Sequence[Line], *, title: str, xlabel: str, ylabel: str, chart_id: str, step: bool = True,
    zero: bool = True,
) -> str:
    """An SVG line chart (``id`` ``chart_id``) of ``lines`` on shared axes, y from 0 (``zero``) or
    from round values around the data: ``step`` draws each value until the next point (a best-so-far
    curve), else straight segments. Each line
    is a ``<polyline>`` with its name as a hover title and its last finite y in ``data-last``; a dot
    marks its last point."""
    points = [_finite(line) for line in lines]
    xs = [x for p in points for x, _ in p]
    ys = [y for p in points for _, y in p]
    head = (f'<svg id="{escape(chart_id)}" class="chart" viewBox="0 0 {_W} {_H}" role="img" '
            f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>'
            f'<text x="{_W / 2}" y="18" class="chart-title" text-anchor="middle">{escape(title)}</text>')
    if not xs:
        return head + f'<text x="{_W / 2}" y="{_H / 2}" text-anchor="middle">nothing to plot</text></svg>'
    xt = ticks(min(xs), max(xs), integer=all(float(x).is_integer() for x in xs))
    yt = ticks(min(min(ys), 0.0) if zero else min(ys), max(ys))
    x0, x1, y1 = xt[0], xt[-1], yt[-1]
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def sx(x: float) -> float:
        return _LEFT + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return _TOP + plot_h - (y - yt[0]) / (y1 - yt[0]) * plot_h

    parts = [head, '<g class="axes">']
    for y in yt:
        parts.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" class="grid"/>'
                     f'<text x="{_LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">'
                     f'{_label(y, yt[1] - yt[0])}</text>')
    for x in xt:
        parts.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" '
                     f'class="grid"/><text x="{sx(x):.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle">'
                     f'{_label(x, xt[1] - xt[0])}</text>')
    parts.append(f'<text x="{_LEFT + plot_w / 2}" y="{_H - 8}" text-anchor="middle">{escape(xlabel)}</text>'
                 f'<text transform="translate(16 {_TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">'
                 f'{escape(ylabel)}</text></g>')
    for line, pts in zip(lines, points, strict=True):
        if not pts:
            continue
        coords = []
        for i, (x, y) in enumerate(pts):
            if step and i:
                coords.append(f"{sx(x):.1f},{sy(pts[i - 1][1]):.1f}")
            coords.append(f"{sx(x):.1f},{sy(y):.1f}")
        colour, label = escape(line.colour), escape(line.label)
        last_x, last_y = pts[-1]
        parts.append(f'<polyline class="series" fill="none" stroke="{colour}" stroke-width="2" '
                     f'points="{" ".join(coords)}" data-key="{escape(line.key)}" data-last="{last_y!r}">'
                     f'<title>{label}</title></polyline>'
                     f'<circle cx="{sx(last_x):.1f}" cy="{sy(last_y):.1f}" r="3" fill="{colour}">'
                     f'<title>{label}: {last_y:.4g}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)
