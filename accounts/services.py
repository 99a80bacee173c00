from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from rest_framework.authtoken.models import Token

from accounts.roles import Role
from common.errors import ApplicationError


def roles_ensure() -> None:
    """Create the role groups (idempotent)."""
    for role in Role:
        Group.objects.get_or_create(name=role.value)


@transaction.atomic
def user_create(*, username: str, password: str, roles: list[str], email: str = "", is_superuser: bool = False):
    """Create a user holding ``roles``; refuses unknown roles and taken names."""
    unknown = set(roles) - {r.value for r in Role}
    if unknown:
        raise ApplicationError(f"unknown role(s) {sorted(unknown)}; known: {[r.value for r in Role]}",
                               code="unknown_role")
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        raise ApplicationError(f"user {username!r} already exists", code="user_exists")
    roles_ensure()
    if is_superuser:
        user = User.objects.create_superuser(username=username, email=email, password=password)
    else:
        user = User.objects.create_user(username=username, email=email, password=password)
    user.groups.set(Group.objects.filter(name__in=roles))
    return user


def token_for(*, user) -> str:
    token, _ = Token.objects.get_or_create(user=user)
    return token.key
