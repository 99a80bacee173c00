from django.urls import path

from accounts import apis

urlpatterns = [
    path("me/", apis.MeApi.as_view(), name="me"),
    path("auth/token/", apis.TokenApi.as_view(), name="auth-token"),
]
