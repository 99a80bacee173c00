"""``EXPLAIN (ANALYZE, BUFFERS)`` of the statements a code path runs on PostgreSQL, for the
benchmarks' plan notes.

- :func:`explained` explains each statement the block runs just before it runs, in a savepoint (or
  a transaction) rolled back at once, so the plan is the one for the database as the statement
  finds it and nothing it writes stays; with ``generic`` also the generic plan (``PREPARE``, then
  ``EXECUTE`` under ``plan_cache_mode = force_generic_plan``), which a connection that prepares
  its statements (``common.sql.prepared_cursor``) may switch to after five runs (PostgreSQL does
  when its estimated cost is not above the custom plans');
- :func:`recorded` only records the statements (and the ``SELECT`` of each ``COPY (...) TO``), and
  :func:`explain_recorded` explains the distinct read-only ones afterwards.

Statements go through Django's execute wrappers; ``COPY`` through psycopg's ``Cursor.copy``, which
both wrap for the block's length, or through a function of the caller's that starts it on libpq
(``recorded(copy_commands=...)``).
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from django.db import connection

EXPLAIN = "EXPLAIN (ANALYZE, BUFFERS) "
SKIPPED = re.compile(r"^\s*(SAVEPOINT|RELEASE|ROLLBACK|BEGIN|COMMIT|SET|SHOW|DECLARE|FETCH|CLOSE)\b", re.I)
COPY_OUT = re.compile(r"^\s*COPY\s*\((?P<select>.*)\)\s*TO\s+STDOUT", re.I | re.S)
NAMED = re.compile(r"%\((\w+)\)s")
POSITIONAL = re.compile(r"(?<!%)%s")


@dataclass
class Plan:
    sql: str
    params: object
    runs: int = 1
    custom: str = ""
    generic: str = ""
    error: str = ""
    execution_ms: float | None = None

    def text(self, *, width: int = 400) -> str:
        head = self.sql if len(self.sql) <= width else self.sql[:width] + " …"
        out = [f"-- statement (run {self.runs}x): {head}", f"-- parameters: {_short(self.params)}"]
        if self.error:
            out.append(f"-- not explained: {self.error}")
        if self.custom:
            out += ["-- plan with these parameters:", self.custom]
        if self.generic:
            out += ["-- generic plan (a prepared statement may switch to it after five runs):", self.generic]
        return "\n".join(out)


@dataclass
class Recording:
    plans: list[Plan] = field(default_factory=list)


def _short(params, limit: int = 300) -> str:
    text = repr(params)
    return text if len(text) <= limit else text[:limit] + " …"


def _execution_ms(plan: str) -> float | None:
    found = re.search(r"Execution Time: ([\d.]+) ms", plan)
    return float(found.group(1)) if found else None


def _numbered(sql: str, params) -> tuple[str, list]:
    """``sql`` with ``$n`` placeholders for ``PREPARE`` and the arguments in their order."""
    if isinstance(params, dict):
        order: list[str] = []

        def name(match):
            if match.group(1) not in order:
                order.append(match.group(1))
            return f"${order.index(match.group(1)) + 1}"

        return NAMED.sub(name, sql).replace("%%", "%"), [params[n] for n in order]
    counter = iter(range(1, 10_000))
    return POSITIONAL.sub(lambda _: f"${next(counter)}", sql).replace("%%", "%"), list(params or [])


def _plan(raw, statement: str, params) -> str:
    with raw.cursor() as cursor:  # Django's client-side binding: the parameters are written in
        cursor.execute(statement, params or None)
        return "\n".join(r[0] for r in cursor.fetchall())


def _generic(raw, sql: str, params, prepared: list) -> str:
    """The generic plan of ``sql``: prepared, then executed under ``force_generic_plan``; the
    prepared statement's name goes to ``prepared``."""
    numbered, args = _numbered(sql, params)
    with raw.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE bench_generic AS {numbered}")
        prepared.append("bench_generic")
    return _plan(raw, f"{EXPLAIN}EXECUTE bench_generic({', '.join(['%s'] * len(args))})", args)


