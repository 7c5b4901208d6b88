from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from studio.env import database_from_url, env_bool, env_list, is_postgres_url

BASE = Path("/srv/studio")


def test_sqlite_url_is_relative_to_the_base_dir() -> None:
    db = database_from_url("sqlite:///db.sqlite3", base_dir=BASE)
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["NAME"] == BASE / "db.sqlite3"


def test_sqlite_url_with_four_slashes_is_absolute() -> None:
    assert database_from_url("sqlite:////var/lib/studio.db", base_dir=BASE)[
        "NAME"
    ] == Path("/var/lib/studio.db")


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_postgres_url_becomes_a_postgresql_entry(scheme: str) -> None:
    db = database_from_url(
        f"{scheme}://studio:p%40ss@db.internal:6543/studio?sslmode=require",
        base_dir=BASE,
    )
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"]) == ("studio", "studio", "p@ss")
    assert (db["HOST"], db["PORT"]) == ("db.internal", "6543")
    assert db["OPTIONS"] == {"sslmode": "require"}
    assert is_postgres_url(f"{scheme}://h/db")


@pytest.mark.parametrize(
    "url", ["mysql://h/db", "postgresql://h/", "sqlite://", "nonsense"]
)
def test_unusable_database_urls_are_refused(url: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url(url, base_dir=BASE)


def test_password_is_not_echoed_in_errors() -> None:
    with pytest.raises(ImproperlyConfigured) as info:
        database_from_url("postgresql://u:secret@h/", base_dir=BASE)
    assert "secret" not in str(info.value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("TRUE", True), ("on", True), ("0", False), ("", False)],
)
def test_env_bool(raw: str, expected: bool) -> None:
    assert env_bool("X", environ={"X": raw}) is expected


def test_env_bool_default_and_garbage() -> None:
    assert env_bool("X", default=True, environ={}) is True
    with pytest.raises(ImproperlyConfigured, match="X='maybe'"):
        env_bool("X", environ={"X": "maybe"})


def test_env_list_drops_blanks() -> None:
    assert env_list("X", "a", environ={"X": " a.example, ,b "}) == ["a.example", "b"]
    assert env_list("X", "localhost,127.0.0.1", environ={}) == [
        "localhost",
        "127.0.0.1",
    ]
