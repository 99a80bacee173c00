"""Each benchmark runs at the size its environment asks for: a module that reads
``TRAJLAB_BENCH_FULL`` when imported (its ``FULL``) and was left at another size (a test that
reloads it under another setting) fails at once rather than running the demo size in CI."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _size_as_asked(request):
    full = getattr(request.module, "FULL", None)
    if isinstance(full, bool):
        asked = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
        assert full == asked, (f"{request.module.__name__} is at the {'full' if full else 'quick'} size but "
                               f"TRAJLAB_BENCH_FULL asks for the {'full' if asked else 'quick'} one")
