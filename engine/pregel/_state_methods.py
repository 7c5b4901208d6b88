"""Pregel's state methods: read a thread's state and history, write updates (time travel).

``StateMethods`` is a base class of :class:`~engine.pregel.main.Pregel`. Each
method routes a config that names a subgraph to that subgraph and otherwise
hands the work to ``_state_read`` or ``_state_update``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._typing import RunnableConfig
from engine.pregel import _state_read, _state_update
from engine.pregel._subgraph import CompiledGraph, subgraph_for_config
from engine.types import StateSnapshot, StateUpdate

if TYPE_CHECKING:
    pass

__all__ = ("StateMethods",)


class StateMethods(CompiledGraph):
    """``get_state``, ``get_state_history``, ``update_state`` and ``bulk_update_state``, sync and async."""

    def get_state(
        self, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        """The thread's state at the addressed (or latest) checkpoint."""
        if (target := subgraph_for_config(self._as_pregel, config)) is not None:
            return target[0].get_state(target[1], subgraphs=subgraphs)
        return _state_read.get_state(self._as_pregel, config, subgraphs=subgraphs)

    async def aget_state(
        self, config: RunnableConfig, *, subgraphs: bool = False
    ) -> StateSnapshot:
        if (target := subgraph_for_config(self._as_pregel, config)) is not None:
            return await target[0].aget_state(target[1], subgraphs=subgraphs)
        return await _state_read.aget_state(
            self._as_pregel, config, subgraphs=subgraphs
        )

    def get_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[StateSnapshot]:
        """Snapshots of the thread's checkpoints, newest first."""
        if (target := subgraph_for_config(self._as_pregel, config)) is not None:
            return target[0].get_state_history(
                target[1], filter=filter, before=before, limit=limit
            )
        return _state_read.get_state_history(
            self._as_pregel, config, filter=filter, before=before, limit=limit
        )

    async def aget_state_history(
        self,
        config: RunnableConfig,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[StateSnapshot]:
        if (target := subgraph_for_config(self._as_pregel, config)) is not None:
            async for snapshot in target[0].aget_state_history(
                target[1], filter=filter, before=before, limit=limit
            ):
                yield snapshot
            return
        async for snapshot in _state_read.aget_state_history(
            self._as_pregel, config, filter=filter, before=before, limit=limit
        ):
            yield snapshot

    def update_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
        task_id: str | None = None,
    ) -> RunnableConfig:
        """Write ``values`` as if node ``as_node`` returned them; returns the new checkpoint's config.

        From a past checkpoint this creates a branch (a fork) of the thread.
        ``as_node`` defaults to the node that wrote last (when that is
        unambiguous); ``END`` (with ``values=None``) finishes the pending tasks;
        ``"__input__"`` writes as the run's input; ``"__copy__"`` copies the
        addressed checkpoint as the thread's newest (same parent, values and next
        tasks: a fork point), and ``values`` may then list ``(values, as_node)``
        updates to apply to the copy.
        """
        if (target := subgraph_for_config(self._as_pregel, config)) is not None:
            return target[0].update_state(target[1], values, as_node, task_id)
        return _state_update.update_state(
            self._as_pregel, config, values, as_node=as_node, task_id=task_id
        )

    async def aupdate_state(
        self,
        config: RunnableConfig,
        values: dict[str, Any] | Any | None,
        as_node: str | None = None,
        task_id: str | None = None,
    ) -> RunnableConfig:
        if (target := subgraph_for_config(self._as_pregel, config)) is not None:
            return await target[0].aupdate_state(target[1], values, as_node, task_id)
        return await _state_update.aupdate_state(
            self._as_pregel, config, values, as_node=as_node, task_id=task_id
        )

    def bulk_update_state(
        self,
        config: RunnableConfig,
        supersteps: Sequence[Sequence[StateUpdate]],
    ) -> RunnableConfig:
        """Apply updates in super-steps, one new checkpoint per super-step.

        Args:
            config: the thread (and optionally the checkpoint) to update.
            supersteps: each a list of ``StateUpdate(values, as_node, task_id)``
                applied together, as the tasks of one step are (``as_node`` is
                required when a super-step has several).

        Returns:
            The config of the last checkpoint written.

        Raises:
            ValueError: no super-steps, or an empty one.
            InvalidUpdateError: an update the graph cannot apply.
        """
        if (target := subgraph_for_config(self._as_pregel, config)) is not None:
            return target[0].bulk_update_state(target[1], supersteps)
        return _state_update.bulk_update_state(self._as_pregel, config, supersteps)

    async def abulk_update_state(
        self,
        config: RunnableConfig,
        supersteps: Sequence[Sequence[StateUpdate]],
    ) -> RunnableConfig:
        """Async twin of :meth:`bulk_update_state`."""
        if (target := subgraph_for_config(self._as_pregel, config)) is not None:
            return await target[0].abulk_update_state(target[1], supersteps)
        return await _state_update.abulk_update_state(
            self._as_pregel, config, supersteps
        )
