"""Figures: matplotlib helpers (:mod:`.plots`: regret bands, heatmaps; :mod:`.scaling`) and the
figures of a sweep's result directory (:mod:`.figures`, behind ``optplan plot``).

Matplotlib is optional (``pip install 'optplan[plot]'``) and imported only when drawing.
"""

from . import figures, plots, scaling

__all__ = ["plots", "scaling", "figures"]
