"""The runs resource's request bodies and queries, validated strictly (pydantic).

Every key ``langgraph-sdk`` 0.4.14 may send to ``/threads/{id}/runs[...]`` and
``/runs[...]`` is accepted (``client.runs.create``, ``stream``, ``wait``); any
other key is refused (422). Types are strict: ``"5"`` is not an int, ``"true"``
not a bool. Keys accepted with no effect here: ``feedback_keys`` and
``langsmith_tracer`` (LangSmith), ``strict_resume`` (the server does not report
it in ``/info``, so the SDK's clients do not rely on it), ``on_disconnect`` for
background runs. ``webhook`` is refused when set: the studio calls no URLs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from studio.api.schemas import (
    Body,
    CheckpointAddress,
    DecisionOutcome,
    JsonObject,
    Query,
    Shape,
    UuidText,
)
from studio.errors import InvalidInput
from studio.json_input import WHOLE_NUMBER
from studio.services.api_runs import RunSpec

__all__ = (
    "DecisionPending",
    "Run",
    "RunCancelQuery",
    "RunCommand",
    "RunConfig",
    "RunCreate",
    "RunJoinStreamQuery",
    "RunListQuery",
    "RunSend",
    "StreamModeName",
)

StreamModeName = Literal[
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
]
"""The stream modes served (the SDK's ``tools`` and ``lifecycle`` are not)."""


_UPDATE = {
    "anyOf": [
        {"type": "object"},
        {
            "type": "array",
            "items": {
                "type": "array",
                "prefixItems": [{"type": "string"}, {}],
                "minItems": 2,
                "maxItems": 2,
            },
        },
        {"type": "null"},
    ]
}
"""``command.update`` as documented: what ``RunCommand._pairs`` accepts."""


class RunSend(Body):
    """``Send(node, input)`` in a command's ``goto``."""

    node: str = Field(min_length=1)
    input: Any = None


class RunCommand(Body):
    """``Command(resume=..., update=..., goto=...)`` as JSON (at least one of them)."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    resume: Any = None
    update: Annotated[
        dict[str, Any] | list[list[Any]] | None, WithJsonSchema(_UPDATE)
    ] = None
    """A mapping, or ``[key, value]`` pairs (JSON has no tuples)."""
    goto: str | RunSend | list[str | RunSend] | None = None

    @field_validator("update")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        if isinstance(value, list) and not all(
            len(pair) == 2 and isinstance(pair[0], str) for pair in value
        ):
            raise ValueError("a list update is [key, value] pairs with string keys")
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> RunCommand:
        if self.resume is None and self.update is None and self.goto is None:
            raise ValueError("give resume, update or goto")
        return self

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class RunConfig(Body):
    """The run's config: the SDK's ``Config`` (``tags``, ``recursion_limit``, ``configurable``)."""

    tags: list[str] | None = None
    recursion_limit: Annotated[int, Field(ge=1, le=100_000), WHOLE_NUMBER] | None = None
    configurable: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    """Accepted and not used: the run's metadata is the server's (``RemoteGraph``
    sends its caller's here, as LangGraph's does)."""


class RunCreate(Body):
    """``POST /threads/{thread_id}/runs[/wait|/stream]`` and ``POST /runs[...]``."""

    assistant_id: UuidText = Field(min_length=1, max_length=200)
    """The assistant's UUID, or the graph's name; anything else is 422."""
    input: Any = None
    command: RunCommand | None = None
    stream_mode: StreamModeName | list[StreamModeName] = "values"
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    metadata: dict[str, Any] | None = None
    config: RunConfig | None = None
    context: dict[str, Any] | None = None
    checkpoint: CheckpointAddress | None = None
    checkpoint_id: str | None = Field(default=None, min_length=1, max_length=64)
    checkpoint_during: bool | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    interrupt_before: Literal["*"] | list[str] | None = None
    interrupt_after: Literal["*"] | list[str] | None = None
    feedback_keys: list[str] | None = None
    webhook: Annotated[str | None, WithJsonSchema({"type": "null"})] = None
    """Refused when set (422): the studio calls no URLs."""
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] | None = (
        None
    )
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: Annotated[float, Field(ge=0, le=86_400)] | None = None
    """Seconds to wait before the run starts (an integer or not)."""
    strict_resume: bool | None = None
    langsmith_tracer: dict[str, Any] | None = None

    def to_spec(self, thread_id: str | None) -> RunSpec:
        """The service's view of the request.

        Raises:
            InvalidInput: a webhook; a checkpoint of another thread or of a
                subgraph; two different checkpoint ids.
        """
        if self.webhook is not None:
            raise InvalidInput(
                "webhook: this server does not call webhooks; follow the run with "
                "runs.join or runs.stream instead."
            )
        checkpoint_id = self._checkpoint_id(thread_id)
        durability = self.durability
        if durability is None and self.checkpoint_during is not None:
            durability = "async" if self.checkpoint_during else "exit"
        modes = (
            [self.stream_mode]
            if isinstance(self.stream_mode, str)
            else self.stream_mode
        )
        return RunSpec(
            assistant_id=self.assistant_id,
            input=self.input,
            command=self.command.as_json() if self.command is not None else None,
            stream_mode=tuple(dict.fromkeys(modes)) or ("values",),
            stream_subgraphs=self.stream_subgraphs,
            stream_resumable=self.stream_resumable,
            metadata=dict(self.metadata or {}),
            config=(
                self.config.model_dump(mode="json", exclude_none=True)
                if self.config is not None
                else {}
            ),
            context=self.context,
            checkpoint_id=checkpoint_id,
            durability=durability,
            interrupt_before=self.interrupt_before,
            interrupt_after=self.interrupt_after,
            feedback_keys=self.feedback_keys,
            multitask_strategy=self.multitask_strategy or "enqueue",
            if_not_exists=self.if_not_exists or "reject",
            on_completion=self.on_completion,
            after_seconds=float(self.after_seconds or 0),
        )

    def _checkpoint_id(self, thread_id: str | None) -> str:
        found = self.checkpoint_id or ""
        ref = self.checkpoint
        if ref is None:
            return found
        if ref.checkpoint_ns:
            raise InvalidInput(
                "checkpoint.checkpoint_ns: runs start from the root graph's "
                "checkpoints only (send an empty namespace)."
            )
        if ref.thread_id is not None and ref.thread_id != thread_id:
            raise InvalidInput(
                "checkpoint.thread_id: a run starts from a checkpoint of its own thread."
            )
        if ref.checkpoint_id and found and ref.checkpoint_id != found:
            raise InvalidInput(
                "checkpoint_id and checkpoint.checkpoint_id name different checkpoints."
            )
        return ref.checkpoint_id or found


class RunListQuery(Query):
    """``GET /threads/{thread_id}/runs?limit=10&offset=0&status=``."""

    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    status: Literal[
        "", "pending", "running", "success", "error", "timeout", "interrupted"
    ] = ""
    """Only runs in this status (empty: all)."""


class RunCancelQuery(Query):
    """``POST .../runs/{run_id}/cancel?wait=0|1&action=interrupt|rollback``."""

    wait: bool = False
    action: Literal["interrupt", "rollback"] = "interrupt"


class RunJoinStreamQuery(Query):
    """``GET .../runs/{run_id}/stream?stream_mode=...&cancel_on_disconnect=...``."""

    stream_mode: list[StreamModeName] | None = None
    cancel_on_disconnect: bool = False


# -- answers (documentation only: the views build them from the services) ----------------


class Run(Shape):
    """A run as the Agent Server shows it."""

    run_id: str
    thread_id: str
    assistant_id: str
    """The graph's assistant UUID."""
    metadata: JsonObject
    status: Literal["pending", "running", "success", "error", "timeout", "interrupted"]
    """A run that stopped at ``interrupt()`` is ``success``; a cancelled one ``interrupted``."""
    kwargs: JsonObject
    """``input``, ``command``, ``config``, ``context``, ``stream_mode``, ..."""
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"]
    created_at: str
    """When it may start: in the future with ``after_seconds``."""
    updated_at: str


class DecisionPending(Shape):
    """202: the resume was a reviewer's first-level approval; no run exists yet."""

    detail: str
    decision: DecisionOutcome
