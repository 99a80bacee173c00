"""The schema is true: Schemathesis, every check on (``--checks all``), generates requests for every
operation of ``/api/schema/`` against a live server, as a manager and as an annotator, each on a
fresh database holding a small world (frozen pools, descriptions, queries and their open rows).

Each run fails on any server error, undocumented status code or content type, response that violates
its schema, missing header, request with invalid credentials that is accepted, schema-violating
request that is accepted, or resource that outlives its deletion. Schema-valid requests that the API
refuses for what the schema cannot say (a record that does not exist in the request's split, a
state that forbids the action) answer a documented 4xx; they are counted in
``var/test/schema_fuzz_<role>.json``, not failed.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accounts.services import token_for
from tests.annotation.conftest import annotators, reviewable_run, world  # noqa: F401 (fixtures, reused)

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES = 3         # per operation and phase: the CI size; raise it locally with TRAJLAB_FUZZ_EXAMPLES
REPORTED_ONLY = {"ST202"}   # schema-valid data refused with a documented 4xx
# The coverage phase (every parameter at its boundaries, both ways) reads input validation, which is
# the same for every role: the manager's run does it; the annotator's run is about what a reviewer
# may call and what comes back.
PHASES = {"manager": "examples,coverage,fuzzing", "annotator": "examples,fuzzing"}
# One Schemathesis worker: with two threads, Hypothesis describing its strategies calls ``ast.parse``
# from both at once, which this Python (3.11.7) does not survive ("AST constructor recursion depth
# mismatch", a runtime error in the report); the suite's other process keeps the second core busy.


def st_command() -> list[str]:
    st = Path(sys.executable).with_name("st")
    if not st.exists():
        found = shutil.which("st")
        if found is None:
            pytest.fail("schemathesis is not installed: it is part of requirements/lock.txt (make venv)")
        st = Path(found)
    return [str(st)]


@pytest.fixture
def fuzz_world(world, media_root, settings, tmp_path):  # noqa: F811 (the fixture imported above)
    settings.VAR_DIR = tmp_path / "var"
    return world


@pytest.mark.parametrize("role", ["manager", "annotator"])
def test_schemathesis_finds_no_server_error_and_no_schema_violation(role, fuzz_world, live_server, make_user, tmp_path,
                                                                    settings):
    user = make_user(role, username=f"fuzz-{role}")
    config = tmp_path / "schemathesis.toml"
    config.write_text(f'[auth.openapi.tokenAuth]\napi_key = "Token {token_for(user=user)}"\n', encoding="utf-8")
    report = tmp_path / "report.json"
    examples = os.environ.get("TRAJLAB_FUZZ_EXAMPLES", str(EXAMPLES))
    command = [*st_command(), "--config-file", str(config), "run", f"{live_server.url}/api/schema/",
               "--checks", "all", "--max-examples", examples, "--phases", PHASES[role],
               "--seed", "20261201", "--workers", "1", "--no-shrink", "--max-failures", "100000",
               "--report", "json", "--report-json-path", str(report), "--warnings", "off",
               # its 503 names a dependency that did not answer in time: an answer, not a server
               # error (tests/common/test_observability.py covers both of its answers)
               "--exclude-path", "/readyz"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if not report.exists():
        pytest.fail(f"schemathesis did not run:\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}")
    result = json.loads(report.read_text(encoding="utf-8"))
    cases = result["test_cases"]
    failures = {f["code"]: f for f in result["failures"]}
    summary = {"role": role, "examples": int(examples), "operations": result["operations"], "test_cases": cases,
               "findings": {code: {"title": f["title"], "count": f["count"], "operations": f["operations"]}
                            for code, f in sorted(failures.items())}}
    out = Path(settings.BASE_DIR) / "var" / "test" / f"schema_fuzz_{role}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2), encoding="utf-8")     # the figures, for people
    failing = {code: f for code, f in failures.items() if code not in REPORTED_ONLY}
    assert not failing, "\n".join(f"{code} {f['title']} ({f['count']}): {f['operations']}"
                                  for code, f in sorted(failing.items())) + "\n" + run.stdout[-6000:]
    # An error is Schemathesis failing to run a case (a request that raised, a generation error):
    # its report keeps only the title; the console output has the message and the traceback.
    assert not result["errors"], f"{result['errors']}\n{run.stdout[-8000:]}"
