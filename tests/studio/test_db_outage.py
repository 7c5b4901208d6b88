"""``lost_database``: which errors give a run back instead of failing it."""

from __future__ import annotations

import psycopg
import pytest
from django.db import utils as django_db
from psycopg import errors

from studio.services.db_outage import lost_database
from tests._support.postgres import pg_dsn


def _raised_from(cause: BaseException) -> BaseException:
    """``cause`` as Django wraps it (``raise ... from``)."""
    try:
        try:
            raise cause
        except BaseException as exc:
            raise django_db.OperationalError(str(exc)) from exc
    except django_db.OperationalError as wrapped:
        return wrapped


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.InterfaceError("the connection is closed"),
        errors.AdminShutdown("terminating connection due to administrator command"),
        errors.ConnectionFailure("connection failure"),
    ],
    ids=["no sqlstate", "closed", "57P01", "class 08"],
)
def test_a_lost_connection_is_a_lost_database(error: BaseException) -> None:
    assert lost_database(error)
    assert lost_database(_raised_from(error))


@pytest.mark.parametrize(
    "error",
    [
        errors.DeadlockDetected("deadlock detected"),
        errors.QueryCanceled("canceling statement due to statement timeout"),
        errors.UniqueViolation("duplicate key"),
        ValueError("a node failed"),
    ],
    ids=["deadlock", "cancelled", "constraint", "graph"],
)
def test_other_errors_are_the_runs_own(error: BaseException) -> None:
    assert not lost_database(error)
    assert not lost_database(_raised_from(error))


@pytest.mark.postgres
def test_a_connection_the_server_ended_is_a_lost_database() -> None:
    # Closed, not left through ``with``: leaving commits, and on a connection
    # the server ended that commit can raise too (whether it does is a race
    # between the failed query and the client noticing the closed socket).
    victim = psycopg.connect(pg_dsn(), autocommit=True)
    try:
        pid = victim.info.backend_pid
        with psycopg.connect(pg_dsn(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.Error) as raised:
            victim.execute("SELECT 1")
    finally:
        victim.close()
    assert lost_database(raised.value), repr(raised.value)
