"""One error type for the whole platform, and the DRF handler that turns it into JSON.

Services raise :class:`ApplicationError`; the API answers ``{"code", "message", "extra"}`` with
the error's HTTP status. DRF and Django errors get the same shape, so clients parse one format.
"""
from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler


class ApplicationError(Exception):
    """A refused request: ``code`` is stable for scripts, ``message`` is for people."""

    status_code = status.HTTP_400_BAD_REQUEST

    def __init__(self, message: str, *, code: str = "invalid", extra: dict | None = None,
                 status_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.extra = extra or {}
        if status_code is not None:
            self.status_code = status_code


class ConflictError(ApplicationError):
    """The request is valid but the current state forbids it (e.g. a locked split)."""

    status_code = status.HTTP_409_CONFLICT


class NotFoundError(ApplicationError):
    status_code = status.HTTP_404_NOT_FOUND


def api_exception_handler(exc, context):
    if isinstance(exc, ApplicationError):
        return Response(
            {"code": exc.code, "message": exc.message, "extra": exc.extra}, status=exc.status_code
        )
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = {"code": "invalid", "message": "The request is invalid; see extra.fields.",
                         "extra": {"fields": response.data}}
    else:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        response.data = {"code": getattr(getattr(exc, "detail", None), "code", None) or exc.default_code,
                         "message": str(detail), "extra": {}}
    return response
