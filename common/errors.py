"""One error type for the whole platform, and the DRF handler that turns it into JSON.

Services raise :class:`ApplicationError`; the API answers ``{"code", "message", "extra"}`` with
the error's HTTP status. DRF and Django errors get the same shape, so clients parse one format.
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response


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


class RequestTooLarge(ApplicationError):
    """A request body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE

    def __init__(self, *, limit: int | None = None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE if limit is None else limit
        super().__init__(f"The request body is larger than {limit} bytes; send less per request.", code="too_large",
                         extra={"limit_bytes": limit})


def api_exception_handler(exc, context):
    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge()
    elif isinstance(exc, SuspiciousOperation):  # too many form fields or files, a malformed body
        exc = ApplicationError("The request could not be read.", code="bad_request")
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
    # Imported here: rest_framework.views loads the authentication and parser classes named in the
    # settings, and those import this module.
    from rest_framework.views import exception_handler

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


# -- Django's error views, in this format under /api/ (handler400/404/500 in config.urls) ---------
def _is_api(request) -> bool:
    return request.path_info.startswith("/api/")


def _error_response(error: ApplicationError) -> JsonResponse:
    return JsonResponse({"code": error.code, "message": error.message, "extra": error.extra},
                        status=error.status_code)


def bad_request(request, exception, template_name=defaults.ERROR_400_TEMPLATE_NAME):
    """A request Django could not read (a body over the size limit is a 413)."""
    if not _is_api(request):
        return defaults.bad_request(request, exception, template_name)
    if isinstance(exception, RequestDataTooBig):
        return _error_response(RequestTooLarge())
    return _error_response(ApplicationError("The request could not be read.", code="bad_request"))


def page_not_found(request, exception, template_name=defaults.ERROR_404_TEMPLATE_NAME):
    if not _is_api(request):
        return defaults.page_not_found(request, exception, template_name)
    return _error_response(NotFoundError(f"No API endpoint at {request.path_info}; see /api/docs/.",
                                         code="not_found"))


def server_error(request, template_name=defaults.ERROR_500_TEMPLATE_NAME):
    """An unexpected failure: logged with its trace by Django, answered without it."""
    if not _is_api(request):
        return defaults.server_error(request, template_name)
    return _error_response(ApplicationError("The server failed to answer this request; the error is logged.",
                                            code="server_error", status_code=500))
