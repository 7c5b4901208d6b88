"""Django settings, read from the environment.

Two run modes, one code path:

- **Embedded** (the default): SQLite file ``db.sqlite3`` in the repository root, the
  in-memory channel layer, static files served by the ASGI app itself.
- **Scale-out**: ``DATABASE_URL=postgresql://...`` and ``REDIS_URL=redis://...``; then
  ``SECRET_KEY`` must be set and static files are expected to be collected and served
  by a front proxy (``SERVE_STATIC=1`` keeps serving them from the app).

Environment variables: ``DEBUG``, ``SECRET_KEY``, ``ALLOWED_HOSTS``,
``CSRF_TRUSTED_ORIGINS``, ``DATABASE_URL``, ``REDIS_URL``, ``SERVE_STATIC``,
``STUDIO_HTTPS``, ``STUDIO_CHECKPOINT_DB``.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from studio.env import (
    database_from_url,
    env_bool,
    env_list,
    is_postgres_url,
    postgres_pool_options,
)
from studio.observability.logs import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG")

DATABASE_URL = os.environ.get("DATABASE_URL", "sqlite:///db.sqlite3")
REDIS_URL = os.environ.get("REDIS_URL", "")
EMBEDDED = not is_postgres_url(DATABASE_URL) and not REDIS_URL


def _dev_secret_key(path: Path) -> str:
    """A random key kept in a git-ignored file, so sessions survive restarts."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    key = secrets.token_urlsafe(50)
    with os.fdopen(fd, "w") as file:
        file.write(key)
    return key


if secret_key := os.environ.get("SECRET_KEY"):
    SECRET_KEY = secret_key
elif DEBUG or EMBEDDED:
    SECRET_KEY = _dev_secret_key(BASE_DIR / ".secret_key")
else:
    raise ImproperlyConfigured(
        "SECRET_KEY must be set when DATABASE_URL or REDIS_URL is."
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "axes",
    "studio",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # the sign-in lockout page
    "studio.middleware.StudioErrorMiddleware",  # last: first to see a view's exception
]

ROOT_URLCONF = "studio.urls"
ASGI_APPLICATION = "studio.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "studio.reviews.context.review_badge",
            ],
        },
    }
]

DATABASES: dict[str, dict[str, Any]] = {
    "default": database_from_url(DATABASE_URL, base_dir=BASE_DIR)
}
if is_postgres_url(DATABASE_URL):
    # Daphne runs each request on a thread of its own: a persistent connection
    # (CONN_MAX_AGE) is never reused and lingers until the garbage collector finds
    # it, and under load Postgres ran out of connections. Django's pool lends each
    # request (and each read of a streaming response) a connection and takes it
    # back; STUDIO_DB_POOL_SIZE is the most one process holds. Connections are
    # checked as they are lent (``postgres_pool_options``).
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"].setdefault(
        "pool", postgres_pool_options(int(os.environ.get("STUDIO_DB_POOL_SIZE", "10")))
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

if REDIS_URL:
    # channels-redis waits for messages with BZPOPMIN for 5 s; redis-py 8 gives every
    # read a 5 s socket timeout by default, so a process that heard nothing for 5 s
    # lost a message and closed a live WebSocket (1011). Reads get longer than the
    # wait (a ?socket_timeout= in REDIS_URL still wins). studio.layers.RedisLayer is
    # channels-redis' layer riding out a Redis outage (the module says how).
    CHANNEL_LAYERS: dict[str, dict[str, Any]] = {
        "default": {
            "BACKEND": "studio.layers.RedisLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 15}],
                "prefix": "studio",
            },
        }
    }
else:
    # In-memory, in one process; publishes from the embedded worker thread wake the
    # consumers at once (studio/layers.py says why Channels' own layer would not).
    CHANNEL_LAYERS = {"default": {"BACKEND": "studio.layers.EmbeddedChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": f"django.contrib.auth.password_validation.{name}"}
    for name in (
        "UserAttributeSimilarityValidator",
        "MinimumLengthValidator",
        "CommonPasswordValidator",
        "NumericPasswordValidator",
    )
]
LOGIN_URL = "login"

# Sign-in throttling (django-axes): after STUDIO_LOGIN_FAILURE_LIMIT failed sign-ins
# of one username from one address, that pair is refused (429, a page saying when to
# come back) for STUDIO_LOGIN_COOLOFF_MINUTES; a success resets the count. Keyed on
# the pair, so nobody can lock a colleague out from elsewhere; behind a proxy, start
# Daphne with --proxy-headers so the address is the client's.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("STUDIO_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = int(os.environ.get("STUDIO_LOGIN_COOLOFF_MINUTES", "15")) / 60
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
LOGIN_REDIRECT_URL = "studio:index"
LOGOUT_REDIRECT_URL = "studio:index"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# Serve static files from the ASGI app (studio.asgi). On in embedded mode; in
# scale-out, run collectstatic and let the front proxy serve STATIC_ROOT.
SERVE_STATIC = env_bool("SERVE_STATIC", default=EMBEDDED or DEBUG)

