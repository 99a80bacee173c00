"""Database triggers for rules the database must hold (immutability, locks), per vendor.

Migrations build their operation with :func:`trigger_operation`; PostgreSQL and SQLite are the
supported databases (production and embedded mode), anything else is refused when migrating.
"""
from __future__ import annotations

from django.db import migrations


def trigger_operation(*, create: dict[str, list[str]], drop: dict[str, list[str]]) -> migrations.RunPython:
    """A migration operation that runs ``create[vendor]`` forwards and ``drop[vendor]`` backwards."""

    def forwards(apps, schema_editor):
        statements = create.get(schema_editor.connection.vendor)
        if statements is None:
            raise RuntimeError(f"no triggers for {schema_editor.connection.vendor}; use PostgreSQL or SQLite")
        for sql in statements:
            schema_editor.execute(sql, params=None)  # params=None: '%' in trigger bodies is literal

    def backwards(apps, schema_editor):
        for sql in drop.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, params=None)

    return migrations.RunPython(forwards, backwards)
