"""Browser tests: real Chromium (Debian's ``/usr/bin/chromium``) driven by Playwright against a
live Django server on the test database, with the built web UI.

Needs the production build of the UI (``make frontend``; ``make test`` builds it first) and
Chromium (``.ci/run`` installs it). Screenshots go to ``var/test/screenshots/``.
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from accounts.services import user_create
from annotation.curation.services.items import work_items_create_for_run
from frontend.views import app_entry
from models.backends.tracking.base import TrackProposal
from models.world.renderer import render_scene
from models.world.scene import PersonSpec, SceneSpec
from tests.annotation.conftest import adjudicator, annotators, reviewable_run  # noqa: F401 (fixtures, reused)
from tests.trajectories.factories import run_factory
from trajectories.models import ProposalRun, SplitGroup, Video
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import trajectories_store

CHROMIUM = Path(os.environ.get("TRAJLAB_CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "test" / "screenshots"
PASSWORD = "pw-for-browser-tests"


@contextlib.contextmanager
def launched_chromium():
    """Debian's Chromium under Playwright's sync API, closed on exit. One may be open at a time
    in a process (the sync API holds the thread's event loop), so each owner closes its own
    before the next starts.

    Playwright's sync API keeps an event loop marked as running in this thread, and Django then
    refuses database calls from the thread as "async-unsafe". The calls here are synchronous
    (test setup and checks), so the guard is lifted while the browser is open, and only then.
    """
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; .ci/run does)")
    if app_entry() is None:
        pytest.fail("the web UI is not built: run `make frontend` (make test does it first)")
    from playwright.sync_api import sync_playwright

    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
            yield browser
            browser.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture(scope="package")
def chromium():
    """One Chromium for the browser tests (each test gets fresh contexts, so no state is shared),
    closed when they are done (:func:`launched_chromium`)."""
    with launched_chromium() as browser:
        yield browser


def _settle(timeout: float = 5.0) -> None:
    """Wait until the live server's request threads (socketserver names them after
    ``process_request_thread``) have finished, at most ``timeout`` seconds, so no request of a
    closed page still reaches the database after the test has given it up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any("process_request_thread" in t.name for t in threading.enumerate()):
        time.sleep(0.05)


def sign_in(context, username: str, password: str, errors: list[str]):
    """A new page of ``context`` signed in as ``username`` through the login form; its uncaught
    script errors are appended to ``errors``."""
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.on("pageerror", lambda exc: errors.append(f"{username}: {exc}"))
    page.goto("/")
    page.wait_for_url("**/accounts/login/**")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("main h1")
    return page


@pytest.fixture
def open_page(chromium, live_server):
    """``open_page(username)``: a signed-in page of a fresh browser context. Any uncaught script
    error in a page fails the test. At the end, the pages stop (no polling, no downloads) and the
    server's requests finish before the test's database goes away."""
    contexts, errors = [], []

    def make(username: str, password: str = PASSWORD):
        context = chromium.new_context(viewport={"width": 1440, "height": 900}, base_url=live_server.url)
        contexts.append(context)
        return sign_in(context, username, password, errors)

    yield make
    for context in contexts:
        for page in context.pages:
            page.goto("about:blank")
        context.close()
    _settle()
    assert not errors, f"script errors in the page: {errors}"


