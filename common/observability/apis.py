"""``/healthz``, ``/readyz`` and ``/metrics``: no session, no authentication (``/metrics`` takes
its own bearer token), no throttling, no CSRF (they only answer GET)."""
from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpResponse
from drf_spectacular.utils import extend_schema
from prometheus_client import CONTENT_TYPE_LATEST
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from common.observability.health import readiness
from common.observability.metrics import exposition


class _Open(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []


class HealthApi(_Open):
    class OutputSerializer(serializers.Serializer):
        status = serializers.CharField(help_text="always ok: the process answers")

    @extend_schema(operation_id="healthz", tags=["operations"], responses={200: OutputSerializer},
                   summary="Liveness: the process answers (no dependency is checked).")
    def get(self, request):
        return Response({"status": "ok"})


class CheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    ms = serializers.FloatField(help_text="how long the check took, milliseconds")
    error = serializers.CharField(help_text="why it failed; empty when ok")


class ReadyApi(_Open):
    class OutputSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=["ready", "unavailable"])
        failed = serializers.ListField(child=serializers.CharField(), help_text="the checks that failed")
        checks = serializers.DictField(child=CheckSerializer(), help_text="database, broker, storage")

    @extend_schema(operation_id="readyz", tags=["operations"],
                   responses={200: OutputSerializer, 503: OutputSerializer},
                   summary="Readiness: the database, the broker and the storage answer, each within "
                           "TRAJLAB_READY_TIMEOUT_MS; 503 names the ones that did not.")
    def get(self, request):
        checks = readiness()
        failed = [name for name, check in checks.items() if not check.ok]
        body = {"status": "unavailable" if failed else "ready", "failed": failed,
                "checks": {name: {"ok": c.ok, "ms": round(c.ms, 2), "error": c.error} for name, c in checks.items()}}
        return Response(self.OutputSerializer(body).data, status=503 if failed else 200)


@extend_schema(exclude=True)
class MetricsApi(_Open):
    """Prometheus text exposition; 404 unless ``TRAJLAB_METRICS_TOKEN`` is set, then only with
    ``Authorization: Bearer <token>``."""

    def get(self, request):
        token = settings.TRAJLAB_METRICS_TOKEN
        if not token:
            raise Http404("metrics are off (TRAJLAB_METRICS_TOKEN is not set)")
        given = request.META.get("HTTP_AUTHORIZATION", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            return HttpResponse("metrics need Authorization: Bearer <TRAJLAB_METRICS_TOKEN>\n", status=401,
                                content_type="text/plain; charset=utf-8", headers={"WWW-Authenticate": "Bearer"})
        return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
