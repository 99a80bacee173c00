from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import user_roles
from accounts.services import token_for
from common.errors import ApplicationError


class MeApi(APIView):
    permission_classes = [IsAuthenticated]

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        username = serializers.CharField()
        roles = serializers.ListField(child=serializers.CharField())

    @extend_schema(responses=OutputSerializer, summary="The signed-in user and their roles")
    def get(self, request):
        data = {"id": request.user.id, "username": request.user.username, "roles": sorted(user_roles(request.user))}
        return Response(self.OutputSerializer(data).data)


class TokenApi(APIView):
    """Exchange a username and password for an API token (``Authorization: Token <key>``)."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    class InputSerializer(serializers.Serializer):
        username = serializers.CharField()
        password = serializers.CharField(style={"input_type": "password"})

    class OutputSerializer(serializers.Serializer):
        token = serializers.CharField()

    @extend_schema(request=InputSerializer, responses=OutputSerializer, summary="Obtain an API token")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(request, **data.validated_data)
        if user is None:
            raise ApplicationError("wrong username or password", code="bad_credentials", status_code=401)
        return Response(self.OutputSerializer({"token": token_for(user=user)}).data)