def _explain_rolled_back(raw, sql: str, params, *, generic: bool) -> Plan:
    """Explain ``sql`` in a savepoint (or a transaction) rolled back afterwards: with ``generic``
    first the generic plan, in a savepoint of its own so that what it writes is undone before the
    second run, then the plan with the parameters written in."""
    plan = Plan(sql=sql, params=params)
    own = raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    raw.execute("BEGIN" if own else "SAVEPOINT bench_explain")
    try:
        if generic and params:
            raw.execute("SAVEPOINT bench_generic")
            prepared: list[str] = []
            try:
                plan.generic = _generic(raw, sql, params, prepared)
            except psycopg.Error as exc:
                plan.error = f"generic plan: {str(exc).strip().splitlines()[0]}"
            raw.execute("ROLLBACK TO SAVEPOINT bench_generic")
            for name in prepared:  # a rollback does not undo PREPARE
                raw.execute(f"DEALLOCATE {name}")
        plan.custom = _plan(raw, EXPLAIN + sql, params)
    except psycopg.Error as exc:
        plan.error = str(exc).strip().splitlines()[0]
    finally:
        raw.execute("ROLLBACK" if own else "ROLLBACK TO SAVEPOINT bench_explain")
    plan.execution_ms = _execution_ms(plan.custom)
    return plan


@contextmanager
def _copies(seen):
    """Call ``seen(cursor, select, params)`` before each ``COPY (SELECT …) TO`` psycopg runs in the block."""
    original = psycopg.Cursor.copy

    def copy(self, statement, params=None, **kwargs):
        text = statement if isinstance(statement, str) else statement.as_string(self.connection)
        select = COPY_OUT.match(text)
        if select:
            seen(self, select.group("select"), params)
        return original(self, statement, params, **kwargs)

    psycopg.Cursor.copy = copy
    try:
        yield
    finally:
        psycopg.Cursor.copy = original


@contextmanager
def explained(*, generic: bool = False):
    """Explain every statement the block runs before it runs, the ``SELECT`` of a ``COPY (…) TO``
    included (see the module docstring); yields a :class:`Recording` whose ``plans`` fill in as it
    goes."""
    recording = Recording()

    def wrapper(execute, sql, params, many, context):
        if not many and not SKIPPED.match(sql):
            recording.plans.append(_explain_rolled_back(connection.connection, sql, params, generic=generic))
        return execute(sql, params, many, context)

    def copy_seen(cursor, select, params):
        recording.plans.append(_explain_rolled_back(cursor.connection, select, params, generic=generic))

    with _copies(copy_seen), connection.execute_wrapper(wrapper):
        yield recording


@contextmanager
def _commands(functions, seen):
    """Call ``seen(None, select, None)`` before each call of ``functions`` (``(owner, name)``
    pairs; absent ones are left out) that is handed a ``COPY (SELECT …) TO`` text: for code that
    starts its ``COPY`` on libpq directly, beneath psycopg's cursors."""
    saved = []
    for owner, name in functions:
        original = getattr(owner, name, None)
        if original is None:
            continue

        def wrapper(*args, _original=original, **kwargs):
            for arg in args:
                select = COPY_OUT.match(arg) if isinstance(arg, str) else None
                if select:
                    seen(None, select.group("select"), None)
            return _original(*args, **kwargs)

        setattr(owner, name, wrapper)
        saved.append((owner, name, original))
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


@contextmanager
def recorded(*, copy_commands=()):
    """Record the statements the block runs, the ``SELECT`` of a ``COPY (…) TO`` included (also
    those sent through ``copy_commands``, see :func:`_commands`), without explaining them; yields
    a :class:`Recording` (plans with only ``sql`` and ``params``)."""
    recording = Recording()

    def wrapper(execute, sql, params, many, context):
        if not many and not SKIPPED.match(sql):
            recording.plans.append(Plan(sql=sql, params=params))
        return execute(sql, params, many, context)

    def copy_seen(cursor, select, params):
        recording.plans.append(Plan(sql=select, params=params))

    with _copies(copy_seen), _commands(copy_commands, copy_seen), connection.execute_wrapper(wrapper):
        yield recording


def explain_recorded(recording: Recording, *, reads_only: bool = True) -> list[Plan]:
    """Explain each distinct statement of ``recording`` once (``runs``: how often it ran), in a
    transaction rolled back afterwards; with ``reads_only`` only ``SELECT``s and ``WITH``s."""
    distinct: dict[str, Plan] = {}
    for p in recording.plans:
        if p.sql in distinct:
            distinct[p.sql].runs += 1
        elif not reads_only or re.match(r"^\s*(SELECT|WITH)\b", p.sql, re.I):
            distinct[p.sql] = Plan(sql=p.sql, params=p.params)
    connection.ensure_connection()
    out = []
    for p in distinct.values():
        explained_plan = _explain_rolled_back(connection.connection, p.sql, p.params, generic=False)
        explained_plan.runs = p.runs
        out.append(explained_plan)
    return out
