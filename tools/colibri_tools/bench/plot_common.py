"""What colibri-plot's modules share: its error and matplotlib, loaded on
first use with a headless backend."""
from __future__ import annotations

from ..errors import ColibriError


class PlotError(ColibriError):
    """The input has nothing to draw, or matplotlib is missing."""


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlotError("colibri-plot needs matplotlib: pip install 'colibri-tools[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
