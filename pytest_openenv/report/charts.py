"""Charts of a run as inline SVG text: no dependency, no script, no network.

Each function takes plain numbers and returns one ``<svg>`` element that scales to
its container (``viewBox``) and carries a ``<title>`` and ``aria-label`` naming what it
shows. Only numbers and our own labels reach the markup, and every label is XML-escaped.
A series of any length is drawn with a bounded number of points (``MAX_POINTS``), so a
100,000-episode run gives a chart of the same size as a 1,000-episode one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from xml.sax.saxutils import escape

from .stats import wilson_interval

WIDTH, HEIGHT = 420, 220
LEFT, RIGHT, TOP, BOTTOM = 46, 12, 28, 36
MAX_POINTS = 400
MAX_BINS = 24

OUTCOME_COLORS = {
    "passed": "#2e7d32",
    "failed": "#c62828",
    "errored": "#ef6c00",
    "skipped": "#9e9e9e",
}
BAR = "#3f6fb5"
#: the one stylesheet of every chart (the report page allows it by its hash)
STYLE = (
    ".axis{stroke:#555;stroke-width:1}.grid{stroke:#ddd;stroke-width:.5}"
    ".tick{font:10px sans-serif;fill:#444}.label{font:11px sans-serif;fill:#333}"
    ".title{font:bold 12px sans-serif;fill:#222}.empty{font:12px sans-serif;fill:#777}"
)
BAND = "#9fc1ea"


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _tick(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 10_000:
        return f"{value / 1000:.0f}k"
    if abs(value) >= 1000:
        return f"{value / 1000:.1f}k"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3g}"


class Frame:
    """A plot area mapping data (x0..x1, y0..y1) onto the SVG's inner rectangle."""

    def __init__(self, x0: float, x1: float, y0: float, y1: float) -> None:
        self.x0, self.x1 = x0, x1 if x1 > x0 else x0 + 1
        self.y0, self.y1 = y0, y1 if y1 > y0 else y0 + 1

    def x(self, value: float) -> float:
        inner = WIDTH - LEFT - RIGHT
        return LEFT + (value - self.x0) / (self.x1 - self.x0) * inner

    def y(self, value: float) -> float:
        inner = HEIGHT - TOP - BOTTOM
        return HEIGHT - BOTTOM - (value - self.y0) / (self.y1 - self.y0) * inner

    def axes(self, x_label: str, y_label: str, y_ticks: Sequence[float]) -> list[str]:
        base = HEIGHT - BOTTOM
        parts = [
            f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" class="axis"/>',
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}" class="axis"/>',
        ]
        for tick in y_ticks:
            y = _num(self.y(tick))
            parts.append(
                f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" class="grid"/>'
                f'<text x="{LEFT - 4}" y="{y}" class="tick" text-anchor="end" '
                f'dominant-baseline="middle">{escape(_tick(tick))}</text>'
            )
        middle = (self.x0 + self.x1) / 2
        if self.x1 - self.x0 >= 10:
            middle = round(middle)
        for tick in (self.x0, middle, self.x1):
            parts.append(
                f'<text x="{_num(self.x(tick))}" y="{base + 14}" class="tick" '
                f'text-anchor="middle">{escape(_tick(round(tick, 3)))}</text>'
            )
        parts.append(
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 4}" class="label" '
            f'text-anchor="middle">{escape(x_label)}</text>'
        )
        parts.append(
            f'<text x="12" y="{(TOP + base) / 2}" class="label" text-anchor="middle" '
            f'transform="rotate(-90 12 {(TOP + base) / 2})">{escape(y_label)}</text>'
        )
        return parts


def _svg(name: str, title: str, body: list[str]) -> str:
    label = escape(title, {'"': "&quot;"})
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'class="chart" data-chart="{escape(name)}" role="img" aria-label="{label}">'
        f"<title>{escape(title)}</title>"
        f"<style>{STYLE}</style>"
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#fff"/>'
        f'<text x="{LEFT}" y="16" class="title">{escape(title)}</text>' + "".join(body) + "</svg>"
    )


def _empty(name: str, title: str, why: str = "no episode ran") -> str:
    return _svg(
        name,
        title,
        [
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" class="empty" text-anchor="middle">'
            f"{escape(why)}</text>"
        ],
    )


def _nice_ticks(top: float, count: int = 4) -> list[float]:
    if top <= 0:
        return [0.0]
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] + step <= top * 1.0001:
        ticks.append(ticks[-1] + step)
    return ticks


def _bars(
    name: str,
    title: str,
    edges: list[tuple[float, float]],
    counts: list[int],
    x_label: str,
    colors: list[str] | None = None,
) -> str:
    top = max(counts, default=0)
    frame = Frame(edges[0][0], edges[-1][1], 0, top * 1.1 if top else 1)
    body = frame.axes(x_label, "episodes", _nice_ticks(top))
    for index, ((low, high), count) in enumerate(zip(edges, counts, strict=True)):
        if not count:
            continue
        x, x_end = frame.x(low), frame.x(high)
        y = frame.y(count)
        color = colors[index] if colors else BAR
        body.append(
            f'<rect x="{_num(x + 0.5)}" y="{_num(y)}" width="{_num(max(x_end - x - 1, 0.5))}" '
            f'height="{_num(HEIGHT - BOTTOM - y)}" fill="{color}">'
            f"<title>{escape(_tick(low))}-{escape(_tick(high))}: {count}</title></rect>"
        )
    return _svg(name, title, body)


