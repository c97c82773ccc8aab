"""One figure style for the whole book.

Call :func:`style` once at the top of a lecture. Figures get a white background on purpose:
the site has a dark theme, and a chart on an opaque white card stays legible in both.
Colours are the Okabe-Ito palette, distinguishable with the common colour-vision deficiencies.
"""

from __future__ import annotations

import matplotlib as mpl

#: Okabe-Ito colours, by role.
BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY, YELLOW, BLACK = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
PALETTE = (BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY, YELLOW, BLACK)
GREY = "#8a8a8a"
#: The three confidence scores of Episode 3, always in the same colours.
SCORE_COLOURS = {"max probability": BLUE, "entropy": VERMILLION, "margin": GREEN}


def style() -> None:
    """Apply the book's matplotlib style (sizes, fonts, colours, white background)."""
    mpl.rcParams.update({
        "figure.figsize": (6.4, 3.8),
        "figure.dpi": 110,
        "savefig.dpi": 110,
        "figure.facecolor": "white",
        "axes.facecolor": "white",
        "savefig.facecolor": "white",
        "axes.edgecolor": "#333333",
        "axes.labelcolor": "#222222",
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.color": "#e6e6e6",
        "grid.linewidth": 0.8,
        "xtick.color": "#333333",
        "ytick.color": "#333333",
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "legend.fontsize": 9,
        "legend.frameon": False,
        "lines.linewidth": 2.0,
        "font.size": 10,
        "axes.prop_cycle": mpl.cycler(color=list(PALETTE)),
        "figure.constrained_layout.use": True,
    })
