"""Run a Python snippet in a fresh interpreter (what a module imports, how code
behaves without an optional package): this test run's interpreter, ``-c``."""

from __future__ import annotations

import subprocess
import sys

__all__ = ("run_python",)


def run_python(script: str, *args: str) -> str:
    """``script`` run with ``args`` as ``sys.argv[1:]``; its standard output.
    Fails the test, with the child's standard error, when it exits non-zero."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
