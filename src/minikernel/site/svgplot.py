"""A small line-plot renderer that writes SVG text: no matplotlib, no browser, no fonts to load.

Colours that read on both Material schemes: axes, text and grid use ``currentColor`` (the
page's text colour, dark on the light scheme and light on the dark one); series use mid-tone
hues chosen to keep contrast on white and on Material's slate background. Peers are dashed so
the plot also reads in grey scale. The output is deterministic (same data, same bytes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

# Mid-tone hues (each >= 3:1 contrast against #ffffff and against Material slate #1e2129).
PALETTE = ["#2f7ed8", "#e8710a", "#1e9e6a", "#d6336c", "#8e5bd8", "#b08800", "#0f9bb5", "#c2410c"]
PEER_PALETTE = ["#7a7a7a", "#b5651d", "#5f7f3f", "#8a63b8"]


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    peer: bool = False
    color: str | None = None
    markers: bool = True  # a circle at each point (a roofline's roof has none)


@dataclass
class HLine:
    label: str
    y: float


@dataclass
class Plot:
    title: str
    x_label: str
    y_label: str
    series: list[Series]
    hlines: list[HLine] = field(default_factory=list)
    log_x: bool = True
    log_y: bool = False
    x_tick_format: str = "pow2"  # "pow2" (2^k labels) or "plain"
    width: int = 720
    height: int = 400


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _fmt_tick(v: float, lang: str) -> str:
    from .fmt import number

    if abs(v) >= 100 or v == int(v):
        return number(v, lang, 0)
    return number(v, lang, 1 if abs(v) >= 1 else 2)


def _legend_rows(labels: list[str], left: int, pw: int) -> list[tuple[float, int]]:
    """(x, row) of each legend entry: entries side by side, a new row when one would overflow."""
    out, lx, row = [], float(left), 0
    for label in labels:
        width = 34 + 7.5 * len(label)
        if lx + width > left + pw and lx > left:
            lx, row = float(left), row + 1
        out.append((lx, row))
        lx += width
    return out


def render(plot: Plot, lang: str = "en") -> str:
    W, H = plot.width, plot.height
    left, right, top, bottom = 72, 16, 16, 96
    pw, ph = W - left - right, H - top - bottom
    places = _legend_rows([s.label for s in plot.series], left, pw)
    rows = 1 + max((row for _, row in places), default=0)
    H += max(0, rows - 2) * 18  # the bottom margin holds two rows of legend; grow for more
    xs = [x for s in plot.series for x, _ in s.points]
    ys = [y for s in plot.series for _, y in s.points] + [h.y for h in plot.hlines]
    if not xs:
        raise ValueError(f"plot {plot.title!r} has no points")
    fx = (lambda v: math.log2(v)) if plot.log_x else (lambda v: v)
    x0, x1 = fx(min(xs)), fx(max(xs))
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    if plot.log_y:
        fy = lambda v: math.log10(max(v, 1e-12))
        y0 = math.floor(fy(min(y for y in ys if y > 0)))
        y1 = math.ceil(fy(max(ys)))
    else:
        fy = lambda v: v
        step = _nice_step(max(ys))
        y0, y1 = 0.0, math.ceil(max(ys) * 1.04 / step) * step

    def px(v: float) -> float:
        return left + (fx(v) - x0) / (x1 - x0) * pw

    def py(v: float) -> float:
        return top + ph - (fy(v) - y0) / (y1 - y0) * ph

    out: list[str] = []
    a = out.append
    a(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="mk-plot" viewBox="0 0 {W} {H}" '
        f'role="img" aria-label="{escape(plot.title)}" font-family="inherit" font-size="13">'
    )
    a(f"<title>{escape(plot.title)}</title>")
    a('<g stroke="currentColor" stroke-opacity="0.15" stroke-width="1">')
    # horizontal grid and y ticks
    yticks: list[float] = []
    if plot.log_y:
        yticks = [10.0**k for k in range(int(y0), int(y1) + 1)]
    else:
        step = _nice_step(y1 - y0)
        v = y0
        while v <= y1 + 1e-9:
            yticks.append(v)
            v += step
    for v in yticks:
        a(f'<line x1="{left}" x2="{left + pw}" y1="{py(v):.1f}" y2="{py(v):.1f}"/>')
    a("</g>")
    a('<g fill="currentColor" text-anchor="end">')
    for v in yticks:
        a(f'<text x="{left - 6}" y="{py(v) + 4:.1f}">{escape(_fmt_tick(v, lang))}</text>')
    a("</g>")
    # x ticks
    a('<g fill="currentColor" text-anchor="middle">')
    if plot.log_x:
        k0, k1 = math.ceil(x0), math.floor(x1)
        stride = max(1, math.ceil((k1 - k0 + 1) / 10))
        for k in range(k0, k1 + 1, stride):
            x = left + (k - x0) / (x1 - x0) * pw
            if plot.x_tick_format == "pow2":
                label = f'2<tspan dy="-5" font-size="10">{k}</tspan>'
            else:
                label = escape(_fmt_tick(2.0**k, lang))
            a(f'<text x="{x:.1f}" y="{top + ph + 18}">{label}</text>')
    else:
        step = _nice_step(x1 - x0)
        v = math.ceil(x0 / step) * step
        while v <= x1 + 1e-9:
            a(f'<text x="{px(v):.1f}" y="{top + ph + 18}">{escape(_fmt_tick(v, lang))}</text>')
            v += step
    a("</g>")
    # axes
    a(
        f'<path d="M{left},{top} V{top + ph} H{left + pw}" fill="none" stroke="currentColor" '
        'stroke-opacity="0.6"/>'
    )
    a(
        f'<text x="{left + pw / 2}" y="{top + ph + 40}" text-anchor="middle" '
        f'fill="currentColor">{escape(plot.x_label)}</text>'
    )
    a(
        f'<text transform="translate(16,{top + ph / 2}) rotate(-90)" text-anchor="middle" '
        f'fill="currentColor">{escape(plot.y_label)}</text>'
    )
    # ceilings
    for h in plot.hlines:
        y = py(h.y)
        a(
            f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="currentColor" '
            'stroke-width="1.5" stroke-dasharray="2 4" stroke-opacity="0.8"/>'
        )
        a(
            f'<text x="{left + 6}" y="{y - 6:.1f}" fill="currentColor" font-size="12">'
            f"{escape(h.label)}</text>"
        )
    # series
    own = iter(PALETTE)
    peers = iter(PEER_PALETTE)
    legend = []
    for s in plot.series:
        color = s.color or next(peers if s.peer else own, "#888888")
        pts = sorted(s.points)
        d = " ".join(
            f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(pts)
        )
        dash = ' stroke-dasharray="6 4"' if s.peer else ""
        a(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="2.2"{dash}/>')
        for x, y in pts if s.markers else []:
            a(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.8" fill="{color}"/>')
        legend.append((s.label, color, s.peer))
    # legend below the plot, in rows
    for (label, color, peer), (lx, row) in zip(legend, places):
        ly = top + ph + 62 + 18 * row
        dash = ' stroke-dasharray="6 4"' if peer else ""
        a(
            f'<line x1="{lx}" x2="{lx + 22}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" '
            f'stroke-width="2.5"{dash}/>'
        )
        a(f'<text x="{lx + 28}" y="{ly}" fill="currentColor">{escape(label)}</text>')
    a("</svg>")
    return "".join(out)
