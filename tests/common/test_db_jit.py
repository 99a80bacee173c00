"""PostgreSQL connections of the project run without JIT compilation (``config/settings.py``),
unless ``DATABASE_JIT=1`` keeps the server's setting."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_a_connection_compiles_no_statement():
    if connection.vendor != "postgresql":
        pytest.skip("JIT compilation is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"


@pytest.mark.parametrize(("jit", "expected"), [(None, "-c jit=off"), ("1", None), ("0", "-c jit=off")])
def test_database_jit_decides_the_connection_option(jit, expected):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_JIT"}
    env.update(DATABASE_URL="postgres://someone@127.0.0.1:5432/somewhere", DJANGO_SECRET_KEY="test-only-secret-key",
               DJANGO_SETTINGS_MODULE="config.settings", **({"DATABASE_JIT": jit} if jit is not None else {}))
    out = subprocess.run(
        [sys.executable, "-c", "import json; from django.conf import settings; "
                               "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {}).get('options')))"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == expected
