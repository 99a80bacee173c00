"""Token authentication with a lifetime: a key older than ``TRAJLAB_TOKEN_LIFETIME_HOURS`` is
refused with 401 and a message that says how to get a new one.

DRF imports this module while ``common.errors`` is still loading (through its settings), so it
imports neither that nor anything that does.
"""
from __future__ import annotations

import functools
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
        """DRF's token check (unknown key, inactive user) and the lifetime, with the user and its
        roles read in one query."""
        from django.contrib.auth import get_user_model
        from django.db import connection

        from common.roles import keep_roles
        from common.sql import model_rows

        cutoff = timezone.now() - timedelta(hours=settings.TRAJLAB_TOKEN_LIFETIME_HOURS)
        rows = model_rows(get_user_model(), _token_user_sql(self.get_model()),
                          [connection.ops.adapt_datetimefield_value(cutoff), key])
        user = next(iter(rows), None)
        if user is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        if user.trajlab_token_expired:
            raise TokenExpired()
        keep_roles(user, user)
        return user, self.get_model()(key=key, user=user)


@functools.cache
def _token_user_sql(token_model) -> str:
    from django.contrib.auth import get_user_model

    from common.roles import role_flags_sql
    from common.sql import columns

    return (f"SELECT {columns(get_user_model(), 'u')}, t.created <= %s AS trajlab_token_expired, {role_flags_sql()} "
            f"FROM {token_model._meta.db_table} t JOIN {get_user_model()._meta.db_table} u ON u.id = t.user_id "
            f"WHERE t.key = %s")
