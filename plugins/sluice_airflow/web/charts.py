"""The web view's charts, drawn on the server as inline SVG: no script, no library to serve,
nothing fetched from elsewhere (the Airflow host may be offline). Pure functions from the
shapes of ``runtime.jobmaster.metrics_history`` to markup: a figure with its title, the SVG,
an HTML legend (long vertex names wrap there, not inside the drawing) and a note.

What a browser test reads: ``figure.chart[data-chart=<id>]``, each series a
``g.series[data-series=<name>][data-points=<n>]`` holding its path and one ``circle`` per point
(its value on hover, ``data-x`` its tick, ``data-y`` its value), or in a stacked chart
(``g.series.stack``) one ``rect`` per point, each run's start a ``g.run[data-run=<run id>]``, each bar a
``g.bar[data-label][data-value][data-part]``.
"""
from __future__ import annotations

import math
import re

from markupsafe import Markup, escape

from runtime.jobmaster.metrics_history import BYTES, MS, RECORDS, UNIT_NAMES, Bar, BarChart, Chart

WIDTH, HEIGHT = 640, 230
LEFT, RIGHT, TOP, BOTTOM = 70, 14, 24, 36      # room for the y labels and unit, the x ticks and the x title
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1", "#edc948", "#9c755f",
           "#ff9da7", "#bab0ac")                # Tableau 10: told apart by most colour-blind readers
MAX_BARS = 60
BAR_LABEL = 270                                 # the bar chart's label column ...
LABEL_CHARS = 42                                # ... holds this many characters at its font


def fmt(value: float, unit: str) -> str:
    """A value as an axis or a tooltip says it: 1.5k records, 2.3 s, 14.1 KiB."""
    if value < 0:
        return "-" + fmt(-value, unit)
    if unit == MS:
        for limit, div, name in ((1000, 1, "ms"), (60_000, 1000, "s"), (3_600_000, 60_000, "min"),
                                 (86_400_000, 3_600_000, "h")):
            if value < limit:
                return f"{_short(value / div)} {name}"
        return f"{_short(value / 86_400_000)} d"
    if unit == BYTES:
        for power, name in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
            if value >= 1024 ** power:
                return f"{_short(value / 1024 ** power)} {name}"
        return f"{value:.0f} B"
    for power, name in ((9, "G"), (6, "M"), (3, "k")):
        if value >= 10 ** power:
            return f"{_short(value / 10 ** power)}{name}"
    return _short(value)


def said(value: float, unit: str) -> str:
    """A value with its unit, as a tooltip says it: ``fmt`` names time and bytes, not records."""
    return fmt(value, unit) + (" records" if unit == RECORDS else "")


def short_label(bar: Bar, limit: int = LABEL_CHARS) -> str:
    """A bar's label in ``limit`` characters: the middle of a long operator name gives way, the
    subtask stays whole, so the bars of one operator never read alike."""
    if len(bar.label) <= limit:
        return bar.label
    if not bar.subtask:
        return bar.label[:limit - 1] + "…"
    suffix = f" ({bar.subtask})"
    return _middle(bar.name, max(8, limit - len(suffix))) + suffix


def _middle(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = (limit - 1) * 3 // 5
    return text[:head].rstrip() + "…" + text[len(text) - (limit - 1 - head):].lstrip()


def breakable(text) -> Markup:
    """An id or a path that wraps only after a separator when its column is narrow, never inside
    a word: ``manual__2026-01-01T00:00:00`` breaks at ``__``, ``-`` and ``:``."""
    return Markup(re.sub(r"([_\-:./+@]+)", r"\1<wbr>", str(escape(text))))


def _short(v: float) -> str:
    return f"{v:.0f}" if v >= 100 or v == int(v) else f"{v:.1f}".rstrip("0").rstrip(".")


def _step(span: float, unit: str) -> float:
    """A round step that cuts ``span`` into about 4: 1, 2 or 5 times a power of ten of the unit
    ``fmt`` will say (KiB, MiB...; s, min, h, d)."""
    if unit == BYTES:
        base = 1024 ** max(0, math.floor(math.log(span, 1024))) if span >= 1024 else 1
    elif unit == MS:
        base = max((b for b in (1, 1000, 60_000, 3_600_000, 86_400_000) if span >= 2 * b), default=1)
    else:
        base = 1
    raw = span / 4 / base
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw) * base


