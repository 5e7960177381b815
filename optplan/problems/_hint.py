"""The "did you mean" hint of the errors that name an unknown key among known ones."""

from __future__ import annotations

import difflib


def did_you_mean(name, known, n: int = 2) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the close matches of ``name`` in ``known``, or
    ``""`` when there are none."""
    close = difflib.get_close_matches(str(name), known, n=n)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
