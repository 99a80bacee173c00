from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.parsers import FormParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.services import token_obtain
from accounts.throttling import LoginLockoutThrottle
from common.params import flag_field
from common.parsers import BoundedJSONParser
from common.roles import user_roles
from common.schema import ERROR


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

    # The current key while it is valid, a fresh one once it expired or with ``rotate``
    # (accounts.services.token_obtain); a username or address with too
    # many wrong passwords is locked out for a while: 429 with Retry-After (accounts.throttling).
    permission_classes = [AllowAny]
    authentication_classes: list = []
    throttle_classes = [LoginLockoutThrottle]
    parser_classes = [BoundedJSONParser, FormParser]

    class InputSerializer(serializers.Serializer):
        username = serializers.CharField()
        password = serializers.CharField(style={"input_type": "password"})
        rotate = flag_field(default=False, help_text="issue a fresh key; the old one stops working")

    class OutputSerializer(serializers.Serializer):
        token = serializers.CharField()

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer, 401: ERROR},
                   summary="Obtain an API token (401 bad_credentials for a wrong username or password)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        token = token_obtain(request=request, **data.validated_data)
        return Response(self.OutputSerializer({"token": token}).data)
