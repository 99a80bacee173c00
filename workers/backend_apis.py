"""The model backends requests may name (``common.registry``): what the operator registered and
the embedded implementations that need no entry."""
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from common.registry import embedded_backends, registered_backends
from common.roles import IsStaffMember, Role, user_has_role


class RegisteredBackendSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="what requests name it by")
    backend = serializers.CharField(help_text="its implementation (openai, transformers, sam2, ...); empty for a folder")
    label = serializers.CharField()
    uses = serializers.ListField(child=serializers.CharField(),
                                 help_text="tracker, describer, scorer (pipeline scorers and comparators), writer "
                                           "(query writing, rewrites) or folder (a model config's folder field)")
    settings = serializers.DictField(required=False, help_text="managers only: the entry's settings")
    path = serializers.CharField(required=False, help_text="managers only: a folder entry's folder")


class BackendListOutputSerializer(serializers.Serializer):
    registered = RegisteredBackendSerializer(many=True)
    embedded = serializers.DictField(child=serializers.ListField(child=serializers.CharField()),
                                     help_text="per use, the implementations that need no entry")


class BackendListApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=BackendListOutputSerializer, summary="The model backends requests may name",
                   description="Endpoints, checkpoints and model folders are set by the operator in "
                               "TRAJLAB_BACKENDS; a request names an entry (or an embedded implementation) "
                               "and never carries a URL or a path. Settings and folders are shown to managers only.")
    def get(self, request):
        manager = user_has_role(request.user, Role.MANAGER)
        entries = [entry.public(manager=manager) for _, entry in sorted(registered_backends().items())]
        return Response({"registered": entries, "embedded": embedded_backends()})
