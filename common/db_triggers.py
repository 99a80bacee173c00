"""Database triggers for rules the database must hold (immutability, locks), per vendor.

Migrations build their operation with :func:`trigger_operation`, or from the three common rules
(:func:`immutable_rows`, :func:`sealed_rows`, :func:`sealed_children`, joined with ``+``).
PostgreSQL and SQLite are the supported databases (production and embedded mode); anything else
is refused when migrating.

Row triggers miss two writes: PostgreSQL's ``TRUNCATE`` fires no row trigger, so every protected
table also gets :func:`truncate_refused`; SQLite's ``INSERT OR REPLACE`` deletes the row it
replaces without firing delete triggers unless the connection sets ``PRAGMA recursive_triggers``,
which ``config/settings.py`` sets on every connection (then the delete triggers refuse it).
"""
from __future__ import annotations

from dataclasses import dataclass

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


# -- the three immutability rules, for PostgreSQL and SQLite ----------------------------------------
# Messages must not contain '%' (a placeholder in PL/pgSQL's RAISE).
@dataclass(frozen=True)
class Triggers:
    """Trigger statements per vendor and the statements that drop them."""

    create: dict[str, list[str]]
    drop: dict[str, list[str]]

    def __add__(self, other: Triggers) -> Triggers:
        vendors = set(self.create) | set(other.create)
        return Triggers(create={v: self.create.get(v, []) + other.create.get(v, []) for v in vendors},
                        drop={v: self.drop.get(v, []) + other.drop.get(v, []) for v in vendors})

    def operation(self) -> migrations.RunPython:
        return trigger_operation(create=self.create, drop=self.drop)


def _pg_function(name: str, body: str) -> str:
    return f"""
    CREATE OR REPLACE FUNCTION {name}() RETURNS trigger AS $$
    {body}
    $$ LANGUAGE plpgsql
    """


def _pg_drop(name: str, table: str) -> list[str]:
    return [f"DROP TRIGGER IF EXISTS {name} ON {table}", f"DROP FUNCTION IF EXISTS {name}()"]


def _sqlite(name: str, event: str, table: str, message: str, when: str = "") -> str:
    condition = f"\n    WHEN {when}" if when else ""
    return f"""
    CREATE TRIGGER {name} BEFORE {event} ON {table}{condition}
    BEGIN SELECT RAISE(ABORT, '{message}'); END
    """


def immutable_rows(table: str, *, name: str, message: str) -> Triggers:
    """Rows of ``table`` are never updated or deleted."""
    fn = f"{name}_immutable"
    body = f"""BEGIN
        RAISE EXCEPTION '{message} (row %)', OLD.id USING ERRCODE = 'integrity_constraint_violation';
    END"""
    return Triggers(
        create={"postgresql": [_pg_function(fn, body), f"CREATE TRIGGER {fn} BEFORE UPDATE OR DELETE ON {table} "
                                                        f"FOR EACH ROW EXECUTE FUNCTION {fn}()"],
                "sqlite": [_sqlite(f"{name}_no_update", "UPDATE", table, message),
                           _sqlite(f"{name}_no_delete", "DELETE", table, message)]},
        drop={"postgresql": _pg_drop(fn, table), "sqlite": [f"DROP TRIGGER IF EXISTS {name}_no_update",
                                                             f"DROP TRIGGER IF EXISTS {name}_no_delete"]})


def sealed_rows(table: str, *, name: str, message: str, flag: str = "sealed_at") -> Triggers:
    """A row of ``table`` whose ``flag`` is set is never updated or deleted."""
    fn = f"{name}_sealed"
    body = f"""BEGIN
        IF OLD.{flag} IS NOT NULL THEN
            RAISE EXCEPTION '{message} (row %)', OLD.id USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END"""
    when = f"OLD.{flag} IS NOT NULL"
    return Triggers(
        create={"postgresql": [_pg_function(fn, body), f"CREATE TRIGGER {fn} BEFORE UPDATE OR DELETE ON {table} "
                                                        f"FOR EACH ROW EXECUTE FUNCTION {fn}()"],
                "sqlite": [_sqlite(f"{name}_no_update", "UPDATE", table, message, when),
                           _sqlite(f"{name}_no_delete", "DELETE", table, message, when)]},
        drop={"postgresql": _pg_drop(fn, table), "sqlite": [f"DROP TRIGGER IF EXISTS {name}_no_update",
                                                             f"DROP TRIGGER IF EXISTS {name}_no_delete"]})


def sealed_children(table: str, *, name: str, parent: str, fk: str, message: str, flag: str = "sealed_at") -> Triggers:
    """Rows of ``table`` whose parent (``fk`` into ``parent``) is sealed are never inserted, updated
    (to or from a sealed parent) or deleted."""
    fn = f"{name}_sealed"
    body = f"""DECLARE
        target bigint := CASE WHEN TG_OP = 'DELETE' THEN OLD.{fk} ELSE NEW.{fk} END;
    BEGIN
        IF EXISTS (SELECT 1 FROM {parent} p WHERE p.id = target AND p.{flag} IS NOT NULL)
           OR (TG_OP = 'UPDATE' AND EXISTS (SELECT 1 FROM {parent} p WHERE p.id = OLD.{fk} AND p.{flag} IS NOT NULL)) THEN
            RAISE EXCEPTION '{message} (parent %)', target USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END"""

    def sealed(ref: str) -> str:
        return f"(SELECT {flag} FROM {parent} WHERE id = {ref}.{fk}) IS NOT NULL"

    return Triggers(
        create={"postgresql": [_pg_function(fn, body), f"CREATE TRIGGER {fn} BEFORE INSERT OR UPDATE OR DELETE ON "
                                                        f"{table} FOR EACH ROW EXECUTE FUNCTION {fn}()"],
                "sqlite": [_sqlite(f"{name}_no_insert", "INSERT", table, message, sealed("NEW")),
                           _sqlite(f"{name}_no_update", "UPDATE", table, message,
                                   f"{sealed('OLD')} OR {sealed('NEW')}"),
                           _sqlite(f"{name}_no_delete", "DELETE", table, message, sealed("OLD"))]},
        drop={"postgresql": _pg_drop(fn, table),
              "sqlite": [f"DROP TRIGGER IF EXISTS {name}_{s}" for s in ("no_insert", "no_update", "no_delete")]})


def truncate_refused(table: str, *, name: str, message: str, protected: str = "TRUE") -> Triggers:
    """``TRUNCATE`` of ``table`` (also through ``CASCADE``) is refused on PostgreSQL while a row of it
    matches ``protected`` (an SQL condition over the row ``t``; every row by default).

    A statement-level trigger: row triggers never see a truncate. SQLite has no ``TRUNCATE``; its
    ``DELETE FROM`` fires the row triggers.
    """
    fn = f"{name}_no_truncate"
    body = f"""BEGIN
        IF EXISTS (SELECT 1 FROM {table} t WHERE {protected}) THEN
            RAISE EXCEPTION '{message}: {table} cannot be truncated' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NULL;
    END"""
    return Triggers(
        create={"postgresql": [_pg_function(fn, body), f"CREATE TRIGGER {fn} BEFORE TRUNCATE ON {table} "
                                                        f"FOR EACH STATEMENT EXECUTE FUNCTION {fn}()"],
                "sqlite": []},
        drop={"postgresql": _pg_drop(fn, table), "sqlite": []})