@pytest.fixture
def shot():
    """``shot(page, name)``: a full-page screenshot in var/test/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:
        page.wait_for_function(  # the crop strips have loaded
            "() => !document.querySelector('.crops-loading, .media-placeholder[aria-busy=\"true\"]')"
            " && [...document.images].every((img) => img.complete)")
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def people(transactional_db):
    """Users by role: three annotators, an adjudicator, a manager."""
    def make(name: str, *roles: str):
        return user_create(username=name, password=PASSWORD, roles=list(roles))

    return {
        "ann1": make("ann1", "annotator"), "ann2": make("ann2", "annotator"), "ann3": make("ann3", "annotator"),
        "adj": make("adj", "adjudicator"), "boss": make("boss", "manager"),
    }


@pytest.fixture(scope="session")
def rendered_scene(tmp_path_factory):
    """A rendered 6 s street scene (640x360, 12 fps) with three walking people and its truth."""
    spec = SceneSpec(name="ui_walk", width=640, height=360, fps=12, n_frames=72, seed=3, background="plaza", people=[
        PersonSpec("red", "blue", "right", start=(40, 300), height=150),
        PersonSpec("yellow", "black", "left", start=(600, 338), height=165),
        PersonSpec("green", "grey", "right", start=(150, 270), height=138, speed="slow"),
    ])
    path = tmp_path_factory.mktemp("scene") / "ui_walk.mp4"
    truth = render_scene(spec, path)
    return path, truth


def _proposals_from_truth(truth, *, window: int | None, stride: int, drop_every: int) -> list[TrackProposal]:
    """Trajectories cut from the rendered truth: the whole track of each person (``window`` None)
    or windows of ``window`` frames every ``stride`` frames, with every ``drop_every``-th frame
    left out so the timeline has gaps."""
    out: list[TrackProposal] = []
    for person in truth.people:
        frames = person.frames()
        boxes = np.array([person.boxes[f] for f in frames], dtype=np.float32)
        starts = [0] if window is None else range(0, len(frames) - window + 1, stride)
        for s in starts:
            sel = np.arange(s, len(frames) if window is None else s + window)
            sel = sel[(sel - s) % drop_every != drop_every - 1]
            out.append(TrackProposal(track_id=len(out) + 1, category="person", frames=frames[sel], boxes=boxes[sel],
                                     scores=np.full(len(sel), 0.9)))
    return out


@pytest.fixture
def scene_video(transactional_db, rendered_scene) -> Video:
    path, _ = rendered_scene
    video = video_import(path=path, source="ui-street").video
    SplitGroup.objects.filter(pk=video.split_group_id).update(split="train")
    return video


@pytest.fixture
def review_run(scene_video, rendered_scene):
    """``review_run(window=None, stride=4, drop_every=7)``: a finished proposal run of trajectories
    cut from the truth, with review open."""
    _, truth = rendered_scene

    def make(*, window: int | None = None, stride: int = 4, drop_every: int = 7) -> ProposalRun:
        run = run_factory(video=scene_video)
        trajectories_store(run=run, proposals=_proposals_from_truth(truth, window=window, stride=stride,
                                                                    drop_every=drop_every))
        run.refresh_from_db()
        work_items_create_for_run(run=run)
        return run

    return make


def wait_first_frame(page, item: int, timeout_ms: int = 15_000) -> float:
    """Wait until the item's first frame is on screen; returns the app's measure in ms."""
    page.wait_for_function("name => performance.getEntriesByName(name, 'measure').length > 0",
                           arg=f"first-frame:{item}", timeout=timeout_ms)
    return page.evaluate("name => performance.getEntriesByName(name, 'measure')[0].duration", f"first-frame:{item}")


def open_item(page, prefix: str, *, after: int | None = None) -> int:
    """The item id once the address is /<prefix>/<id> with an id other than ``after``."""
    page.wait_for_function(
        """([prefix, after]) => {
            const path = location.pathname.replace(/\\/$/, "");
            const head = `/${prefix}/`;
            const id = path.startsWith(head) ? path.slice(head.length) : "";
            return /^[0-9]+$/.test(id) && Number(id) !== after;
        }""", arg=[prefix, after if after is not None else -1])
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def nav(page, name: str) -> None:
    """Go to a screen through the header: open the menu that holds the link ``name``, follow it."""
    main = page.get_by_role("navigation", name="Main")
    link = page.locator("a").filter(has_text=re.compile(rf"^{re.escape(name)}$"))
    main.locator("li.menu").filter(has=link).get_by_role("button").click()
    main.get_by_role("link", name=name, exact=True).click()
