"""Query-string parameters and the bounds of every integer the API accepts.

An integer input is bounded where it enters: ids to the database's ``bigint`` range, seeds to
32 bits, counts and durations to the maxima named here, so an out-of-range number is a 400 naming
the field, never a database overflow (a 500) later.
"""
from rest_framework import serializers

from common.errors import ApplicationError

ID_MAX = 2**63 - 1           # a bigint primary key
SEED_MAX = 2**32 - 1         # seeds: what every RNG we feed takes
LEASE_SECONDS_MAX = 7 * 24 * 3600   # a claimed item or sample stays reserved at most a week
TIME_SPENT_MS_MAX = 24 * 3600 * 1000  # reviewer time on one item: at most a day


class FlagField(serializers.BooleanField):
    """A boolean input that is one: JSON ``true``/``false``, or ``"true"``/``"false"`` in a query
    string or a form. DRF's ``BooleanField`` also takes 0, 1, "yes", "on"..., which the schema's
    ``boolean`` does not say."""

    TRUE_VALUES = {True, "true", "True"}
    FALSE_VALUES = {False, "false", "False"}
    NULL_VALUES = {None, "null"}

    def to_internal_value(self, data):
        if isinstance(data, bool) or (isinstance(data, str) and data in self.TRUE_VALUES | self.FALSE_VALUES):
            return data in self.TRUE_VALUES
        if self.allow_null and data in self.NULL_VALUES:
            return None
        self.fail("invalid", input=data)


class TextField(serializers.CharField):
    """A text input that is one: a JSON string (or a form's or query string's value). DRF's
    ``CharField`` also takes a number and stores its ``str`` (``"name": 0`` became the name "0"),
    which the schema's ``string`` does not say."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def text_field(**kwargs) -> TextField:
    return TextField(**kwargs)


def flag_field(**kwargs) -> FlagField:
    return FlagField(**kwargs)


def id_field(**kwargs) -> serializers.IntegerField:
    """An id input (a filter or a body field): a positive bigint."""
    return serializers.IntegerField(min_value=1, max_value=ID_MAX, **kwargs)


def seed_field(**kwargs) -> serializers.IntegerField:
    return serializers.IntegerField(min_value=0, max_value=SEED_MAX, **kwargs)


def int_param(request, name: str, default=None, *, min_value: int = -ID_MAX - 1, max_value: int = ID_MAX):
    """An optional integer query parameter within ``[min_value, max_value]`` (by default the
    database's bigint range); anything else, an empty one included (leave it out for the
    default), is a 400 naming the parameter."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApplicationError(f"{name} must be an integer, got {raw!r}", code="invalid_parameter") from None
    if not min_value <= value <= max_value:
        raise ApplicationError(f"{name} must be between {min_value} and {max_value}", code="invalid_parameter")
    return value


def query_filters(serializer_class, request) -> dict:
    """Query-string filters validated by ``serializer_class``: a 400 on bad values, an empty one
    included (``?split=`` is not a split; leave a filter out to not filter), as the schema says."""
    data = serializer_class(data=dict(request.query_params.items()))
    data.is_valid(raise_exception=True)
    return {k: v for k, v in data.validated_data.items() if v is not None}
