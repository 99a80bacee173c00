from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class TrajlabAutoSchema(AutoSchema):
    """Names nested ``SomeApi.InputSerializer`` components ``SomeInput`` so they never collide."""

    def get_serializer_name(self, serializer, direction):
        parts = type(serializer).__qualname__.split(".")
        if len(parts) >= 2:
            return parts[-2].removesuffix("Api") + parts[-1].removesuffix("Serializer")
        return super().get_serializer_name(serializer, direction)


@extend_schema_field(OpenApiTypes.STR)
class PlainChoiceField(serializers.ChoiceField):
    """A choice field documented as a string with its values in the description.

    drf-spectacular names a shared enum after its field; a second choice set under the same field
    name (``status``, ``split``, ``origin``) renames the existing ones (``StatusEnum`` of jobs) or
    fails the schema check. These fields keep the existing names as they are.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.help_text = f"{self.help_text or ''} One of: {', '.join(map(str, self.choices))}.".strip()
