"""Django's own HTTP server (``runserver``, which ``manage.py serve`` runs in the embedded mode, and
the live server of the browser and schema tests) without Nagle's algorithm.

Its handler (wsgiref's) sends a response as several small writes: the status line, the headers,
the body. With Nagle's algorithm on, each write after the first waits until the client
acknowledges the one before, and a client delays that acknowledgement (40 ms on Linux): about
20 ms added to every request on a quiet loopback. ``TCP_NODELAY`` on each accepted connection
(``socketserver.StreamRequestHandler.disable_nagle_algorithm``) sends each write at once, as
gunicorn does for every production connection."""
from __future__ import annotations

from django.core.servers import basehttp


def send_without_delay() -> None:
    """Every connection Django's server accepts from now on has ``TCP_NODELAY`` set (for
    ``runserver`` and the live test server alike: both use :class:`basehttp.WSGIRequestHandler`)."""
    basehttp.WSGIRequestHandler.disable_nagle_algorithm = True