def line_chart(chart: Chart) -> Markup:
    """A chart over epochs or checkpoints: a line per series, or a stacked bar per x (``stacked``)."""
    series = [s for s in chart.series if s.points]
    head = f'<figure class="chart" id="chart-{escape(chart.id)}" data-chart="{escape(chart.id)}">' \
           f'<figcaption>{escape(chart.title)}</figcaption>'
    if not series:
        return Markup(f'{head}<p class="muted empty">{escape(chart.empty)}</p></figure>')
    xs = sorted({p.x for s in series for p in s.points})
    if chart.stacked:
        totals: dict = {}
        for s in series:
            for p in s.points:
                totals[p.x] = totals.get(p.x, 0.0) + p.y
        ys = list(totals.values())
    else:
        ys = [p.y for s in series for p in s.points]
    lo, hi = min(0.0, min(ys)), max(ys)
    step = _step((hi - lo) or max(abs(hi), 1), chart.unit)
    lo, hi = math.floor(lo / step) * step, max(math.ceil(hi / step) * step, lo + step)
    # Bars stand on their x: half a bar's room either side; a line of one point needs some too.
    x_lo, x_hi = (xs[0] - 0.5, xs[-1] + 0.5) if len(xs) == 1 or chart.stacked else (xs[0], xs[-1])

    def sx(x: float) -> float:
        return LEFT + (x - x_lo) / (x_hi - x_lo) * (WIDTH - LEFT - RIGHT)

    def sy(y: float) -> float:
        return TOP + (hi - y) / (hi - lo) * (HEIGHT - TOP - BOTTOM)

    parts = [f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(chart.title)}">']
    n_steps = round((hi - lo) / step)
    for i in range(n_steps + 1):         # grid lines and the y axis' labels
        y = lo + i * step
        parts.append(f'<g class="grid"><line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(y):.1f}" y2="{sy(y):.1f}"/>'
                     f'<text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{escape(fmt(y, chart.unit))}</text></g>')
    ticks = {p.x: p.tick for s in series for p in s.points}
    shown = [xs[round(j * (len(xs) - 1) / 6)] for j in range(7)] if len(xs) > 7 else xs
    for x in dict.fromkeys(shown):
        parts.append(f'<text class="tick" x="{sx(x):.1f}" y="{HEIGHT - BOTTOM + 15}" text-anchor="middle">'
                     f'{escape(ticks[x])}</text>')
    parts.append(f'<text class="axis-title" x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 4}" '
                 f'text-anchor="middle">{escape(chart.x_title)}</text>')
    parts.append(f'<text class="axis-title y-unit" x="4" y="{TOP - 12}">'      # what the y axis counts
                 f'{escape(UNIT_NAMES.get(chart.unit, chart.unit))}</text>')
    labelled = -math.inf
    for x, run_id in chart.runs:        # where each run starts: a dashed line, named while there is room
        px = max(LEFT, sx(x - 0.5)) if x > xs[0] else LEFT
        label = f'<text x="{px + 3:.1f}" y="{TOP + 9}">{escape(run_id)}</text>' if px - labelled > 150 else ""
        labelled = px if label else labelled
        parts.append(f'<g class="run" data-run="{escape(run_id)}"><title>run {escape(run_id)}</title>'
                     f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}"/>{label}</g>')
    draw = _stacks if chart.stacked else _lines
    parts.extend(draw(chart, series, sx, sy, (sx(x_hi) - sx(x_lo)) / (x_hi - x_lo)))
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}"/></svg>')
    legend = "".join(f'<li data-series="{escape(s.name)}"><span class="swatch" style="background:'
                     f'{_color(i)}"></span>{escape(s.name)}</li>' for i, s in enumerate(series))
    note = f'<p class="muted note">{escape(chart.note)}</p>' if chart.note else ""
    return Markup(f'{head}{"".join(parts)}<ul class="legend">{legend}</ul>{note}</figure>')


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)] if i < 2 * len(PALETTE) else "#8c8c8c"


def _point_title(chart: Chart, name: str, p) -> str:
    return (f'<title>{escape(name)}: {escape(said(p.y, chart.unit))} at {escape(chart.x_title)} '
            f'{escape(p.tick)}</title>')


