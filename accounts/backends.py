"""The sign-in backend: Django's, with the signed-in user's roles read in the same query as the
user on every request (``common.roles.role_flags_sql``), not in one more."""
from __future__ import annotations

import functools

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend

from common.roles import keep_roles, role_flags_sql
from common.sql import columns, model_rows


@functools.cache
def _user_sql() -> str:
    user = get_user_model()
    return f"SELECT {columns(user, 'u')}, {role_flags_sql()} FROM {user._meta.db_table} u WHERE u.id = %s"


class RoleAwareModelBackend(ModelBackend):
    def get_user(self, user_id):
        user = next(iter(model_rows(get_user_model(), _user_sql(), [user_id])), None)
        if user is None or not self.user_can_authenticate(user):
            return None
        keep_roles(user, user)
        return user
