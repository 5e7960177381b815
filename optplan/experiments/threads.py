"""BLAS threads for sweep workers, agent runs and ``optplan bench``.

Threaded OpenBLAS oversubscribes a loaded machine: two sweep workers each starting one
BLAS thread per core fight for the cores (an index agent at S = 300 ran 34 steps/s with the
default threads and 192 with one). The small products of tabular planning gain nothing from
threads, so workers, :func:`optplan.experiments.run` and the benchmarks run with one BLAS
thread, set by threadpoolctl (the same limit for every BLAS that NumPy and SciPy loaded).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

from .._checks import check_int

__all__ = ["blas_threads", "one_blas_thread", "describe"]


@contextlib.contextmanager
def blas_threads(limit: int | None = 1) -> Iterator[None]:
    """Run the ``with`` block with at most ``limit`` BLAS threads (``None``: leave them as
    they are); :func:`describe` tells the setting in force."""
    if limit is None:
        yield
        return
    limit = check_int("blas threads", limit, 1)
    with _controller().limit(limits=limit, user_api="blas"):
        yield


@functools.cache
def _controller():
    """threadpoolctl's controller of the BLAS libraries loaded, made once per process (finding
    them reads the process's memory map: about 2 ms, as long as a short agent run). It limits
    the libraries loaded when it was made: SciPy's BLAS (its own OpenBLAS in the wheels, used
    by optplan.dp's factorizations) is loaded first."""
    import scipy.linalg  # noqa: F401
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread(fn: Callable) -> Callable:
    """Decorator: ``fn`` runs with one BLAS thread (:func:`blas_threads`)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with blas_threads(1):
            return fn(*args, **kwargs)

    return wrapper


def describe(limit: int | None = None) -> dict:
    """``{"threads": n, "by": ..., "libraries": [...]}``: the BLAS threads now in force (the
    largest over the loaded BLAS libraries), ``by`` ``"threadpoolctl"`` when ``limit`` set
    them and ``"library default"`` otherwise."""
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    threads = max((int(i["num_threads"]) for i in blas), default=None)
    return {
        "threads": threads,
        "by": "threadpoolctl" if limit is not None else "library default",
        "libraries": sorted(
            {f"{i['internal_api']} {i.get('version') or ''}".strip() for i in blas}
        ),
    }
