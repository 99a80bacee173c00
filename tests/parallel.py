"""Each test process of a parallel run (``pytest -n N``, pytest-xdist) gets a place of its own.

Loaded as a plugin (``-p tests.parallel`` in ``pyproject.toml``), before pytest-django reads the
settings: in worker ``gwK`` the Redis broker moves from database ``D`` to ``D - 1 - K`` (counting
down from the one given, so workers never share a queue with each other or with a serial run) and
``TRAJLAB_VAR_DIR`` to its subfolder ``gwK``. The test database needs nothing here: pytest-django
already names it ``test_<name>_gwK``. Outside a parallel run it changes nothing.

It also orders the files of a parallel run longest first (:func:`pytest_collection_modifyitems`):
with ``--dist loadfile --no-loadscope-reorder`` (``make test``) the workers take files in that
order, so the few files of one long test each (the schema fuzz, the benchmarks, the real-process
and browser suites) start first and the many short files fill in around them, instead of one of
them running alone at the end while the other workers wait."""
from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16
# Files whose tests take minutes or spawn servers, in the order they start (a path prefix each);
# every other file keeps its place after them.
LONG_FIRST = ("tests/test_schema_fuzz.py", "tests/benchmarks/", "tests/integration/", "tests/browser/")


def worker_index() -> int | None:
    """The index ``K`` of this process's worker name ``gwK``, or ``None`` when not a worker."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else None


def broker_for_worker(url: str, index: int) -> str:
    """The Redis URL ``url`` with its database number moved down by ``index + 1``; any other broker
    (the filesystem one lives in ``TRAJLAB_VAR_DIR``, which moves instead) unchanged."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        return url
    given = int(parts.path.strip("/") or 0)
    number = given - 1 - index
    if number < 0:
        raise SystemExit(f"CELERY_BROKER_URL database {given} leaves no Redis database for worker gw{index} "
                         f"(worker K uses {given} - 1 - K; name a database of at least {index + 1})")
    return urlunsplit(parts._replace(path=f"/{number % REDIS_DATABASES}"))


def _place_worker() -> None:
    index = worker_index()
    if index is None:
        return
    if os.environ.get("CELERY_BROKER_URL"):
        os.environ["CELERY_BROKER_URL"] = broker_for_worker(os.environ["CELERY_BROKER_URL"], index)
    var = Path(os.environ.get("TRAJLAB_VAR_DIR", Path(__file__).resolve().parents[1] / "var"))
    os.environ["TRAJLAB_VAR_DIR"] = str(var / f"gw{index}")


_place_worker()


def pytest_collection_modifyitems(config, items) -> None:
    """In a parallel run, the files of ``LONG_FIRST`` first (in its order), each file's tests kept
    together and in their order (a stable sort by the file's rank)."""
    if worker_index() is None:
        return

    def rank(item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, prefix in enumerate(LONG_FIRST) if path.startswith(prefix)), len(LONG_FIRST))

    items.sort(key=rank)
