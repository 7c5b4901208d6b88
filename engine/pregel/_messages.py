"""``stream_mode="messages"`` for LangChain chat models called inside nodes.

When langchain-core is installed and a run streams messages, each task runs
with LangChain's child-config context holding a callback handler that forwards
every token chunk to the run's message stream, as LangGraph does, so a node
that calls ``model.invoke(messages)`` streams its tokens without passing config.
Models tagged ``nostream`` are skipped. Without langchain-core this is a no-op.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from engine.constants import TAG_NOSTREAM

__all__ = ("langchain_messages",)


def _handler_class() -> Any:
    try:
        from langchain_core.callbacks import BaseCallbackHandler  # noqa: PLC0415
    except ImportError:  # pragma: no cover - optional dependency
        return None

    class _ForwardTokens(BaseCallbackHandler):
        """Forwards chat model token chunks to the run's message writer."""

        run_inline = True

        def __init__(self, writer: Callable[..., None]) -> None:
            self.writer = writer
            self.skipped: set[Any] = set()
            self.metadata: dict[Any, dict[str, Any]] = {}
            """Each model run's callback metadata (LangChain's: the config's,
            its ``configurable`` scalars, the model's ``ls_*`` parameters):
            what LangGraph sends with the run's chunks."""

        # Having these two makes LangChain treat the handler as a streaming one, so
        # chat models stream tokens instead of answering in one piece.
        def tap_output_iter(self, run_id: Any, output: Iterator[Any]) -> Iterator[Any]:
            return output

        def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
            return output

        def on_chat_model_start(
            self,
            serialized: Any,
            messages: Any,
            *,
            run_id: Any,
            tags: list[str] | None = None,
            **kwargs: Any,
        ) -> None:
            if tags and TAG_NOSTREAM in tags:
                self.skipped.add(run_id)
            elif metadata := kwargs.get("metadata"):
                self.metadata[run_id] = metadata

        def on_llm_new_token(
            self, token: Any, *, chunk: Any = None, run_id: Any = None, **kwargs: Any
        ) -> None:
            if run_id in self.skipped:
                return
            message = getattr(chunk, "message", None)
            if message is not None:
                self.writer(message, self.metadata.get(run_id))

        def on_llm_end(
            self, response: Any, *, run_id: Any = None, **kwargs: Any
        ) -> None:
            self.metadata.pop(run_id, None)
            self.skipped.discard(run_id)

        def on_llm_error(
            self, error: BaseException, *, run_id: Any = None, **kwargs: Any
        ) -> None:
            self.on_llm_end(None, run_id=run_id)

    return _ForwardTokens


_HANDLER: Any = None
_LOADED = False


@contextlib.contextmanager
def langchain_messages(
    config: dict[str, Any], writer: Callable[..., None] | None
) -> Iterator[None]:
    """Run the body with LangChain callbacks that stream tokens to ``writer``,
    with the model run's callback metadata as its second argument."""
    global _HANDLER, _LOADED
    if writer is None:
        yield
        return
    if not _LOADED:
        _HANDLER = _handler_class()
        _LOADED = True
    if _HANDLER is None:
        yield
        return
    from langchain_core.runnables.config import var_child_runnable_config  # noqa: PLC0415

    child = {**config, "callbacks": [_HANDLER(writer)]}
    token = var_child_runnable_config.set(child)  # type: ignore[arg-type]
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)
