"""Database triggers for rules the database must hold (immutability, locks), per vendor.

Migrations build their operation with :func:`trigger_operation`, or from the three common rules
(:func:`immutable_rows`, :func:`sealed_rows`, :func:`sealed_children`, joined with ``+``).
PostgreSQL and SQLite are the supported databases (production and embedded mode); anything else
is refused when migrating.

Row triggers miss two writes: PostgreSQL's ``TRUNCATE`` fires no row trigger, so every protected
table also gets :func:`truncate_refused`; SQLite's ``INSERT OR REPLACE`` (and ``UPDATE OR
REPLACE``) deletes the row it replaces without firing delete triggers unless the connection sets
``PRAGMA recursive_triggers``. ``config/settings.py`` sets it on Django's connections, but any other
connection (the ``sqlite3`` shell, a script) does not, so every protected table also gets
:func:`replace_refused`, which refuses the write before it replaces anything, on any connection.
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


def parent_sealed(parent: str, fk: str, flag: str = "sealed_at") -> str:
    """An SQL condition over a row ``t``: its parent (``t.{fk}`` into ``parent``) is sealed."""
    return f"EXISTS (SELECT 1 FROM {parent} p WHERE p.id = t.{fk} AND p.{flag} IS NOT NULL)"


def replace_refused(table: str, *, name: str, keys: list[tuple[str, ...]], message: str,
                    protected: str = "TRUE") -> Triggers:
    """SQLite's ``INSERT OR REPLACE`` and ``UPDATE OR REPLACE`` of a row of ``table`` that matches
    ``protected`` (an SQL condition over the existing row ``t``; every row by default) are refused,
    on any connection.

    ``keys`` are the table's unique keys besides ``id`` (column tuples): every key a ``REPLACE`` can
    meet a row by. The ``BEFORE INSERT`` trigger aborts when a protected row has the new row's id
    or any of its keys, the ``BEFORE UPDATE`` one when a protected row other than the updated one
    does. A plain write they refuse would fail on a unique constraint anyway, so they cost ordinary
    writes only index probes; a write that would pass over the row (``INSERT OR IGNORE``,
    ``ON CONFLICT DO NOTHING``) is refused too.
    PostgreSQL has no ``REPLACE``; its ``INSERT ... ON CONFLICT DO UPDATE`` fires update triggers.
    """

    def hits(*, update: bool) -> str:
        other = " AND t.id <> OLD.id" if update else ""
        return "\n      OR ".join(
            f"EXISTS (SELECT 1 FROM {table} t WHERE {' AND '.join(f't.{c} = NEW.{c}' for c in key)}{other}"
            f" AND ({protected}))" for key in [("id",), *keys])

    replaced = f"{message} (a REPLACE would overwrite it)"
    return Triggers(
        create={"postgresql": [],
                "sqlite": [_sqlite(f"{name}_no_replace", "INSERT", table, replaced, hits(update=False)),
                           _sqlite(f"{name}_no_update_replace", "UPDATE", table, replaced, hits(update=True))]},
        drop={"postgresql": [], "sqlite": [f"DROP TRIGGER IF EXISTS {name}_no_replace",
                                           f"DROP TRIGGER IF EXISTS {name}_no_update_replace"]})


def inserts_logged(table: str, *, name: str, log: str, columns: dict[str, str]) -> Triggers:
    """Every row inserted into ``table`` (by any statement, ``COPY`` included) writes a row into
    ``log``: ``columns`` maps the log's columns to the inserted row's. On PostgreSQL one
    statement-level trigger copies the statement's new rows at once (a transition table); on
    SQLite a row trigger."""
    fn = f"{name}_logged"
    targets, sources = ", ".join(columns), ", ".join(columns.values())
    body = f"""BEGIN
        INSERT INTO {log} ({targets}) SELECT {sources} FROM inserted;
        RETURN NULL;
    END"""
    values = ", ".join(f"NEW.{c}" for c in columns.values())
    return Triggers(
        create={"postgresql": [_pg_function(fn, body), f"CREATE TRIGGER {fn} AFTER INSERT ON {table} "
                                                        f"REFERENCING NEW TABLE AS inserted "
                                                        f"FOR EACH STATEMENT EXECUTE FUNCTION {fn}()"],
                "sqlite": [f"CREATE TRIGGER {fn} AFTER INSERT ON {table} "
                           f"BEGIN INSERT INTO {log} ({targets}) VALUES ({values}); END"]},
        drop={"postgresql": _pg_drop(fn, table), "sqlite": [f"DROP TRIGGER IF EXISTS {fn}"]})
