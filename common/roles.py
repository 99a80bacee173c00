"""The four roles and the DRF permission classes that name them per endpoint (every room reads them).

A role is a Django group of the same name; a person may hold several (an annotator who is also
an adjudicator). Superusers hold every role.
"""
from __future__ import annotations

import functools
from enum import StrEnum

from rest_framework import serializers
from rest_framework.permissions import BasePermission


class Role(StrEnum):
    ANNOTATOR = "annotator"
    ADJUDICATOR = "adjudicator"
    AUDITOR = "auditor"
    MANAGER = "manager"


@functools.cache
def role_flags_sql(user_alias: str = "u") -> str:
    """One ``EXISTS`` column per role (``trajlab_role_<role>``) of the user row ``user_alias``: a
    request's user is read with its roles in one query, and in SQL because the ORM takes longer to
    build that query than the database takes to answer it (:func:`keep_roles`)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    through, group = get_user_model().groups.through._meta.db_table, Group._meta.db_table
    return ", ".join(f"EXISTS (SELECT 1 FROM {through} ug JOIN {group} g ON g.id = ug.group_id "
                     f"WHERE ug.user_id = {user_alias}.id AND g.name = '{r.value}') AS {_flag(r)}" for r in Role)


def keep_roles(user, row) -> None:
    """Remember on ``user`` the roles ``row`` was read with (:func:`role_flags_sql`)."""
    user._trajlab_roles = {r.value for r in Role if getattr(row, _flag(r))}


def _flag(role: Role) -> str:
    return f"trajlab_role_{role.value}"


def user_roles(user) -> set[str]:
    if not user or not user.is_authenticated:
        return set()
    if user.is_superuser:
        return {r.value for r in Role}
    cached = getattr(user, "_trajlab_roles", None)
    if cached is None:
        cached = set(user.groups.filter(name__in=[r.value for r in Role]).values_list("name", flat=True))
        user._trajlab_roles = cached
    return cached


def user_has_role(user, *roles: Role | str) -> bool:
    return bool(user_roles(user) & {str(r) for r in roles})


def user_holds_role(user, role: Role | str) -> bool:
    """Whether an active ``user`` was given ``role`` (its group), a superuser's implied roles
    not counted: what a seat on a review panel needs."""
    return bool(user and user.is_active) and user.groups.filter(name=str(role)).exists()


def roles_required(*roles: Role) -> type[BasePermission]:
    """A permission class that admits authenticated users holding any of ``roles``."""
    names = sorted(str(r) for r in roles)

    class _HasRole(BasePermission):
        message = f"This action needs the role {' or '.join(names)}."

        def has_permission(self, request, view) -> bool:
            return user_has_role(request.user, *names)

    _HasRole.__name__ = "Has" + "Or".join(n.title() for n in names)
    return _HasRole


IsManager = roles_required(Role.MANAGER)
IsStaffMember = roles_required(*Role)  # any of the four roles: read access to shared records


def writes_need(write: type[BasePermission], read: type[BasePermission]) -> type[BasePermission]:
    """A permission class for a list endpoint: ``write`` for POST (creating), ``read`` otherwise."""

    class _WriteOrRead(BasePermission):
        def has_permission(self, request, view) -> bool:
            needed = write() if request.method == "POST" else read()
            self.message = needed.message
            return needed.has_permission(request, view)

    _WriteOrRead.__name__ = f"{write.__name__}Writes{read.__name__}Reads"
    return _WriteOrRead


ManagerWritesStaffReads = writes_need(IsManager, IsStaffMember)  # managers create; every role reads


class ManagerPathsSerializer(serializers.ModelSerializer):
    """A model serializer whose ``manager_only`` fields (server paths: checkpoints, output
    folders) are shown to managers and empty for everyone else (and where no request is in the
    serializer's context)."""

    manager_only: tuple[str, ...] = ()

    def to_representation(self, instance):
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not user_has_role(request.user, Role.MANAGER):
            data = self.hidden_from_others(data)
        return data

    def hidden_from_others(self, data: dict) -> dict:
        """What a reader who is not a manager sees of ``data`` (subclasses hide more)."""
        for name in self.manager_only:
            if name in data:
                data[name] = ""
        return data
