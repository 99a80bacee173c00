"""Pages of every list endpoint: ``{count, next, previous, results}`` by ``limit`` and ``offset``.

A list view declares ``pagination_class = Page`` and answers through :func:`paginate`; the schema
reads the same attribute, so the declared response is the page the view returns.
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from rest_framework.pagination import LimitOffsetPagination

from common.errors import ApplicationError
from common.params import ID_MAX

MAX_LIMIT = 1000


class Page(LimitOffsetPagination):
    """``limit`` 1 to ``MAX_LIMIT`` (default ``PAGE_SIZE``), ``offset`` 0 to the id range; a
    ``limit`` or ``offset`` that is not such a number, an empty one included (leave it out for the
    default), is a 400 ``invalid_page``."""

    max_limit = MAX_LIMIT

    def get_limit(self, request):
        return self._bounded(request, self.limit_query_param, 1, MAX_LIMIT, settings.REST_FRAMEWORK["PAGE_SIZE"])

    def get_offset(self, request):
        return self._bounded(request, self.offset_query_param, 0, ID_MAX, 0)

    @staticmethod
    def _bounded(request, name: str, low: int, high: int, default: int) -> int:
        raw = request.query_params.get(name)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise ApplicationError(f"{name} must be a whole number from {low} to {high}", code="invalid_page",
                                   extra={"parameter": name, "min": low, "max": high})
        return value

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: (1, MAX_LIMIT), self.offset_query_param: (0, ID_MAX)}
        for parameter in parameters:
            low, high = bounds[parameter["name"]]
            parameter["schema"] = {**parameter["schema"], "minimum": low, "maximum": high}
        return parameters


def paginate(queryset, serializer_class, request, view):
    """One page of ``queryset`` written out by ``serializer_class``, by the view's
    ``pagination_class`` (which must be declared: it is what the schema documents)."""
    pagination_class = getattr(view, "pagination_class", None)
    if pagination_class is None or not issubclass(pagination_class, Page):
        raise ImproperlyConfigured(f"{type(view).__name__} answers pages: declare pagination_class = Page")
    paginator = pagination_class()
    page = paginator.paginate_queryset(queryset, request, view=view)
    serializer = serializer_class(page, many=True)
    serializer.context.setdefault("request", request)  # besides what a partial's context says
    return paginator.get_paginated_response(serializer.data)
