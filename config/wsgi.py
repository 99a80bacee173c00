"""The WSGI entry point.

Before it serves, a process loads every view (the URL configuration imports them all) and then
freezes the garbage collector's view of what loading made (``gc.freeze``): modules, classes and
settings live as long as the process, and without the freeze every full collection walks them
again, a pause of tens of milliseconds that lands on whichever request is running. Objects that
requests create are collected as usual."""
import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()


def _warm() -> None:
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (imports every view module)
    gc.collect()
    gc.freeze()


_warm()
