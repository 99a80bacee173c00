"""First frame of an opened item within 300 ms on localhost (issue 6), measured in Chromium.

An annotator votes through 50 usability items from the keyboard alone; each vote opens the next
item in the app, and the app's performance marks time each item from the moment its screen
starts (``item-open:<id>``) to its first frame drawn by the player (``first-frame:<id>``). The
same figure is taken, for comparison, the obvious multi-page way: a full page load of the item's
address, timed from the start of navigation to the first frame. p50/p95 go to
``var/bench/ui_first_frame.json``; the in-app p95 must be under 300 ms.
"""
from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from annotation.models import Vote, WorkItem
from tests.browser.conftest import open_item, wait_first_frame

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

N_ITEMS = 50
N_RELOADS = 10
BUDGET_MS = 300.0


def stats(values: list[float]) -> dict:
    a = np.asarray(values, dtype=float)
    return {"n": int(a.size), "p50_ms": round(float(np.percentile(a, 50)), 1),
            "p95_ms": round(float(np.percentile(a, 95)), 1), "max_ms": round(float(a.max()), 1)}


def test_first_frame_of_an_opened_item_is_on_screen_within_300_ms(open_page, people, review_run):
    run = review_run(window=8, stride=3, drop_every=7)  # 64 short trajectories: 64 usability items
    assert WorkItem.objects.filter(stage="usability", trajectory__run=run).count() >= N_ITEMS
    page = open_page("ann1")
    page.evaluate("performance.setResourceTimingBufferSize(10000)")
    page.goto("/review/usability")
    in_app, items, previous = [], [], None
    for i in range(N_ITEMS):
        item = open_item(page, "review/usability", after=previous)
        in_app.append(wait_first_frame(page, item))
        items.append(item)
        page.keyboard.press("1" if i % 3 else "2")  # vote, and send it now (no undo wait): the next item opens
        page.keyboard.press("Enter")
        previous = item
    open_item(page, "review/usability", after=previous)  # the last vote is in: its next item opened
    assert Vote.objects.filter(annotator=people["ann1"]).count() == N_ITEMS
    frames = page.evaluate("""() => performance.getEntriesByType('resource')
        .filter(e => e.name.includes('/frames/')).map(e => e.duration)""")

    # The obvious way: load the item's page from scratch (HTML, script, user, item, video, frame).
    reloads = []
    for item in items[:N_RELOADS]:
        page.goto(f"/review/usability/{item}")
        page.wait_for_function("name => performance.getEntriesByName(name, 'mark').length > 0", arg=f"first-frame:{item}")
        reloads.append(page.evaluate("name => performance.getEntriesByName(name, 'mark')[0].startTime", f"first-frame:{item}"))

    result = {
        "what": "ms from opening a review item to its first frame drawn, Chromium against a live Django server",
        "items": N_ITEMS,
        "in_app": stats(in_app),
        "full_page_load": stats(reloads),
        "frame_jpeg_requests": stats(frames),
        "budget_ms": BUDGET_MS,
        "video": "640x360, 12 fps, rendered",
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version(),
                    "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]},
    }
    out = Path(settings.BASE_DIR) / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ui_first_frame.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    assert result["in_app"]["p95_ms"] < BUDGET_MS, result
