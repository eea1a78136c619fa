"""Plots as inline SVG text, drawn with matplotlib and byte-identical for identical data.

matplotlib (the `report` extra) draws without a display and writes SVG with
no JavaScript, so the page needs nothing fetched.  Determinism: every figure
is drawn from matplotlib's defaults plus the fixed settings below (a user's
matplotlibrc never enters), with a hash salt per figure (the SVG's element
ids come from it, and distinct salts keep ids unique across the figures of
one page), no date in the metadata, and text kept as text (`svg.fonttype:
none`, no embedded glyphs).  Series are drawn in the order given.
"""
from __future__ import annotations

import io
import re

FIXED = {"svg.fonttype": "none", "svg.image_inline": True, "font.family": "DejaVu Sans", "font.size": 9.0,
         "figure.dpi": 72.0, "savefig.dpi": 72.0, "axes.grid": True, "grid.alpha": 0.3, "lines.linewidth": 1.4,
         "path.simplify": False, "axes.prop_cycle": None}
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")
MAX_POINTS = 1000  # a CDF of more values is drawn through this many evenly spaced order statistics


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed (the message says how to install it)."""


def _matplotlib():
    try:
        import matplotlib
        from matplotlib.backends.backend_svg import FigureCanvasSVG
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotUnavailable("the report needs matplotlib: pip install 'kvreplay[report]'") from None
    return matplotlib, Figure, FigureCanvasSVG


def render(salt: str, draw, size=(6.4, 3.0)) -> str:
    """`draw(axes)` on a new figure; the figure as an inline <svg> element (no XML prolog)."""
    matplotlib, Figure, FigureCanvasSVG = _matplotlib()
    from cycler import cycler

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        matplotlib.rcParams.update({**FIXED, "axes.prop_cycle": cycler(color=COLORS), "svg.hashsalt": salt})
        figure = Figure(figsize=size)
        FigureCanvasSVG(figure)
        axes = figure.add_subplot()
        draw(axes)
        figure.tight_layout()
        out = io.StringIO()
        figure.savefig(out, format="svg", metadata={"Date": None, "Creator": "kvreplay"})
    text = out.getvalue()
    # (the RDF block names dublincore URLs: nothing to fetch, but a page that names none is simpler to check)
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S).strip()


def _thin(values: list[float]) -> tuple[list[float], list[float]]:
    """Sorted values and their cumulative fractions, at most MAX_POINTS of them."""
    values = sorted(values)
    n = len(values)
    if n <= MAX_POINTS:
        return values, [(i + 1) / n for i in range(n)]
    picks = [round(i * (n - 1) / (MAX_POINTS - 1)) for i in range(MAX_POINTS)]
    return [values[i] for i in picks], [(i + 1) / n for i in picks]


def cdf(salt: str, series: list[tuple[str, list[float]]], xlabel: str) -> str:
    """Empirical CDFs, one step line per (label, values)."""
    def draw(ax):
        for label, values in series:
            if values:
                xs, ys = _thin(values)
                ax.step(xs, ys, where="post", label=f"{label} (n={len(values)})")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.02)
        ax.legend(loc="lower right")
    return render(salt, draw)


def lines(salt: str, xs: list[float], series: list[tuple[str, list[float]]], xlabel: str, ylabel: str,
          step: bool = False) -> str:
    def draw(ax):
        for label, ys in series:
            (ax.step(xs, ys, where="post", label=label) if step else ax.plot(xs, ys, label=label))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if len(series) > 1 or series and series[0][0]:
            ax.legend(loc="best", fontsize=7)
    return render(salt, draw)


def stacked_bars(salt: str, xs: list[float], width: float, series: list[tuple[str, list[float]]], xlabel: str,
                 ylabel: str) -> str:
    def draw(ax):
        bottom = [0.0] * len(xs)
        for label, ys in series:
            ax.bar(xs, ys, width=width, bottom=bottom, align="edge", label=label)
            bottom = [b + y for b, y in zip(bottom, ys)]
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend(loc="best", fontsize=7)
    return render(salt, draw)


def bars(salt: str, labels: list[str], series: list[tuple[str, list[float]]], ylabel: str) -> str:
    """Grouped bars: one group per label, one bar per series."""
    def draw(ax):
        width = 0.8 / max(1, len(series))
        for k, (name, values) in enumerate(series):
            ax.bar([i + k * width for i in range(len(labels))], values, width=width, label=name)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels, rotation=20, ha="right")
        ax.set_ylabel(ylabel)
        if len(series) > 1:
            ax.legend(loc="best", fontsize=7)
    return render(salt, draw)


def salt_of(title: str) -> str:
    """A figure's hash salt from its title (ids then differ between the figures of a page)."""
    return "kvreplay-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
