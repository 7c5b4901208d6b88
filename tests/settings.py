"""Settings for the test suite: the project's, made fast and isolated.

pytest-django creates (and destroys) the test database; by default it is SQLite.
Set ``TEST_DATABASE_URL=postgresql://...`` to run the studio tests on Postgres.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "insecure-key-for-tests-only")

from studio.env import database_from_url
from studio.settings import *

_TMP = Path(tempfile.gettempdir()) / "graph-studio-tests"
_TMP.mkdir(exist_ok=True)

DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]

DATABASES = {
    "default": database_from_url(
        os.environ.get("TEST_DATABASE_URL", f"sqlite:///{_TMP / 'db.sqlite3'}"),
        base_dir=BASE_DIR,
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file (not Django's shared-cache in-memory database), one per test process:
    # the worker's heartbeat thread writes while the worker does, and a shared-cache
    # memory database answers that with "database table is locked".
    DATABASES["default"]["TEST"] = {"NAME": str(_TMP / f"test-{os.getpid()}.sqlite3")}
CHANNEL_LAYERS = {"default": {"BACKEND": "studio.layers.EmbeddedChannelLayer"}}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

SERVE_STATIC = True
STUDIO_GRAPHS = {}
STUDIO_CHECKPOINT_DB = _TMP / f"checkpoints-{os.getpid()}.sqlite3"
# Tests drive workers explicitly (studio.services.worker.Worker.run_once).
STUDIO_EMBEDDED_WORKER = False
STUDIO_GRAPHS_FILE = ""
