"""Each request's id and timing.

:class:`RequestObservabilityMiddleware` (first in ``MIDDLEWARE``) takes the ``X-Request-ID`` a
proxy or client sent when it is printable ASCII without spaces and at most
:data:`REQUEST_ID_MAX` characters, or makes one (32 hex digits); it puts the id in the
:data:`request_id` context variable for the request's log records (:class:`RequestIdFilter`) and the
tasks it queues (``common.observability.tasks``), answers it in ``X-Request-ID``, and records the
request's latency by route name, method and status class (``common.observability.metrics``).

``GET /healthz`` and ``GET /readyz`` are answered here, before the rest of the middleware: a load
balancer asks with the backend's address as its ``Host``, which ``ALLOWED_HOSTS`` need not list,
and neither answer needs a session, a user or a CSRF check. Their URL patterns
(``common.observability.urls``) route to the same views, for the OpenAPI schema.
"""
from __future__ import annotations

import time

from common.observability.apis import HealthApi, ReadyApi
from common.observability.context import request_id, request_id_checked, request_id_new
from common.observability.metrics import observe_request

REQUEST_ID_HEADER = "X-Request-ID"


class RequestObservabilityMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self.probes = {"/healthz": ("healthz", HealthApi.as_view()), "/readyz": ("readyz", ReadyApi.as_view())}

    def __call__(self, request):
        rid = request_id_checked(request.META.get("HTTP_X_REQUEST_ID")) or request_id_new()
        request.request_id = rid
        token = request_id.set(rid)
        start = time.perf_counter()
        probe = self.probes.get(request.path_info) if request.method in ("GET", "HEAD") else None
        try:
            if probe is not None:
                route, view = probe
                response = view(request)
                response.render()
            else:
                response = self.get_response(request)
                match = request.resolver_match
                route = (match.url_name or match.route) if match is not None else "unmatched"
        finally:
            request_id.reset(token)
        observe_request(route=route, method=request.method, status=response.status_code,
                        seconds=time.perf_counter() - start)
        response[REQUEST_ID_HEADER] = rid
        return response
