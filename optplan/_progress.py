"""Progress on stderr that suits where stderr goes: the one helper every progress site uses.

On a terminal, a tqdm bar redrawn in place. Anywhere else (a log file, a pipe, a CI job's
output), redrawing in place would write a ``\\r`` update several times a second into the file:
:class:`LineProgress` writes instead one plain line at most every :data:`INTERVAL` seconds and
one when it closes, each ending in a newline, in tqdm's wording
(``sweep: 40% 8/20 [00:12<00:18, 0.66task/s]``).

Used by ``optplan run`` (over seeds), ``optplan sweep`` (over tasks), ``optplan bench`` (over
rows), ``optplan.experiments.run(progress=True)`` (over steps or episodes) and
``optplan.verify(progress=True)`` (over instances).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from typing import IO, Any

__all__ = ["INTERVAL", "LineProgress", "is_terminal", "progress_bar"]

#: Seconds between two lines of progress when stderr is not a terminal.
INTERVAL = 10.0


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (``False`` when it cannot say)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def progress_bar(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str | None = None,
    unit: str = "it",
    disable: bool = False,
    file: IO[str] | None = None,
    smoothing: float = 0.1,
):
    """A progress bar over ``iterable`` (or updated by hand up to ``total``) on ``file``
    (default ``sys.stderr``): a tqdm bar on a terminal, a :class:`LineProgress` elsewhere,
    nothing with ``disable``. Both have tqdm's ``update``, ``set_postfix``, ``write``,
    ``close``, ``n``, iteration and ``with``."""
    file = sys.stderr if file is None else file
    if disable or is_terminal(file):
        from tqdm.auto import tqdm

        return tqdm(
            iterable,
            total=total,
            desc=desc,
            unit=unit,
            disable=disable,
            file=file,
            dynamic_ncols=True,
            smoothing=smoothing,
        )
    return LineProgress(iterable, total=total, desc=desc, unit=unit, file=file)


class LineProgress:
    """Progress as plain lines: one at most every ``interval`` seconds while it advances, and
    one when it closes (no ``\\r``, no redrawing)."""

    def __init__(
        self,
        iterable: Iterable | None = None,
        *,
        total: int | None = None,
        desc: str | None = None,
        unit: str = "it",
        file: IO[str] | None = None,
        interval: float | None = None,
    ) -> None:
        if total is None and iterable is not None:
            try:
                total = len(iterable)  # type: ignore[arg-type]
            except TypeError:
                total = None
        self.iterable = iterable
        self.total, self.desc, self.unit = total, desc, unit
        self.file = sys.stderr if file is None else file
        self.interval = INTERVAL if interval is None else interval
        self.n = 0
        self.postfix = ""
        self.start = self.last = time.monotonic()
        self.closed = False

    def __str__(self) -> str:
        from tqdm import tqdm

        return tqdm.format_meter(
            self.n,
            self.total,
            time.monotonic() - self.start,
            ncols=0,
            prefix=self.desc or "",
            unit=self.unit,
            postfix=self.postfix or None,
        )

    def _line(self) -> None:
        self.last = time.monotonic()
        print(str(self), file=self.file, flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self.last >= self.interval:
            self._line()

    def set_postfix(self, ordered_dict=None, refresh: bool = True, **kwargs) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def write(self, line: str, file: IO[str] | None = None) -> None:
        print(line, file=self.file if file is None else file, flush=True)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._line()

    def __iter__(self) -> Iterator:
        try:
            for item in self.iterable or ():
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
