"""The request edge's checks of what comes before the body, for every route: the query string, the
path, the headers and the cookies as text (``common.text``), and every integer the URL captures
(``<int:item_id>``) within the ids' ``bigint`` range. Bodies are checked by their parser
(``common.parsers``).

A refusal is a 400 naming the parameter: ``invalid_text`` (a NUL or bytes that are not UTF-8, which
PostgreSQL refuses in a filter), ``invalid_id`` (a path integer past 2^63 - 1, which no row has and
the database cannot compare). Under ``/api/`` in the API's error shape, plain text elsewhere.
"""
from __future__ import annotations

from django.http import HttpResponseBadRequest, JsonResponse

from common.errors import ApplicationError
from common.params import ID_MAX
from common.text import checked_text, checked_urlencoded


class InvalidId(ApplicationError):
    def __init__(self, name: str):
        problem = f"must be an integer from 0 to {ID_MAX}"
        super().__init__(f"{name} in the path {problem}.", code="invalid_id",
                         extra={"field": name, "fields": {name: [problem]}})


def _refusal(request, error: ApplicationError):
    if request.path_info.startswith("/api/"):
        return JsonResponse({"code": error.code, "message": error.message, "extra": error.extra},
                            status=error.status_code)
    return HttpResponseBadRequest(error.message, content_type="text/plain; charset=utf-8")


def _raw_query(request) -> bytes:
    """The query string as sent (WSGI hands it over as Latin-1 text; ASGI decoded it as UTF-8)."""
    query = request.META.get("QUERY_STRING", "")
    try:
        return query.encode("iso-8859-1")
    except UnicodeEncodeError:
        return query.encode("utf-8", "surrogatepass")


class RequestEdgeMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            checked_text(request.path_info, field="path")
            checked_urlencoded(_raw_query(request))
            for key, value in request.META.items():
                if key.startswith("HTTP_") and isinstance(value, str):   # the token, the session cookie
                    checked_text(value, field=f"the {key[5:].replace('_', '-').title()} header")
            for name, value in request.COOKIES.items():                  # "\000" unquotes to a NUL
                checked_text(value, field=f"the cookie {name}")
        except ApplicationError as error:
            return _refusal(request, error)
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        for name, value in request.resolver_match.captured_kwargs.items():
            if isinstance(value, int) and not 0 <= value <= ID_MAX:
                return _refusal(request, InvalidId(name))
        return None
