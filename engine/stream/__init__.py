"""The v3 stream protocol: typed, per-channel projections of a run.

``graph.stream_events(input, version="v3")`` returns a
:class:`GraphRunStream` (``await graph.astream_events(..., version="v3")`` an
:class:`AsyncGraphRunStream`): iterate it for :class:`ProtocolEvent` dicts, or
read its projections (``run.values``, ``run.lifecycle``, ``run.subgraphs``,
``run.messages``, plus those of the transformers you add with
``compile(transformers=[...])`` or ``stream_events(..., transformers=[...])``).
Write your own projections by subclassing :class:`StreamTransformer`. The
protocol is experimental in LangGraph 1.2 and follows it.
"""

from __future__ import annotations

from engine.stream._types import ProtocolEvent, StreamTransformer
from engine.stream.run_stream import (
    AsyncGraphRunStream,
    AsyncSubgraphRunStream,
    GraphRunStream,
    SubgraphRunStream,
)
from engine.stream.stream_channel import StreamChannel
from engine.stream.transformers import (
    CheckpointsTransformer,
    CustomTransformer,
    DebugTransformer,
    LifecyclePayload,
    LifecycleTransformer,
    SubgraphStatus,
    SubgraphTransformer,
    TasksTransformer,
    UpdatesTransformer,
)

__all__ = (
    "AsyncGraphRunStream",
    "AsyncSubgraphRunStream",
    "CheckpointsTransformer",
    "CustomTransformer",
    "DebugTransformer",
    "GraphRunStream",
    "LifecyclePayload",
    "LifecycleTransformer",
    "ProtocolEvent",
    "StreamChannel",
    "StreamTransformer",
    "SubgraphRunStream",
    "SubgraphStatus",
    "SubgraphTransformer",
    "TasksTransformer",
    "UpdatesTransformer",
)
