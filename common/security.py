"""The Content-Security-Policy header (``TRAJLAB_CSP``) on every response that does not set one.
The web UI, the login page and the API docs load scripts only from files under ``/static/``."""
from __future__ import annotations

from django.conf import settings


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if settings.TRAJLAB_CSP and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.TRAJLAB_CSP
        return response
