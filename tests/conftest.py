"""Shared fixtures: users per role, API clients, and small videos made on the fly."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from accounts.services import user_create
from common.dev_server import send_without_delay
from common.roles import Role
from tests.triggers import protected_tables, set_aside

ROLE_NAMES = [r.value for r in Role]


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache, so sign-in failures of earlier tests (all from
    127.0.0.1) never lock a later test out."""
    cache.clear()
    yield


@pytest.fixture(scope="session", autouse=True)
def _live_server_without_send_delay():
    """The live server (browser and schema tests) answers as ``manage.py serve`` does: without
    Nagle's algorithm, which otherwise holds each response's later writes for the client's
    delayed acknowledgement (common/dev_server.py)."""
    send_without_delay()


@pytest.fixture(scope="session", autouse=True)
def _flush_past_truncate_triggers():
    """Transactional tests empty the test database with ``TRUNCATE``, which the database refuses on
    tables holding protected rows (common/db_triggers.py ``truncate_refused``). The flush turns
    those tables' triggers off within its own transaction, as their owner may (no superuser:
    tests/triggers.py)."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    flush = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self, sql_list):
        with self.connection.cursor() as cursor:
            off, on = set_aside(protected_tables(cursor, truncate=True))
        flush(self, [*off, *sql_list, *on])

    DatabaseOperations.execute_sql_flush = execute_sql_flush
    yield
    DatabaseOperations.execute_sql_flush = flush


@pytest.fixture
def make_user(db):
    counter = {"n": 0}

    def make(*roles: str, username: str | None = None):
        counter["n"] += 1
        return user_create(username=username or f"{'-'.join(roles) or 'norole'}{counter['n']}",
                           password="pw-for-tests", roles=list(roles))

    return make


@pytest.fixture
def manager(make_user):
    return make_user("manager")


@pytest.fixture
def annotator(make_user):
    return make_user("annotator")


@pytest.fixture
def client_for():
    def make(user=None) -> APIClient:
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


@pytest.fixture
def manager_client(client_for, manager):
    return client_for(manager)


@pytest.fixture
def media_root(settings, tmp_path):
    """An empty MEDIA_ROOT per test, so tests can check that nothing was left behind."""
    root = tmp_path / "media"
    (root / "tmp").mkdir(parents=True)
    settings.MEDIA_ROOT = root
    settings.FILE_UPLOAD_TEMP_DIR = str(root / "tmp")
    return root


def write_video(path: Path, *, n_frames: int = 30, size=(160, 120), fps: float = 10.0, seed: int = 0,
                fourcc: str = "mp4v", boxes: list | None = None) -> Path:
    """A small video: noise background and a moving rectangle (its box per frame in ``boxes``)."""
    rng = np.random.default_rng(seed)
    w, h = size
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (w, h))
    assert writer.isOpened(), f"cannot write {path}"
    background = rng.integers(40, 90, size=(h, w, 3), dtype=np.uint8)
    for i in range(n_frames):
        frame = background.copy()
        x = int(5 + i * (w - 40) / max(n_frames - 1, 1))
        frame[h // 4: h // 4 + 40, x: x + 20] = (30, 30, 220)
        if boxes is not None:
            boxes.append([x, h // 4, x + 20, h // 4 + 40])
        writer.write(frame)
    writer.release()
    return path


@pytest.fixture
def small_video(tmp_path) -> Path:
    return write_video(tmp_path / "clip.mp4")


def media_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


TEST_MODEL_CACHE = Path(__file__).resolve().parents[1] / "var" / "cache" / "test-models"


def cached_build(name: str, sources: list[Path], build) -> Path:
    """The folder that ``build(folder)`` filled, built once for every test process and run while
    ``sources`` (the code that builds it) and the installed torch are unchanged: it lives in
    ``var/cache/test-models/<name>-<digest>``, read-only, and a file lock makes parallel test
    processes wait for the first one's build instead of building it again."""
    import hashlib
    import shutil

    import torch
    from filelock import FileLock

    digest = hashlib.sha256(torch.__version__.encode())
    for source in sources:
        digest.update(source.read_bytes())
    folder = TEST_MODEL_CACHE / f"{name}-{digest.hexdigest()[:16]}"
    TEST_MODEL_CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if not (folder / ".complete").exists():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder)
            for made in folder.rglob("*"):
                if made.is_file():
                    made.chmod(0o444)             # shared by every test: none may change it
            (folder / ".complete").touch()
    return folder


@pytest.fixture(scope="session")
def sam3_tiny_checkpoint():
    """One small random-weight SAM 3 checkpoint (``tests/models/sam3_tiny.py``; about 200 MB), built
    once for all test processes (:func:`cached_build`): the tracker's tests, the proposal runs and
    the benchmark load it inside ``tiny_sam3_architecture()``."""
    from tests.models.sam3_tiny import build_tiny_sam3, tiny_sam3_architecture

    def build(folder: Path) -> None:
        with tiny_sam3_architecture():
            build_tiny_sam3(folder)

    return cached_build("sam3-tiny", [Path(__file__).parent / "models" / "sam3_tiny.py"], build) / "sam3_tiny.pt"


@pytest.fixture
def sent(monkeypatch):
    """Tasks handed to the broker, as ``(name, args, queue)``; nothing is queued for real."""
    from celery import current_app

    out = []
    monkeypatch.setattr(current_app, "send_task",
                        lambda name, args=None, queue=None, **kw: out.append((name, args, queue)))
    return out
