from django.urls import path

from common.observability.apis import HealthApi, MetricsApi, ReadyApi

urlpatterns = [
    path("healthz", HealthApi.as_view(), name="healthz"),
    path("readyz", ReadyApi.as_view(), name="readyz"),
    path("metrics", MetricsApi.as_view(), name="metrics"),
]
