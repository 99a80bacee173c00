"""The WSGI entry point.

Before it serves, a process loads every view (the URL configuration imports them all) and then
freezes the garbage collector's view of what loading made (``gc.freeze``): modules, classes and
settings live as long as the process, and without the freeze every full collection walks them
again, a pause of tens of milliseconds that lands on whichever request is running. Objects that
requests create are collected as usual.

It also runs the request path's first database statements once (``config.warmup``: Python's side
of a first token check and claim, under any WSGI server) and closes that connection again: the
threads that serve open their own, and a server that loads the application before it forks
(gunicorn's ``--preload``) must not hand one socket to several processes. gunicorn with
``-c config/gunicorn.conf.py`` also opens and warms each serving thread's connection."""
import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()


def _warm() -> None:
    from django.db import connections
    from django.urls import get_resolver

    from config.warmup import warm_database

    get_resolver().url_patterns  # noqa: B018  (imports every view module)
    warm_database()
    connections.close_all()
    gc.collect()
    gc.freeze()


_warm()
