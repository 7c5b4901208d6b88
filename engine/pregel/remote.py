"""RemoteGraph: a graph served by an Agent Server, driven like a local one.

It speaks the LangGraph Agent Server protocol through the official
``langgraph-sdk`` client (an optional dependency, imported only when a client
is made from ``url``): LangGraph's own servers, and the studio's ``/api/``.
``invoke``/``stream`` create a run (on the config's ``thread_id``, created if
missing; without one, a stateless run), and the state methods read and write the
server's threads::

    remote = RemoteGraph("purchase", url="http://localhost:8000/api", api_key=token)
    remote.invoke({"request_id": "R-1", ...}, {"configurable": {"thread_id": tid}})

A RemoteGraph is also a node of a local graph (``builder.add_node("review",
remote)``): it runs on the parent's thread id, its chunks reach the parent's
stream under the node's namespace (``stream(..., subgraphs=True)``), and an
interrupt on the server pauses the parent (``GraphInterrupt``), as in LangGraph.
Answer such an interrupt on the server's thread (``remote.invoke(Command(resume=
...), config)``): as in LangGraph, resuming the parent runs the node again with
its input.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Literal

from engine._internal._config import (
    _DefaultRecursionLimit,
    addresses_own_thread,
    merge_configs,
)
from engine._internal._constants import (
    CONF,
    CONFIG_KEY_CHECKPOINT_NS,
    INTERRUPT,
    NS_SEP,
)
from engine._internal._scope import current_scope
from engine._internal._typing import RunnableConfig
from engine.errors import GraphInterrupt, ParentCommand
from engine.pregel._draw import DrawableGraph
from engine.pregel._remote import (
    StreamPlan,
    checkpoint_from_config,
    command_to_json,
    config_from_checkpoint,
    drawable_from_json,
    interrupt_from_json,
    plan_stream_modes,
    sanitize_config,
    shape_chunk,
    snapshot_from_state,
    split_event,
)
from engine.types import All, Command, GraphOutput, StateSnapshot

__all__ = ("RemoteException", "RemoteGraph")

logger = logging.getLogger(__name__)

_SDK_MISSING = (
    "RemoteGraph needs the langgraph-sdk package to make a client from `url`: "
    "install it (pip install 'graph-studio[remote]' or pip install langgraph-sdk), "
    "or pass `client=` / `sync_client=`."
)


class RemoteException(Exception):
    """The remote run failed; ``args[0]`` is the server's error event data."""


def _sdk() -> Any:
    try:
        import langgraph_sdk  # noqa: PLC0415 - optional dependency, imported on use
    except ImportError as exc:
        raise ImportError(_SDK_MISSING) from exc
    return langgraph_sdk


def _tracing_headers(headers: dict[str, str] | None) -> dict[str, str] | None:
    """``headers`` plus LangSmith's distributed-tracing headers of the current run
    tree, when langsmith is installed and tracing one."""
    try:
        import langsmith  # noqa: PLC0415 - optional dependency
    except ImportError:
        return headers
    run_tree = langsmith.get_current_run_tree()
    if run_tree is None:
        return headers
    tracing: dict[str, str] = run_tree.to_headers()
    if not headers:
        return tracing
    merged = dict(headers)
    if "baggage" in merged and "baggage" in tracing:
        tracing["baggage"] = f"{merged['baggage']},{tracing['baggage']}"
    merged.update(tracing)
    return merged


class _RunContext:
    """Where a run is called from: the caller's namespace and the parent's stream."""

    __slots__ = ("caller_ns", "sink", "sink_modes")

    def __init__(self, config: RunnableConfig | None) -> None:
        conf = (config or {}).get(CONF) or {}
        caller = conf.get(CONFIG_KEY_CHECKPOINT_NS) or ""
        self.caller_ns: tuple[str, ...] = tuple(caller.split(NS_SEP)) if caller else ()
        scope = current_scope()
        parent = (
            scope.stream_sink
            if scope is not None and not addresses_own_thread(config)
            else None
        )
        self.sink = parent[0] if parent is not None else None
        self.sink_modes: frozenset[str] = (
            parent[1] if parent is not None else frozenset()
        )


