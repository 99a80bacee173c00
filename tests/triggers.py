"""The database's own rules (``common.db_triggers``) set aside for a test's writes, as the tables'
owner may: ``ALTER TABLE … DISABLE TRIGGER USER`` needs no superuser (``session_replication_role``
does, and the application's role must not be one: README, Security). PostgreSQL only."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

TRUNCATE = 32  # pg_trigger.tgtype's bit for a TRUNCATE trigger


def protected_tables(cursor, *, truncate: bool = False) -> list[str]:
    """Tables with triggers of their own (with a ``TRUNCATE`` trigger when ``truncate``)."""
    cursor.execute("SELECT DISTINCT tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"
                   + (f" AND tgtype & {TRUNCATE} <> 0" if truncate else "") + " ORDER BY 1")
    return [row[0] for row in cursor.fetchall()]


def set_aside(tables: list[str]) -> tuple[list[str], list[str]]:
    """The statements that turn the user triggers of ``tables`` off, and those that turn them on."""
    return ([f"ALTER TABLE {t} DISABLE TRIGGER USER" for t in tables],
            [f"ALTER TABLE {t} ENABLE TRIGGER USER" for t in tables])


@contextmanager
def triggers_set_aside(*tables: str) -> Iterator[None]:
    """Within: writes to ``tables`` (every table with triggers if none are named) pass their
    triggers. The ``ALTER TABLE`` locks the tables until the surrounding transaction ends; it
    cannot run while foreign-key checks of the transaction wait for its end, so those are made at
    once, within, and deferred again after (Django's keys are ``INITIALLY DEFERRED``)."""
    with connection.cursor() as cursor:
        off, on = set_aside(list(tables) or protected_tables(cursor))
        for sql in ["SET CONSTRAINTS ALL IMMEDIATE", *off]:
            cursor.execute(sql)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for sql in [*on, "SET CONSTRAINTS ALL DEFERRED"]:
                cursor.execute(sql)
