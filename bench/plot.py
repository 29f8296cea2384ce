"""A dependency-free SVG line chart: cost against scale, one panel per benchmark."""
from __future__ import annotations

from html import escape

COLOURS = ("#2f7ed8", "#f28f43", "#3aa05c", "#8e5ea2")


def panel(title: str, x_label: str, y_label: str, series: dict, left: float, top: float,
          width: float = 420, height: float = 260) -> str:
    """series: {name: [(x, y), ...]}; axes start at 0."""
    points = [point for values in series.values() for point in values]
    x_max = max(point[0] for point in points) or 1
    y_max = max(point[1] for point in points) * 1.15 or 1
    plot_left, plot_top, plot_width, plot_height = left + 60, top + 30, width - 80, height - 80

    def at(x, y):
        return plot_left + x / x_max * plot_width, plot_top + plot_height - y / y_max * plot_height

    parts = [f'<text x="{left + width / 2}" y="{top + 16}" text-anchor="middle" font-weight="bold">{escape(title)}</text>',
             f'<line x1="{plot_left}" y1="{plot_top + plot_height}" x2="{plot_left + plot_width}" y2="{plot_top + plot_height}" stroke="#444"/>',
             f'<line x1="{plot_left}" y1="{plot_top}" x2="{plot_left}" y2="{plot_top + plot_height}" stroke="#444"/>',
             f'<text x="{plot_left + plot_width / 2}" y="{top + height - 12}" text-anchor="middle">{escape(x_label)}</text>',
             f'<text transform="translate({left + 14},{plot_top + plot_height / 2}) rotate(-90)" text-anchor="middle">{escape(y_label)}</text>']
    for step in range(5):
        y_value = y_max * step / 4
        y = at(0, y_value)[1]
        parts.append(f'<text x="{plot_left - 6}" y="{y + 4}" text-anchor="end" font-size="11">{y_value:.3g}</text>')
    for x_value in sorted({point[0] for point in points}):
        x = at(x_value, 0)[0]
        parts.append(f'<text x="{x}" y="{plot_top + plot_height + 16}" text-anchor="middle" font-size="11">{x_value:g}</text>')
    for index, (name, values) in enumerate(series.items()):
        colour = COLOURS[index % len(COLOURS)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in (at(*point) for point in sorted(values)))
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for point in values:
            x, y = at(*point)
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        parts.append(f'<text x="{plot_left + 10}" y="{plot_top + 14 + index * 15}" fill="{colour}" font-size="12">{escape(name)}</text>')
    return "\n".join(parts)


def chart(panels: list) -> str:
    """panels: [(title, x_label, y_label, series)], laid out side by side."""
    width = 440 * len(panels)
    body = "\n".join(panel(*spec, left=10 + 440 * index, top=10) for index, spec in enumerate(panels))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="290" font-family="sans-serif" font-size="13">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n{body}\n</svg>\n')
