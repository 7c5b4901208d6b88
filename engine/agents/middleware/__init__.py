"""Agent middleware (LangChain 1.x's ``langchain.agents.middleware``): the base class,
decorators, and the middleware people use most."""

from __future__ import annotations

from engine.agents.middleware.human_in_the_loop import (
    HumanInTheLoopMiddleware,
    InterruptOnConfig,
)
from engine.agents.middleware.model_call_limit import ModelCallLimitMiddleware
from engine.agents.middleware.model_fallback import ModelFallbackMiddleware
from engine.agents.middleware.model_retry import ModelRetryMiddleware
from engine.agents.middleware.pii import PIIDetectionError, PIIMiddleware
from engine.agents.middleware.summarization import SummarizationMiddleware
from engine.agents.middleware.tool_call_limit import ToolCallLimitMiddleware
from engine.agents.middleware.tool_retry import ToolRetryMiddleware
from engine.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
    OmitFromOutput,
    OmitFromSchema,
    PrivateStateAttr,
    ToolCallRequest,
    after_agent,
    after_model,
    before_agent,
    before_model,
    dynamic_prompt,
    hook_config,
    wrap_model_call,
    wrap_tool_call,
)

__all__ = (
    "AgentMiddleware",
    "AgentState",
    "HumanInTheLoopMiddleware",
    "InterruptOnConfig",
    "ModelCallLimitMiddleware",
    "ModelFallbackMiddleware",
    "ModelRequest",
    "ModelResponse",
    "ModelRetryMiddleware",
    "OmitFromInput",
    "OmitFromOutput",
    "OmitFromSchema",
    "PIIDetectionError",
    "PIIMiddleware",
    "PrivateStateAttr",
    "SummarizationMiddleware",
    "ToolCallLimitMiddleware",
    "ToolCallRequest",
    "ToolRetryMiddleware",
    "after_agent",
    "after_model",
    "before_agent",
    "before_model",
    "dynamic_prompt",
    "hook_config",
    "wrap_model_call",
    "wrap_tool_call",
)
