"""Trajlab settings, driven by environment variables.

Embedded mode (the defaults): SQLite under ``var/`` and a filesystem Celery broker, so the
platform runs on a bare machine with no server. Production: set ``DATABASE_URL`` to PostgreSQL
and ``CELERY_BROKER_URL`` to Redis or RabbitMQ, and run workers on as many machines as needed.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return default if value in (None, "") else int(value)


VAR_DIR = Path(os.environ.get("TRAJLAB_VAR_DIR", BASE_DIR / "var")).resolve()

DEBUG = env_bool("DJANGO_DEBUG", False)
# Embedded mode: no DATABASE_URL, or a SQLite one. Anything else is a deployment.
EMBEDDED = os.environ.get("DATABASE_URL", "sqlite").startswith("sqlite")
TRAJLAB_EMBEDDED_SECRET_KEY = "trajlab-embedded-insecure-key"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not EMBEDDED:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DATABASE_URL points at a server database")
    SECRET_KEY = TRAJLAB_EMBEDDED_SECRET_KEY  # embedded (demo) mode only; `serve` keeps it on loopback
# Tests add "testserver" themselves (Django's test environment does).
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "common",
    "accounts",
    "workers",
    "trajectories",
    "annotation",
]

MIDDLEWARE = [
    # Each request's id (X-Request-ID, on its log records and the tasks it queues) and its latency
    # by route for /metrics (common.observability).
    "common.observability.requests.RequestObservabilityMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # A request waits for the database a bounded time, then answers 503 (TRAJLAB_WEB_*_TIMEOUT_MS).
    "common.db_timeouts.WebDatabaseTimeoutsMiddleware",
    "common.security.ContentSecurityPolicyMiddleware",
    # The query string, the path, the headers and path integers checked as text and ids (common.middleware).
    "common.middleware.RequestEdgeMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

if os.environ.get("TRAJLAB_SERVER_TIMING", "").strip().lower() in {"1", "true", "yes", "on"}:
    # Benchmarks: each response says its server time and query count (common.timing).
    MIDDLEWARE.insert(0, "common.timing.ServerTimingMiddleware")

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Transport security (see README "Security") -------------------------------------------------
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto: trust it to say the request was https.
if env_bool("TRAJLAB_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("TRAJLAB_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("TRAJLAB_SECURE_COOKIES", False)
SECURE_HSTS_SECONDS = env_int("TRAJLAB_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("TRAJLAB_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("TRAJLAB_HSTS_PRELOAD", False)
# No inline script anywhere (the API docs load theirs from a URL); styles may be inline because
# the API docs' renderers inject them. An empty TRAJLAB_CSP turns the header off.
TRAJLAB_CSP = os.environ.get(
    "TRAJLAB_CSP",
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "font-src 'self' data:; connect-src 'self'; media-src 'self' blob:; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
)

# --- Sign-in throttling and API tokens (accounts.throttling, accounts.authentication) -----------
TRAJLAB_LOGIN_MAX_FAILURES = env_int("TRAJLAB_LOGIN_MAX_FAILURES", 10)          # per (username, address)
TRAJLAB_LOGIN_ADDRESS_MAX_FAILURES = env_int("TRAJLAB_LOGIN_ADDRESS_MAX_FAILURES", 50)  # per address
TRAJLAB_LOGIN_FAILURE_WINDOW_S = env_int("TRAJLAB_LOGIN_FAILURE_WINDOW_S", 15 * 60)
TRAJLAB_LOGIN_LOCKOUT_S = env_int("TRAJLAB_LOGIN_LOCKOUT_S", 15 * 60)
TRAJLAB_TOKEN_LIFETIME_HOURS = env_int("TRAJLAB_TOKEN_LIFETIME_HOURS", 7 * 24)
# The lockout counters need a cache that every web process shares: Redis when CACHE_URL is set
# (redis://…), else this process's memory (enough for `serve`, one web process).
CACHE_URL = os.environ.get("CACHE_URL", "")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    if CACHE_URL else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "trajlab"}
}

# --- Database -----------------------------------------------------------------------------
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'trajlab.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if (DATABASES["default"]["ENGINE"].endswith("postgresql") and DATABASES["default"]["CONN_MAX_AGE"] != 0
        and env_bool("DATABASE_PREPARED_STATEMENTS", True)):
    # A connection that persists prepares the statements of the request path once
    # (``common.sql.prepared_cursor``); the ORM's statements are never prepared (client-side binding).
    # Off with DATABASE_PREPARED_STATEMENTS=0: behind a pooler in transaction mode that does not keep
    # prepared statements (PgBouncer before 1.21, or without max_prepared_statements).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)
if DATABASES["default"]["ENGINE"].endswith("postgresql") and not env_bool("DATABASE_JIT", False):
    # PostgreSQL compiles a statement whose estimated cost passes jit_above_cost to machine code, at
    # every execution, prepared or not. At a million review items that is 20-150 ms on a claim whose
    # plan runs in a few, and up to a second on each of the export's big reads
    # (tests/benchmarks/bench_pg_scale.py), so this project's connections run without it. DATABASE_JIT=1 keeps the server's setting, e.g. behind a
    # pooler that refuses startup options (set jit on the role there: ALTER ROLE … SET jit = off).
    options = DATABASES["default"].setdefault("OPTIONS", {})
    options["options"] = f"{options.get('options', '')} -c jit=off".strip()
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets the web server read while the worker writes; the timeout waits out a writer. A
    # transaction takes the write lock when it begins (IMMEDIATE): one that began as a reader could
    # not wait for it later and would fail at once with "database is locked". Recursive triggers make
    # the delete half of an INSERT OR REPLACE fire the delete triggers, which refuse to replace an
    # immutable row (SQLite skips them otherwise).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 30, "transaction_mode": "IMMEDIATE",
         "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA recursive_triggers=ON;"}
    )
# How long a web request waits for a lock, and runs one statement, before it is answered 503
# database_busy (common.db_timeouts; 0: no bound). Workers and commands are not bound.
TRAJLAB_WEB_LOCK_TIMEOUT_MS = env_int("TRAJLAB_WEB_LOCK_TIMEOUT_MS", 10_000)
TRAJLAB_WEB_STATEMENT_TIMEOUT_MS = env_int("TRAJLAB_WEB_STATEMENT_TIMEOUT_MS", 30_000)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "static"))
STATICFILES_DIRS = [BASE_DIR / "frontend" / "static"]
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media")).resolve()
MEDIA_URL = "/media/"

# --- Object storage (README, "Object storage") ------------------------------------------------
# Unset: media files live on local disk under MEDIA_ROOT. ``s3://bucket/prefix``: in that bucket,
# reached with the usual AWS_* variables (any S3-compatible server through AWS_S3_ENDPOINT_URL).
TRAJLAB_STORAGE_URL = os.environ.get("TRAJLAB_STORAGE_URL", "").strip()
AWS_S3_ENDPOINT_URL = os.environ.get("AWS_S3_ENDPOINT_URL", "") or None
AWS_ACCESS_KEY_ID = os.environ.get("AWS_ACCESS_KEY_ID", "") or None
AWS_SECRET_ACCESS_KEY = os.environ.get("AWS_SECRET_ACCESS_KEY", "") or None
AWS_DEFAULT_REGION = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
# Objects read from a bucket are kept in this folder, the least recently used removed past the size.
TRAJLAB_STORAGE_CACHE_DIR = Path(os.environ.get("TRAJLAB_STORAGE_CACHE_DIR", VAR_DIR / "cache" / "objects"))
TRAJLAB_STORAGE_CACHE_MB = env_int("TRAJLAB_STORAGE_CACHE_MB", 4096)

LOGIN_URL = "/accounts/login/"
# Django's sign-in, with each request's user read together with its roles (one query, not two).
AUTHENTICATION_BACKENDS = ["accounts.backends.RoleAwareModelBackend"]
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- Uploads --------------------------------------------------------------------------------
# Uploads larger than the memory threshold stream to a temporary file on disk.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_TEMP_DIR = None  # set below once MEDIA_ROOT exists
TRAJLAB_MAX_UPLOAD_BYTES = env_int("TRAJLAB_MAX_UPLOAD_BYTES", 2 * 1024**3)
# Uploads up to this size are imported before the response; larger ones by a worker (202 + job).
TRAJLAB_SYNC_IMPORT_BYTES = env_int("TRAJLAB_SYNC_IMPORT_BYTES", 200 * 1024**2)
FILE_UPLOAD_HANDLERS = [
    "common.uploads.MaxSizeUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# Track imports (trajectories.services.track_files): a larger tracks file is a 413, one with more
# tracks or boxes a 400. The request reads the file (about 15 µs a box); a job stores it.
TRAJLAB_TRACK_FILE_MAX_BYTES = env_int("TRAJLAB_TRACK_FILE_MAX_BYTES", 32 * 1024**2)
TRAJLAB_TRACK_IMPORT_MAX_TRACKS = env_int("TRAJLAB_TRACK_IMPORT_MAX_TRACKS", 50_000)
TRAJLAB_TRACK_IMPORT_MAX_BOXES = env_int("TRAJLAB_TRACK_IMPORT_MAX_BOXES", 1_000_000)
# An import's job stores at most this many duplicate pairs (each a review item); more fail it.
TRAJLAB_TRACK_IMPORT_MAX_DUPLICATES = env_int("TRAJLAB_TRACK_IMPORT_MAX_DUPLICATES", 20_000)

# --- REST API -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "accounts.authentication.ExpiringTokenAuthentication",
    ],
    # Every view names its permissions explicitly; this default only guards a forgotten one.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_SCHEMA_CLASS": "common.schema.TrajlabAutoSchema",
    "EXCEPTION_HANDLER": "common.errors.api_exception_handler",
    # JSON with a size and nesting limit (common.parsers); forms and uploads as DRF parses them.
    # JSON bodies only; the views that take uploads (videos, track imports) and the token endpoint
    # (scripts post forms to it) declare the form parsers they read.
    "DEFAULT_PARSER_CLASSES": ["common.parsers.BoundedJSONParser"],
    # Whichever parser reads a body, what it parsed is checked as text and numbers (common.parsers).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "common.parsers.CheckedContentNegotiation",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    # Proxies in front of the server whose X-Forwarded-For is trusted for the client's address
    # (sign-in lockout per address); 0: use the connection's address.
    "NUM_PROXIES": env_int("TRAJLAB_NUM_PROXIES", 0),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Trajlab API",
    "DESCRIPTION": "Build human-verified text-to-video-trajectory retrieval benchmarks.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Operation ids and tags from the path after /api/ (/healthz and /readyz name theirs).
    "SCHEMA_PATH_PREFIX": r"/api/",
    # A job's status and a run's status are different choice sets that both sit in a "status" field.
    "ENUM_NAME_OVERRIDES": {"StatusEnum": "common.models.Job.Status", "RunStatusEnum": "common.models.RunStatus"},
    # Every integer with its range (common.schema.bounded_integers), after the enums are named.
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "common.schema.bounded_integers"],
}

# --- Celery ---------------------------------------------------------------------------------
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
    for _sub in ("out", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Redis re-delivers a message nobody acknowledged after this many seconds; it must exceed
    # the longest task (tasks are acknowledged when they finish), or a long run is started twice.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 24 * 3600)}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True

# --- Jobs (common.jobs.heartbeat, common.jobs.sweep) ----------------------------------------------
# A running job's worker beats every TRAJLAB_JOB_HEARTBEAT_S seconds; a job not heard from for its
# kind's timeout is failed as abandoned (its worker died) and its run can be queued again. Every
# worker sweeps every TRAJLAB_JOB_SWEEP_S seconds, the web whenever jobs are listed.
# TRAJLAB_JOB_TIMEOUTS (JSON, {job kind: seconds}) overrides the timeouts; "default" covers the rest.
TRAJLAB_JOB_HEARTBEAT_S = env_int("TRAJLAB_JOB_HEARTBEAT_S", 15)
TRAJLAB_JOB_SWEEP_S = env_int("TRAJLAB_JOB_SWEEP_S", 60)


def _job_timeouts() -> dict[str, int]:
    try:
        given = json.loads(os.environ.get("TRAJLAB_JOB_TIMEOUTS", "").strip() or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"TRAJLAB_JOB_TIMEOUTS is not valid JSON: {exc}") from None
    if not isinstance(given, dict):
        raise ImproperlyConfigured("TRAJLAB_JOB_TIMEOUTS is a JSON object: {job kind: seconds}")
    # Training and evaluation load large models and start CUDA, where one call can hold the
    # interpreter (and with it the heartbeat's thread) for minutes.
    timeouts = {"default": 300, "training_run": 900, "evaluation_run": 900, **given}
    short = {kind: s for kind, s in timeouts.items()
             if type(s) is not int or s < 2 * TRAJLAB_JOB_HEARTBEAT_S}
    if short:
        raise ImproperlyConfigured(f"TRAJLAB_JOB_TIMEOUTS {short}: a timeout is whole seconds, at least twice "
                                   f"TRAJLAB_JOB_HEARTBEAT_S ({TRAJLAB_JOB_HEARTBEAT_S})")
    return timeouts


TRAJLAB_JOB_TIMEOUTS = _job_timeouts()

# --- Trajlab --------------------------------------------------------------------------------
# Per web process: this many open videos, each caching decoded frames within this many MiB.
TRAJLAB_OPEN_VIDEOS = env_int("TRAJLAB_OPEN_VIDEOS", 8)
TRAJLAB_FRAME_CACHE_MB = env_int("TRAJLAB_FRAME_CACHE_MB", 64)
TRAJLAB_JPEG_CACHE_MB = env_int("TRAJLAB_JPEG_CACHE_MB", 32)
# Make the review screens' crop strips when a run is stored (trajectories.services.crops).
TRAJLAB_PRECOMPUTE_CROPS = env_bool("TRAJLAB_PRECOMPUTE_CROPS", True)
TRAJLAB_SHARED_DATA = Path(os.environ.get("TRAJLAB_SHARED_DATA", BASE_DIR.parent / "shared" / "data"))


def env_paths(name: str, default: list[Path]) -> list[str]:
    value = os.environ.get(name)
    return [str(default_path) for default_path in default] if value in (None, "") else \
        [p for p in value.split(os.pathsep) if p]


# What the server reads on a manager's say-so (common/reach.py): model files named on the command
# line only under these roots, videos imported through the API only under these (and MEDIA_ROOT,
# where uploads are staged).
TRAJLAB_MODEL_ROOTS = env_paths("TRAJLAB_MODEL_ROOTS", [VAR_DIR / "models", TRAJLAB_SHARED_DATA])
TRAJLAB_IMPORT_ROOTS = env_paths("TRAJLAB_IMPORT_ROOTS", [TRAJLAB_SHARED_DATA])

# The model backends requests may name (common/registry.py): endpoints, model files and folders
# are set here by the operator, never by a request.
def _backends_json() -> dict:
    text, source = os.environ.get("TRAJLAB_BACKENDS", "").strip(), "TRAJLAB_BACKENDS"
    if not text and os.environ.get("TRAJLAB_BACKENDS_FILE"):
        source = os.environ["TRAJLAB_BACKENDS_FILE"]
        try:
            text = Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise ImproperlyConfigured(f"TRAJLAB_BACKENDS_FILE {source!r} cannot be read: {exc}") from None
    try:
        return json.loads(text) if text else {}
    except ValueError as exc:
        raise ImproperlyConfigured(f"{source} is not valid JSON: {exc}") from None


TRAJLAB_BACKENDS = _backends_json()

for _d in (VAR_DIR, MEDIA_ROOT, MEDIA_ROOT / "tmp"):
    _d.mkdir(parents=True, exist_ok=True)
FILE_UPLOAD_TEMP_DIR = str(MEDIA_ROOT / "tmp")

# --- Operations (common.observability, docs/deploy.md) ---------------------------------------------
# /readyz: each check (database, broker, storage) answers within this many milliseconds or fails.
TRAJLAB_READY_TIMEOUT_MS = env_int("TRAJLAB_READY_TIMEOUT_MS", 2000)
# /metrics answers only when this is set, and only to "Authorization: Bearer <token>".
TRAJLAB_METRICS_TOKEN = os.environ.get("TRAJLAB_METRICS_TOKEN", "")
# "json": one JSON object a line with the request id (web and workers); "plain" otherwise.
TRAJLAB_LOG_FORMAT = os.environ.get("TRAJLAB_LOG_FORMAT", "plain").strip().lower()
if TRAJLAB_LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"TRAJLAB_LOG_FORMAT is plain or json, not {TRAJLAB_LOG_FORMAT!r}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "common.observability.context.RequestIdFilter"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
                   "json": {"()": "common.observability.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": TRAJLAB_LOG_FORMAT,
                             "filters": ["request_id"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("TRAJLAB_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # The filesystem broker has no host; kombu warns about that on every connection.
        "kombu.connection": {"level": "ERROR"},
        # FAISS reports at import which CPU-specific builds it could not load (it falls back).
        "faiss.loader": {"level": "WARNING"},
    },
}