def histogram(name: str, title: str, values: Sequence[float], x_label: str) -> str:
    """Counts of ``values`` in up to ``MAX_BINS`` equal bins (integers: one bin per value)."""
    if not values:
        return _empty(name, title)
    low, high = min(values), max(values)
    integral = all(float(v).is_integer() for v in values)
    if integral and high - low + 1 <= MAX_BINS:
        edges = [(v - 0.5, v + 0.5) for v in range(int(low), int(high) + 1)]
        counter = Counter(int(v) for v in values)
        counts = [counter.get(int(a + 0.5), 0) for a, _ in edges]
        return _bars(name, title, edges, counts, x_label)
    if high == low:
        edges = [(low - 0.5, high + 0.5)]
        return _bars(name, title, edges, [len(values)], x_label)
    bins = min(MAX_BINS, max(1, int(math.sqrt(len(values))) + 1))
    width = (high - low) / bins
    counts = [0] * bins
    for value in values:
        counts[min(int((value - low) / width), bins - 1)] += 1
    edges = [(low + i * width, low + (i + 1) * width) for i in range(bins)]
    return _bars(name, title, edges, counts, x_label)


def outcomes(counts: dict[str, int]) -> str:
    """Episodes per outcome as bars in the outcome colors."""
    title = "Outcomes"
    names = [name for name in OUTCOME_COLORS if counts.get(name)]
    if not names:
        return _empty("outcomes", title)
    top = max(counts[name] for name in names)
    frame = Frame(0, len(names), 0, top * 1.15)
    base = HEIGHT - BOTTOM
    body = [
        f'<line x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}" class="axis"/>',
    ]
    for index, name in enumerate(names):
        count = counts[name]
        x, x_end = frame.x(index + 0.15), frame.x(index + 0.85)
        y = frame.y(count)
        body.append(
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(x_end - x)}" '
            f'height="{_num(base - y)}" fill="{OUTCOME_COLORS[name]}">'
            f"<title>{escape(name)}: {count}</title></rect>"
            f'<text x="{_num((x + x_end) / 2)}" y="{_num(y - 4)}" class="tick" '
            f'text-anchor="middle">{count}</text>'
            f'<text x="{_num((x + x_end) / 2)}" y="{base + 14}" class="label" '
            f'text-anchor="middle">{escape(name)}</text>'
        )
    return _svg("outcomes", title, body)


def _thin(count: int) -> list[int]:
    """Indexes 0..count-1 to draw: all of them, or ``MAX_POINTS`` spread evenly."""
    if count <= MAX_POINTS:
        return list(range(count))
    step = (count - 1) / (MAX_POINTS - 1)
    return sorted({round(i * step) for i in range(MAX_POINTS)})


def running_pass_rate(passed: Sequence[bool], confidence: float = 0.95) -> str:
    """The pass rate after each episode (in episode order) with its Wilson interval."""
    title = f"Running pass rate ({100 * confidence:g}% Wilson interval)"
    if not passed:
        return _empty("pass-rate", title)
    total = len(passed)
    frame = Frame(1, max(total, 2), 0, 1)
    body = frame.axes("episodes", "pass rate", [0, 0.25, 0.5, 0.75, 1.0])
    wanted = set(_thin(total))
    upper, lower, line = [], [], []
    running = 0
    rate = low = high = 0.0
    for index, ok in enumerate(passed):
        running += int(ok)
        if index in wanted:
            rate = running / (index + 1)
            low, high = wilson_interval(running, index + 1, confidence)
            x = _num(frame.x(index + 1))
            upper.append(f"{x},{_num(frame.y(high))}")
            lower.append(f"{x},{_num(frame.y(low))}")
            line.append(f"{x},{_num(frame.y(rate))}")
    band = " ".join(upper + lower[::-1])
    body.append(f'<polygon points="{band}" fill="{BAND}" opacity="0.6"/>')
    body.append(
        f'<polyline points="{" ".join(line)}" fill="none" stroke="{BAR}" stroke-width="1.5"/>'
    )
    body.append(
        f'<text x="{WIDTH - RIGHT}" y="{TOP - 4}" class="tick" text-anchor="end">'
        f"{100 * rate:.1f}% [{100 * low:.1f}-{100 * high:.1f}] n={total}</text>"
    )
    return _svg("pass-rate", title, body)


def pass_at_k_curve(points: Sequence[tuple[int, float]]) -> str:
    """pass@k for k = 1..K (unbiased estimator over seeds)."""
    title = "pass@k over repeats"
    if not points:
        return _empty("pass-at-k", title, "no seed ran more than once")
    ks = [k for k, _ in points]
    frame = Frame(min(ks), max(max(ks), min(ks) + 1), 0, 1)
    body = frame.axes("k", "pass@k", [0, 0.25, 0.5, 0.75, 1.0])
    coords = [f"{_num(frame.x(k))},{_num(frame.y(v))}" for k, v in points]
    body.append(
        f'<polyline points="{" ".join(coords)}" fill="none" stroke="{BAR}" stroke-width="1.5"/>'
    )
    for k, value in points:
        body.append(
            f'<circle cx="{_num(frame.x(k))}" cy="{_num(frame.y(value))}" r="3" fill="{BAR}">'
            f"<title>pass@{k}: {100 * value:.1f}%</title></circle>"
        )
    return _svg("pass-at-k", title, body)