class RemoteGraph:
    """A graph on an Agent Server, with the local graphs' run and state methods.

    Args:
        assistant_id: the assistant's id, or its graph's name.
        url: the server's address (the studio's is ``<site>/api``); makes the
            default clients.
        api_key: sent as ``x-api-key``; read by the SDK from the environment when
            omitted (``LANGGRAPH_API_KEY``, ``LANGSMITH_API_KEY``...).
        headers: sent with every request.
        client: a ``langgraph_sdk`` async client, instead of one from ``url``.
        sync_client: a ``langgraph_sdk`` sync client, instead of one from ``url``.
        config: a config merged under each call's.
        name: the node name when added to a graph (default: ``assistant_id``).
        distributed_tracing: send LangSmith's tracing headers of the current run.

    Raises:
        ImportError: ``url`` given and langgraph-sdk is not installed.
    """

    def __init__(
        self,
        assistant_id: str,
        /,
        *,
        url: str | None = None,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        client: Any | None = None,
        sync_client: Any | None = None,
        config: RunnableConfig | None = None,
        name: str | None = None,
        distributed_tracing: bool = False,
    ) -> None:
        self.assistant_id = assistant_id
        self.name = assistant_id if name is None else name
        self.config = config
        self.distributed_tracing = distributed_tracing
        if url is not None and (client is None or sync_client is None):
            sdk = _sdk()
            if client is None:
                client = sdk.get_client(url=url, api_key=api_key, headers=headers)
            if sync_client is None:
                sync_client = sdk.get_sync_client(
                    url=url, api_key=api_key, headers=headers
                )
        self.client = client
        self.sync_client = sync_client

    def __repr__(self) -> str:
        return f"RemoteGraph(assistant_id={self.assistant_id!r}, name={self.name!r})"

    def get_name(self) -> str:
        return self.name

    # -- clients and configs -----------------------------------------------------------

    def _async_client(self) -> Any:
        if self.client is None:
            raise ValueError(
                "Async client is not initialized: please provide `url` or `client` "
                "when initializing `RemoteGraph`."
            )
        return self.client

    def _sync_client(self) -> Any:
        if self.sync_client is None:
            raise ValueError(
                "Sync client is not initialized: please provide `url` or "
                "`sync_client` when initializing `RemoteGraph`."
            )
        return self.sync_client

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str] | None:
        return _tracing_headers(headers) if self.distributed_tracing else headers

    def _config(self, config: RunnableConfig | None) -> RunnableConfig:
        return merge_configs(self.config, config)

    def _at_checkpoint(self, config: RunnableConfig, **fields: Any) -> dict[str, Any]:
        """The SDK's thread arguments for the checkpoint ``config`` names (merged with
        this graph's config): ``thread_id``, ``checkpoint`` and ``fields``."""
        merged = self._config(config)
        return {
            "thread_id": merged[CONF]["thread_id"],
            "checkpoint": checkpoint_from_config(merged),
            **fields,
        }

    def copy(self, update: dict[str, Any]) -> RemoteGraph:
        """A copy with some constructor arguments replaced (``config``, ``name``...)."""
        attrs: dict[str, Any] = {
            "assistant_id": self.assistant_id,
            "client": self.client,
            "sync_client": self.sync_client,
            "config": self.config,
            "name": self.name,
            "distributed_tracing": self.distributed_tracing,
            **update,
        }
        return type(self)(attrs.pop("assistant_id"), **attrs)

    def with_config(
        self, config: RunnableConfig | None = None, **kwargs: Any
    ) -> RemoteGraph:
        """A copy whose config is this one's merged with ``config`` and ``kwargs``."""
        merged: dict[str, Any] = dict(merge_configs(self.config, config, kwargs))
        if isinstance(merged.get("recursion_limit"), _DefaultRecursionLimit):
            del merged["recursion_limit"]  # not given: the server's default applies
        return self.copy({"config": merged})

    # -- drawing -----------------------------------------------------------------------

    def get_graph(
        self,
        config: RunnableConfig | None = None,
        *,
        xray: int | bool = False,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
    ) -> DrawableGraph:
        """The drawing the server gives (``GET /assistants/{id}/graph``); ``config``
        is not used."""
        graph = self._sync_client().assistants.get_graph(
            assistant_id=self.assistant_id, xray=xray, headers=headers, params=params
        )
        return drawable_from_json(graph)

    async def aget_graph(
        self,
        config: RunnableConfig | None = None,
        *,
        xray: int | bool = False,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
    ) -> DrawableGraph:
        """Async twin of :meth:`get_graph`."""
        graph = await self._async_client().assistants.get_graph(
            assistant_id=self.assistant_id, xray=xray, headers=headers, params=params
        )
        return drawable_from_json(graph)

    # -- state -------------------------------------------------------------------------

    def get_state(
        self,
        config: RunnableConfig,
        *,
        subgraphs: bool = False,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
    ) -> StateSnapshot:
        """The thread's state at the config's checkpoint (the latest by default)."""
        state = self._sync_client().threads.get_state(
            **self._at_checkpoint(
                config, subgraphs=subgraphs, headers=headers, params=params
            )
        )
        return snapshot_from_state(state)

    async def aget_state(
        self,
        config: RunnableConfig,
        *,
        subgraphs: bool = False,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
    ) -> StateSnapshot:
        """Async twin of :meth:`get_state`."""
        state = await self._async_client().threads.get_state(
            **self._at_checkpoint(
                config, subgraphs=subgraphs, headers=headers, params=params
            )
        )
        return snapshot_from_state(state)

    def get_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
    ) -> Iterator[StateSnapshot]:
        """The thread's checkpoints, newest first (10 unless ``limit`` says)."""
        states = self._sync_client().threads.get_history(
            **self._at_checkpoint(
                config,
                limit=limit if limit else 10,
                before=checkpoint_from_config(before),
                metadata=filter,
                headers=headers,
                params=params,
            )
        )
        for state in states:
            yield snapshot_from_state(state)

    async def aget_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        """Async twin of :meth:`get_state_history`."""
        states = await self._async_client().threads.get_history(
            **self._at_checkpoint(
                config,
                limit=limit if limit else 10,
                before=checkpoint_from_config(before),
                metadata=filter,
                headers=headers,
                params=params,
            )
        )
        for state in states:
            yield snapshot_from_state(state)

    def update_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
    ) -> RunnableConfig:
        """Write ``values`` to the thread as ``as_node``; the new checkpoint's config."""
        response = self._sync_client().threads.update_state(
            **self._at_checkpoint(
                config, values=values, as_node=as_node, headers=headers, params=params
            )
        )
        return config_from_checkpoint(response["checkpoint"])

    async def aupdate_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
    ) -> RunnableConfig:
        """Async twin of :meth:`update_state`."""
        response = await self._async_client().threads.update_state(
            **self._at_checkpoint(
                config, values=values, as_node=as_node, headers=headers, params=params
            )
        )
        return config_from_checkpoint(response["checkpoint"])

    def bulk_update_state(
        self,
        config: RunnableConfig,
        updates: list[tuple[dict[str, Any] | None, str | None]],
    ) -> RunnableConfig:
        """Not offered by the Agent Server protocol: call :meth:`update_state` per update."""
        raise NotImplementedError(
            "RemoteGraph.bulk_update_state: the Agent Server has no bulk update; "
            "call update_state() once per update."
        )

    async def abulk_update_state(
        self,
        config: RunnableConfig,
        updates: list[tuple[dict[str, Any] | None, str | None]],
    ) -> RunnableConfig:
        """Not offered by the Agent Server protocol: call :meth:`aupdate_state`."""
        raise NotImplementedError(
            "RemoteGraph.abulk_update_state: the Agent Server has no bulk update; "
            "call aupdate_state() once per update."
        )

    # -- runs --------------------------------------------------------------------------

    def _run_request(
        self,
        input: Any,
        config: RunnableConfig | None,
        stream_mode: Any,
        subgraphs: bool,
        **extra: Any,
    ) -> tuple[dict[str, Any], StreamPlan, _RunContext]:
        if config is None and (scope := current_scope()) is not None:
            config = scope.config  # run as a node: the task's config
        run = _RunContext(config)
        plan = plan_stream_modes(stream_mode, run.sink_modes)
        sanitized = sanitize_config(self._config(config))
        thread_id = sanitized.get(CONF, {}).pop("thread_id", None)
        command: dict[str, Any] | None = None
        if isinstance(input, Command):
            command = command_to_json(input)
            input = None
        request = {
            "thread_id": thread_id,
            "assistant_id": self.assistant_id,
            "input": input,
            "command": command,
            "config": sanitized,
            "stream_mode": plan.sent,
            "stream_subgraphs": subgraphs or run.sink is not None,
            "if_not_exists": "create",
            **extra,
        }
        return request, plan, run

    def _read(
        self,
        part: Any,
        plan: StreamPlan,
        run: _RunContext,
        subgraphs: bool,
        version: str,
    ) -> tuple[bool, Any]:
        """``(yield it?, chunk)`` for one server event; raises what it signals."""
        event: str = part.event
        mode, ns = split_event(event)
        data = part.data
        if (
            mode == "command"
            and isinstance(data, dict)
            and data.get("graph") == Command.PARENT
        ):
            raise ParentCommand(Command(**data))
        ns = run.caller_ns + ns
        if run.sink is not None and mode in run.sink_modes:
            forwarded = tuple(data) if mode == "messages" else data
            run.sink((ns, mode, forwarded))
        if mode == "updates":
            if isinstance(data, dict) and INTERRUPT in data and run.caller_ns:
                raise GraphInterrupt([interrupt_from_json(i) for i in data[INTERRUPT]])
        elif mode == "error":
            raise RemoteException(data)
        if mode not in plan.requested:
            return False, None
        if not subgraphs and NS_SEP in event and mode != "messages":
            return False, None
        if mode == "messages":
            data = tuple(data)
            part = part._replace(data=data) if hasattr(part, "_replace") else part
        chunk = shape_chunk(
            part,
            mode,
            ns,
            data,
            single=plan.single,
            subgraphs=subgraphs,
            version=version,
        )
        return True, chunk

    def stream(
        self,
        input: dict[str, Any] | Any,
        config: RunnableConfig | None = None,
        *,
        context: Any | None = None,
        stream_mode: Any | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        subgraphs: bool = False,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> Iterator[dict[str, Any] | Any]:
        """Create a run on the server and yield its chunks, shaped as a local
        graph's (``stream_mode`` defaults to ``"updates"``). A
        ``Command`` input is sent as the run's command. ``kwargs`` go to the SDK's
        ``runs.stream`` (``multitask_strategy``, ``durability``...).

        Raises:
            GraphInterrupt: the remote run paused while this graph runs as a node.
            RemoteException: the remote run failed.
        """
        request, plan, run = self._run_request(
            input,
            config,
            stream_mode,
            subgraphs,
            context=context,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            headers=self._headers(headers),
            params=params,
            **kwargs,
        )
        for part in self._sync_client().runs.stream(**request):
            keep, chunk = self._read(part, plan, run, subgraphs, version)
            if keep:
                yield chunk

    async def astream(
        self,
        input: dict[str, Any] | Any,
        config: RunnableConfig | None = None,
        *,
        context: Any | None = None,
        stream_mode: Any | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        subgraphs: bool = False,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> AsyncIterator[dict[str, Any] | Any]:
        """Async twin of :meth:`stream`."""
        request, plan, run = self._run_request(
            input,
            config,
            stream_mode,
            subgraphs,
            context=context,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            headers=self._headers(headers),
            params=params,
            **kwargs,
        )
        async for part in self._async_client().runs.stream(**request):
            keep, chunk = self._read(part, plan, run, subgraphs, version)
            if keep:
                yield chunk

    def invoke(
        self,
        input: dict[str, Any] | Any,
        config: RunnableConfig | None = None,
        *,
        context: Any | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> dict[str, Any] | Any:
        """Run to the end (or to an interrupt) and return the final values
        (``version="v2"``: a :class:`~engine.types.GraphOutput`); ``None``, with
        a warning, when the server sent no values."""
        last: Any = _NOTHING
        for chunk in self.stream(
            input,
            config,
            context=context,
            stream_mode="values",
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            headers=headers,
            params=params,
            version=version,
            **kwargs,
        ):
            last = chunk
        return _output(last, version)

    async def ainvoke(
        self,
        input: dict[str, Any] | Any,
        config: RunnableConfig | None = None,
        *,
        context: Any | None = None,
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        headers: dict[str, str] | None = None,
        params: Any | None = None,
        version: Literal["v1", "v2"] = "v1",
        **kwargs: Any,
    ) -> dict[str, Any] | Any:
        """Async twin of :meth:`invoke`."""
        last: Any = _NOTHING
        async for chunk in self.astream(
            input,
            config,
            context=context,
            stream_mode="values",
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            headers=headers,
            params=params,
            version=version,
            **kwargs,
        ):
            last = chunk
        return _output(last, version)

    def stream_events(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        version: Literal["v1", "v2", "v3"] = "v2",
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        control: Any = None,
        transformers: Sequence[Any] | None = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Not available for remote graphs yet: use :meth:`stream` (its ``events``
        mode is not served remotely either)."""
        raise NotImplementedError(
            f"RemoteGraph.stream_events(version={version!r}) is not implemented; "
            "use stream() (or astream()) with the stream modes you need."
        )

    async def astream_events(
        self,
        input: Any,
        config: RunnableConfig | None = None,
        *,
        version: Literal["v1", "v2", "v3"] = "v2",
        interrupt_before: All | Sequence[str] | None = None,
        interrupt_after: All | Sequence[str] | None = None,
        control: Any = None,
        transformers: Sequence[Any] | None = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Async twin of :meth:`stream_events` (not implemented)."""
        raise NotImplementedError(
            f"RemoteGraph.astream_events(version={version!r}) is not implemented; "
            "use astream() with the stream modes you need."
        )


_NOTHING: Any = object()


def _output(last: Any, version: str) -> Any:
    if last is _NOTHING:
        logger.warning("No events received from remote graph")
        return None
    if version == "v2":
        return GraphOutput(value=last["data"], interrupts=tuple(last["interrupts"]))
    return last
