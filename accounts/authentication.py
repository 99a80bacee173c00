"""Token authentication with a lifetime: a key older than ``TRAJLAB_TOKEN_LIFETIME_HOURS`` is
refused with 401 and a message that says how to get a new one.

DRF imports this module while ``common.errors`` is still loading (through its settings), so it
imports neither that nor anything that does.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import exceptions, status
from rest_framework.authentication import TokenAuthentication


class TokenExpired(exceptions.APIException):
    # Not an AuthenticationFailed: with session authentication listed first, DRF would answer
    # that with 403.
    status_code = status.HTTP_401_UNAUTHORIZED
    default_code = "token_expired"
    default_detail = "API token expired; get a new one with POST /api/auth/token/"


def token_expired(*, token) -> bool:
    """True once ``token`` is older than ``TRAJLAB_TOKEN_LIFETIME_HOURS``."""
    return token.created + timedelta(hours=settings.TRAJLAB_TOKEN_LIFETIME_HOURS) <= timezone.now()


class ExpiringTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key):
        user, token = super().authenticate_credentials(key)
        if token_expired(token=token):
            raise TokenExpired()
        return user, token
