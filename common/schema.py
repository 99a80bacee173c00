"""The OpenAPI schema's conventions: component names, the error shape and the answers every
operation can give besides its own."""
from __future__ import annotations

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import build_basic_type
from drf_spectacular.types import OpenApiTypes
from rest_framework import serializers
from rest_framework.permissions import AllowAny


class ApiErrorSerializer(serializers.Serializer):
    """Every refused request under ``/api/`` (``common.errors``)."""

    code = serializers.CharField(help_text="stable, for scripts (e.g. not_found, invalid, already_voted)")
    message = serializers.CharField(help_text="for people")
    extra = serializers.DictField(help_text="details: the invalid fields, the open items, the limits")


ERROR = ApiErrorSerializer

# Answers an operation gives besides its declared ones, and when (see ``TrajlabAutoSchema``).
COMMON_ERRORS = {
    "400": "Invalid input: a body or query parameter out of its type, range or choices",
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
    (:class:`ApiErrorSerializer`): 400 where it reads a body or query parameters, 413 and 415
    where it reads a body, 403 unless anyone may call it, 404 where its path names a record, 429
    where it is throttled. A 4xx an operation declares as a free-form object gets the error shape.
    """

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        parameters = operation.get("parameters", [])
        has_body = "requestBody" in operation
        codes = set()
        if has_body or any(p["in"] == "query" for p in parameters):
            codes.add("400")
        if has_body:
            codes |= {"413", "415"}
        if any(p["in"] == "path" for p in parameters):
            codes.add("404")
        if not all(isinstance(p, AllowAny) for p in self.view.get_permissions()):
            codes.add("403")
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
