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


def query_filters(serializer_class, request) -> dict:
    """Query-string filters validated by ``serializer_class`` (a 400 on bad values); absent or empty
    ones are left out."""
    data = serializer_class(data={k: v for k, v in request.query_params.items() if v != ""})
    data.is_valid(raise_exception=True)
    return {k: v for k, v in data.validated_data.items() if v is not None}
