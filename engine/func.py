"""Functional API: ``@entrypoint`` and ``@task`` (mirrors ``langgraph.func``)."""

from __future__ import annotations
