"""The OpenAPI schema's conventions: component names, the error shape, the answers every
operation can give besides its own, the range of every integer and the token's expiry."""
from __future__ import annotations

from drf_spectacular.authentication import TokenScheme
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers
from rest_framework.permissions import AllowAny

from common.params import ID_MAX
from models.text import INT64_MAX, INT64_MIN


class ApiErrorSerializer(serializers.Serializer):
    """Every refused request under ``/api/`` (``common.errors``)."""

    code = serializers.CharField(help_text="stable, for scripts (e.g. not_found, invalid, already_voted)")
    message = serializers.CharField(help_text="for people")
    extra = serializers.DictField(help_text="details: the invalid fields, the open items, the limits")


ERROR = ApiErrorSerializer

# Answers an operation gives besides its declared ones, and when (see ``TrajlabAutoSchema``).
COMMON_ERRORS = {
    "400": "Invalid input: a body or query parameter out of its type, range or choices; text with a NUL, a lone "
           "surrogate or bytes that are not UTF-8 anywhere in the request (invalid_text); an integer past int64 "
           "(out_of_range) or an id in the path past it (invalid_id). extra.field names the field",
    "401": "The API token has expired (token_expired): get a new one with POST /api/auth/token/",
    "403": "Not signed in, or the user's roles do not allow it",
    "404": "No such record (or not one the user may see)",
    "413": "The request body is larger than the limit",
    "415": "The body's content type is not one the operation reads",
    "429": "Too many attempts: try again after Retry-After seconds",
}
FREE_FORM = build_basic_type(OpenApiTypes.OBJECT)


class TrajlabAutoSchema(AutoSchema):
    """Names nested ``SomeApi.InputSerializer`` components ``SomeInput`` so they never collide,
    and documents the answers every operation can give besides its own, in the error shape
    (:class:`ApiErrorSerializer`): 400 everywhere (the request edge checks every query string and
    path, ``common.middleware``), 413 and 415 where it reads a body, 401 (an expired token) and 403
    unless anyone may call it, 404 where its path names a record, 429 where it is throttled. A 4xx
    an operation declares as a free-form object gets the error shape.
    """

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        parameters = operation.get("parameters", [])
        has_body = "requestBody" in operation
        codes = {"400"}
        if has_body:
            codes |= {"413", "415"}
        if any(p["in"] == "path" for p in parameters):
            codes.add("404")
        if not all(isinstance(p, AllowAny) for p in self.view.get_permissions()):
            codes |= {"401", "403"}
        if self.view.get_throttles():
            codes.add("429")
        responses = operation["responses"]
        error = self.resolve_serializer(ApiErrorSerializer, "response").ref
        for code, response in list(responses.items()):
            if code.startswith("4") and response.get("content", {}).get("application/json", {}).get("schema") \
                    == FREE_FORM:
                response["content"]["application/json"]["schema"] = error
        for code in sorted(codes - set(responses)):
            responses[code] = {"content": {"application/json": {"schema": error}}, "description": COMMON_ERRORS[code]}
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def get_serializer_name(self, serializer, direction):
        parts = type(serializer).__qualname__.split(".")
        if len(parts) >= 2:
            return parts[-2].removesuffix("Api") + parts[-1].removesuffix("Serializer")
        return super().get_serializer_name(serializer, direction)


class PlainChoiceField(serializers.ChoiceField):
    """A choice field whose schema lists its values inline (``allOf: [{enum}]``), not as a named
    enum component.

    drf-spectacular names a shared enum after its field; a second choice set under the same field
    name (``status``, ``split``, ``origin``) renames the existing ones (``StatusEnum`` of jobs) or
    fails the schema check. These fields keep the existing names as they are, and the schema still
    says exactly what is accepted (:class:`PlainChoiceFieldExtension`).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.help_text = f"{self.help_text or ''} One of: {', '.join(map(str, self.choices))}.".strip()


class PlainChoiceFieldExtension(OpenApiSerializerFieldExtension):
    target_class = PlainChoiceField

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        values = list(field.choices)
        kind = "integer" if all(isinstance(v, int) and not isinstance(v, bool) for v in values) else "string"
        if kind == "string":
            values = [str(v) for v in values]
            if field.allow_blank and "" not in values:
                values.append("")
        schema = {"type": kind, "enum": values}
        if field.allow_null:
            schema = {**schema, "nullable": True, "enum": [*values, None]}
        return {"allOf": [schema]}


class ExpiringTokenScheme(TokenScheme):
    """The API token (``accounts.authentication.ExpiringTokenAuthentication``), with its expiry."""

    target_class = "accounts.authentication.ExpiringTokenAuthentication"
    priority = 0

    def get_security_definition(self, auto_schema):
        return {**super().get_security_definition(auto_schema),
                "description": 'A token from POST /api/auth/token/, sent as "Authorization: Token <key>". It expires '
                               "after TRAJLAB_TOKEN_LIFETIME_HOURS: then every operation answers 401 with code "
                               "token_expired, and a new token must be fetched."}


def bounded_integers(result, generator, request, public):
    """Postprocessing hook: every integer of the schema says its range, as the request edge holds it
    (``common.middleware``, ``common.parsers``): an integer in a path ``0..2^63 - 1`` (an id), any
    other ``-2^63..2^63 - 1`` unless its field names a narrower one. Enums keep their values."""
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else ():
                if parameter["in"] == "path" and _is_open_integer(parameter.get("schema", {})):
                    parameter["schema"].setdefault("minimum", 0)
                    parameter["schema"].setdefault("maximum", ID_MAX)
    stack = [result]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if _is_open_integer(node):
                node.setdefault("minimum", INT64_MIN)
                node.setdefault("maximum", INT64_MAX)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return result


def _is_open_integer(schema: dict) -> bool:
    return schema.get("type") == "integer" and "enum" not in schema
