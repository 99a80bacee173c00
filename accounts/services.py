from __future__ import annotations

from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from rest_framework.authtoken.models import Token

from accounts.authentication import token_expired
from accounts.throttling import client_address, login_failure_record, login_success_record
from common.errors import ApplicationError
from common.roles import Role


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


@transaction.atomic
def token_rotate(*, user) -> str:
    """Replace ``user``'s API token with a fresh key (the old key stops working at once) and
    return it. Locks the user's row so two simultaneous rotations leave one token."""
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user).key


def token_for(*, user) -> str:
    """``user``'s current API token, a fresh one if there is none or it has expired."""
    token = Token.objects.filter(user=user).first()
    if token is None or token_expired(token=token):
        return token_rotate(user=user)
    return token.key


def token_obtain(*, request, username: str, password: str, rotate: bool = False) -> str:
    """Check ``username``/``password`` and return the user's token: the current one while it is
    valid (so several scripts of one person keep working), a fresh one when it has expired or
    ``rotate`` asks for it (the old key stops working at once, :func:`token_rotate`).
    A wrong password counts towards the sign-in lockout (``accounts.throttling``); the lockout
    itself is checked before this, by the endpoint's throttle."""
    user = authenticate(request, username=username, password=password)
    if user is None:
        login_failure_record(username=username, address=client_address(request))
        raise ApplicationError("wrong username or password", code="bad_credentials", status_code=401)
    login_success_record(username=username, address=client_address(request))
    return token_rotate(user=user) if rotate else token_for(user=user)
