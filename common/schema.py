from drf_spectacular.openapi import AutoSchema


class TrajlabAutoSchema(AutoSchema):
    """Names nested ``SomeApi.InputSerializer`` components ``SomeInput`` so they never collide."""

    def get_serializer_name(self, serializer, direction):
        parts = type(serializer).__qualname__.split(".")
        if len(parts) >= 2:
            return parts[-2].removesuffix("Api") + parts[-1].removesuffix("Serializer")
        return super().get_serializer_name(serializer, direction)