def _lines(chart: Chart, series: list, sx, sy, unit_width: float) -> list:
    out = []
    for i, s in enumerate(series):
        color = _color(i)
        path = " ".join(f"{'M' if j == 0 else 'L'}{sx(p.x):.1f},{sy(p.y):.1f}" for j, p in enumerate(s.points))
        dots = "".join(f'<circle cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="2.5" data-x="{escape(p.tick)}" '
                       f'data-y="{p.y}">{_point_title(chart, s.name, p)}</circle>' for p in s.points)
        out.append(f'<g class="series" data-series="{escape(s.name)}" data-points="{len(s.points)}" '
                   f'stroke="{color}" fill="{color}"><path d="{path}" fill="none"/>{dots}</g>')
    return out


def _stacks(chart: Chart, series: list, sx, sy, unit_width: float) -> list:
    """Each series a segment of each x's bar, the first at the bottom; past the palette's ten
    colours they come again lighter, so up to twenty parts are told apart."""
    width = max(1.0, min(24.0, unit_width * 0.8))
    base: dict = {}
    out = []
    for i, s in enumerate(series):
        segments = []
        for p in s.points:
            bottom = base.get(p.x, 0.0)
            base[p.x] = bottom + p.y
            top_px, bottom_px = sy(bottom + p.y), sy(bottom)
            segments.append(f'<rect x="{sx(p.x) - width / 2:.1f}" y="{top_px:.1f}" width="{width:.1f}" '
                            f'height="{max(0.0, bottom_px - top_px):.1f}" data-x="{escape(p.tick)}" '
                            f'data-y="{p.y}">{_point_title(chart, s.name, p)}</rect>')
        opacity = ' fill-opacity="0.55"' if len(PALETTE) <= i < 2 * len(PALETTE) else ""
        out.append(f'<g class="series stack" data-series="{escape(s.name)}" data-points="{len(s.points)}" '
                   f'fill="{_color(i)}"{opacity}>{"".join(segments)}</g>')
    return out


def bar_chart(chart: BarChart, max_bars: int = MAX_BARS) -> Markup:
    head = f'<figure class="chart bars" id="chart-{escape(chart.id)}" data-chart="{escape(chart.id)}">' \
           f'<figcaption>{escape(chart.title)}</figcaption>'
    if not chart.bars:
        return Markup(f'{head}<p class="muted empty">{escape(chart.empty)}</p></figure>')
    kept = set(sorted(range(len(chart.bars)), key=lambda i: -chart.bars[i].value)[:max_bars])
    bars = [b for i, b in enumerate(chart.bars) if i in kept]
    top = max(b.value for b in bars) or 1
    row, width = 20, WIDTH - BAR_LABEL - 70
    parts = [f'<svg viewBox="0 0 {WIDTH} {row * len(bars) + 8}" role="img" aria-label="{escape(chart.title)}">']
    for i, b in enumerate(bars):
        y = 4 + i * row
        label = short_label(b)
        whole, dark = b.value / top * width, b.part / top * width
        parts.append(
            f'<g class="bar" data-label="{escape(b.label)}" data-value="{b.value}" data-part="{b.part}">'
            f'<title>{escape(b.title)}</title>'
            f'<text x="{BAR_LABEL - 6}" y="{y + 13}" text-anchor="end">{escape(label)}</text>'
            f'<rect class="whole" x="{BAR_LABEL}" y="{y + 2}" width="{whole:.1f}" height="{row - 6}"/>'
            f'<rect class="part" x="{BAR_LABEL}" y="{y + 2}" width="{dark:.1f}" height="{row - 6}"/>'
            f'<text x="{BAR_LABEL + whole + 5:.1f}" y="{y + 13}">{escape(fmt(b.value, chart.unit))}</text></g>')
    parts.append("</svg>")
    legend = _bar_legend(chart.legend)
    note = (f'<p class="muted note">The {len(bars)} largest of {len(chart.bars)} bars.</p>'
            if len(bars) < len(chart.bars) else "")
    return Markup(f'{head}{"".join(parts)}{legend}{note}</figure>')


def _bar_legend(legend: tuple) -> str:
    if not legend:
        return ""
    dark, light = legend
    return (f'<ul class="legend"><li><span class="swatch part"></span>{escape(dark)}</li>'
            f'<li><span class="swatch whole"></span>{escape(light)}</li></ul>')

