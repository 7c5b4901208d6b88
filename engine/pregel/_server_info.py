"""What an Agent Server tells a run about itself: the ``ServerInfo`` of a run.

A server puts ``assistant_id``, ``graph_id`` and the authenticated user
(``langgraph_auth_user``) in the run's ``configurable``; a plain call has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.runtime import BaseUser, ServerInfo

__all__ = ("AUTH_USER_KEY", "server_info")

AUTH_USER_KEY = "langgraph_auth_user"


def server_info(configurable: Mapping[str, Any]) -> ServerInfo | None:
    """The run's ServerInfo, or None when nothing in ``configurable`` names one.

    A user counts when it implements :class:`~engine.runtime.BaseUser` or, like a
    proxy object resolving attributes dynamically, at least has an ``identity``.
    """
    assistant_id = configurable.get("assistant_id")
    graph_id = configurable.get("graph_id")
    candidate = configurable.get(AUTH_USER_KEY)
    user: BaseUser | None = None
    if candidate is not None and (
        isinstance(candidate, BaseUser) or hasattr(candidate, "identity")
    ):
        user = candidate
    if assistant_id is None and graph_id is None and user is None:
        return None
    return ServerInfo(
        assistant_id=str(assistant_id) if assistant_id else "",
        graph_id=str(graph_id) if graph_id else "",
        user=user,
    )
