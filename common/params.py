from common.errors import ApplicationError


def int_param(request, name: str, default=None):
    """An optional integer query parameter; anything else is a 400 naming the parameter."""
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError:
        raise ApplicationError(f"{name} must be an integer, got {raw!r}", code="invalid_parameter") from None
