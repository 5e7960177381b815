"""Figures: matplotlib helpers (:mod:`.plots`: regret bands, scaling, heatmaps) and the
figures of a sweep's result directory (:mod:`.figures`, behind ``optplan plot``).

Matplotlib is optional (``pip install 'optplan[plot]'``) and imported only when drawing.
"""

from . import figures, plots

__all__ = ["plots", "figures"]