# Security headers. Strict CSP: our own scripts and styles only, no inline code
# (htmx is configured through <meta name="htmx-config">).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = True

# Behind a TLS-terminating proxy: secure cookies, HSTS, trust X-Forwarded-Proto.
STUDIO_HTTPS = env_bool("STUDIO_HTTPS")
if STUDIO_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = 60 * 60 * 24 * 365
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Text lines by default, JSON with LOG_FORMAT=json; a run's lines carry its ids
# (studio.observability.logs).
LOGGING: dict[str, Any] = logging_config(
    os.environ.get("LOG_FORMAT", "text"), os.environ.get("LOG_LEVEL", "INFO")
)

# Graph registry: name -> "package.module:attr" or "path/to/file.py:attr"; the attr is
# a compiled graph or a callable returning one. See studio/graph_registry.py.
STUDIO_GRAPHS: dict[str, str] = {
    "purchase": "studio.demo_graphs.purchase:build",
    "research": "studio.demo_graphs.research:build",
    "tool_agent": "studio.demo_graphs.tool_agent:build",
}
# A langgraph.json-style file whose "graphs" map is added to (and overrides) the above;
# its paths are relative to the file's folder. Lets a LangGraph project open as it is.
STUDIO_GRAPHS_FILE = os.environ.get("STUDIO_GRAPHS_FILE", "")

# One in-process worker thread runs queued runs (embedded mode). Scale-out runs
# `manage.py studio_worker` processes instead.
STUDIO_EMBEDDED_WORKER = env_bool("STUDIO_EMBEDDED_WORKER", default=EMBEDDED)

# Purchase approval demo: the budget limit in fen (100,000 CNY).
STUDIO_PURCHASE_BUDGET_LIMIT_MINOR = int(
    os.environ.get("STUDIO_PURCHASE_BUDGET_LIMIT_MINOR", "10000000")
)

# The tool agent demo uses a scripted model unless an OpenAI-compatible endpoint is set.
STUDIO_OPENAI_BASE_URL = os.environ.get("STUDIO_OPENAI_BASE_URL", "")
STUDIO_OPENAI_API_KEY = os.environ.get("STUDIO_OPENAI_API_KEY", "")
STUDIO_OPENAI_MODEL = os.environ.get("STUDIO_OPENAI_MODEL", "gpt-4o-mini")

# The embedded SQLite checkpointer's file (engine.checkpoint.sqlite).
STUDIO_CHECKPOINT_DB = Path(
    os.environ.get("STUDIO_CHECKPOINT_DB", BASE_DIR / "checkpoints.sqlite3")
)

# Health checks (studio.observability.health): /readyz wants a worker heartbeat
# younger than STUDIO_WORKER_STALE_SECONDS while STUDIO_EXPECT_WORKERS is on, and
# gives each check STUDIO_READYZ_TIMEOUT seconds.
STUDIO_EXPECT_WORKERS = env_bool("STUDIO_EXPECT_WORKERS", default=True)
STUDIO_WORKER_STALE_SECONDS = float(os.environ.get("STUDIO_WORKER_STALE_SECONDS", "30"))
# A run whose worker stops (dies, loses its lease) on each of this many claims ends as
# an error instead of being queued again (studio.services.runs.requeue_expired).
STUDIO_RUN_MAX_ATTEMPTS = int(os.environ.get("STUDIO_RUN_MAX_ATTEMPTS", "3"))
STUDIO_READYZ_TIMEOUT = float(os.environ.get("STUDIO_READYZ_TIMEOUT", "3"))
# /metrics (studio.observability.metrics) answers a scraper that sends
# "Authorization: Bearer <STUDIO_METRICS_TOKEN>" or connects from an address in
# STUDIO_METRICS_ALLOW (comma-separated addresses or networks); with neither set
# it is off (404). Several processes: PROMETHEUS_MULTIPROC_DIR.
STUDIO_METRICS_TOKEN = os.environ.get("STUDIO_METRICS_TOKEN", "")
STUDIO_METRICS_ALLOW = env_list("STUDIO_METRICS_ALLOW", "")

# Purchase approval: above this amount (fen; default 50,000 CNY) a member of
# senior-reviewers approves after a member of reviewers.
STUDIO_SECOND_LEVEL_ABOVE_MINOR = int(
    os.environ.get("STUDIO_SECOND_LEVEL_ABOVE_MINOR", "5000000")
)
