"""Try other models when the model call fails."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from engine.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from engine.errors import GraphBubbleUp

__all__ = ("ModelFallbackMiddleware",)


class ModelFallbackMiddleware(AgentMiddleware[Any, Any]):
    """On an error from the model, call ``first_model``, then each of
    ``additional_models``, in order, until one answers; if all fail, the last
    error is raised. Interrupts are never caught.

    Example::

        ModelFallbackMiddleware(backup_model, cheap_model)
    """

    def __init__(self, first_model: Any, *additional_models: Any) -> None:
        self.models = [first_model, *additional_models]

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        try:
            return handler(request)
        except GraphBubbleUp:
            raise
        except Exception as error:
            last = error
        for model in self.models:
            try:
                return handler(request.override(model=model))
            except GraphBubbleUp:
                raise
            except Exception as error:
                last = error
        raise last

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as error:
            last = error
        for model in self.models:
            try:
                return await handler(request.override(model=model))
            except GraphBubbleUp:
                raise
            except Exception as error:
                last = error
        raise last
