"""A terminal progress bar for management commands, fed by the same callbacks as Job rows."""
from __future__ import annotations

import sys

from tqdm import tqdm


class ProgressBar:
    """``bar(fraction, message)``: a tqdm bar over [0, 1]; use as a context manager."""

    def __init__(self, desc: str, *, disable: bool | None = None):
        self._bar = tqdm(total=1000, desc=desc, unit="‰", leave=True, file=sys.stderr,
                         disable=disable, bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining} {postfix}")
        self._n = 0

    def __call__(self, fraction: float, message: str = "") -> None:
        n = round(1000 * min(max(fraction, 0.0), 1.0))
        if n > self._n:
            self._bar.update(n - self._n)
            self._n = n
        if message:
            self._bar.set_postfix_str(message[:60], refresh=False)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc) -> None:
        self._bar.close()
