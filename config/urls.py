from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from accounts.views import LoginView
from common.static import static_file

# Errors under /api/ in the API's format (common.errors); HTML elsewhere.
handler400 = "common.errors.bad_request"
handler404 = "common.errors.page_not_found"
handler500 = "common.errors.server_error"

api = [
    path("", include("accounts.urls")),
    path("", include("common.jobs.urls")),
    path("", include("workers.urls")),
    path("", include("trajectories.urls")),
    path("", include("annotation.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
]

urlpatterns = [
    path("api/", include(api)),
    # For load balancers and Prometheus: /healthz, /readyz, /metrics (common.observability).
    path("", include("common.observability.urls")),
    # Static files for `serve` (runserver --nostatic): a path that leaves the static folders is a 404.
    path("static/<path:path>", static_file, name="static"),
    # The admin signs in through the same form, under the same lockout (accounts.throttling).
    path("admin/login/", LoginView.as_view(), name="admin-login"),
    path("admin/", admin.site.urls),
    path("accounts/login/", LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The web UI: its /api/ui/ reads, and its page for every other path (client-side routing).
    path("", include("frontend.urls")),
]
