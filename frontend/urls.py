"""The web UI's routes: its read endpoints under /api/ui/, and its page for every other path
that is not the API, the admin, the login pages or static files (the app routes on the client)."""
from django.urls import path, re_path

from frontend import apis, views

urlpatterns = [
    path("api/ui/queues/", apis.QueuesApi.as_view(), name="ui-queues"),
    path("api/ui/progress/", apis.ProgressApi.as_view(), name="ui-progress"),
    path("", views.spa, name="index"),
    re_path(r"^(?!api/|admin/|accounts/|static/|media/)(?P<path>.+)$", views.spa, name="spa"),
]
