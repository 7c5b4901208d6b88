"""How a StateGraph node's output becomes channel writes.

``NodeWriter`` is the writer a :class:`~engine.graph.state.CompiledStateGraph`
attaches to each node: it maps the returned state update, ``Command`` or
``Send`` packets, and the node's edges and branches to ``(channel, value)``
writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine._internal._constants import (
    START,
)
from engine._internal._typing import MISSING
from engine.errors import (
    ErrorCode,
    InvalidUpdateError,
    ParentCommand,
    error_message,
)
from engine.graph._branch import BranchSpec
from engine.graph._schema import coerce_input
from engine.pregel._algo import PregelExecutableTask
from engine.types import (
    Command,
)

if TYPE_CHECKING:
    from engine.graph._compiled_state import CompiledStateGraph

__all__ = ("NodeWriter",)


class NodeWriter:
    """Turns one node's output into writes: state updates, edges, branches, Commands."""

    __slots__ = (
        "branches",
        "edge_writes",
        "graph",
        "is_start",
        "managed",
        "managed_keys",
        "name",
        "output_keys",
        "state_mapper",
        "state_keys",
        "where",
        "whole_state",
    )

    def __init__(
        self,
        name: str,
        output_keys: frozenset[str],
        edge_writes: list[tuple[str, Any]],
        branches: list[BranchSpec],
        state_keys: tuple[str, ...],
        state_mapper: Callable[[dict[str, Any]], Any] | None,
        *,
        whole_state: bool = False,
    ) -> None:
        self.name = name
        self.whole_state = whole_state
        """The node is a compiled graph, whose output is its whole state: keys
        the parent does not have (the subgraph's own) are dropped, as in
        LangGraph, where a function node's are refused (``_unknown_key``)."""
        self.output_keys = output_keys
        self.edge_writes = edge_writes
        self.branches = branches
        self.state_keys = state_keys
        self.state_mapper = state_mapper
        self.is_start = name == START
        self.where = "the input" if name == START else f"node {name!r}"
        self.graph: CompiledStateGraph | None = None
        self.managed_keys: frozenset[str] = frozenset()
        """Managed value keys of any schema: writes to them are ignored."""
        self.managed: tuple[str, ...] = ()
        """The state schema's managed value keys, which path functions read."""

    def _update(self, writes: list[tuple[str, Any]], update: Any) -> None:
        if update is None:
            return
        if type(update) is dict:
            keys = self.output_keys
            for key, value in update.items():
                if key not in keys:
                    self._unknown_key(key)
                    continue
                writes.append((key, value))
            return
        assert self.graph is not None
        for key, value in coerce_input(self.graph.state_info, update, self.where):
            if key not in self.output_keys:
                self._unknown_key(key)
                continue
            writes.append((key, value))

    def _unknown_key(self, key: Any) -> None:
        """Refuse a write to an undeclared key; a managed value's is ignored, and
        so is a subgraph's own key (``whole_state``)."""
        if key in self.managed_keys or self.whole_state:
            return  # computed per task (RemainingSteps...), or the subgraph's own
        raise InvalidUpdateError(
            error_message(
                f"{self.where.capitalize()} wrote key {key!r}, which is not in the state "
                f"schema (known keys: {sorted(self.output_keys)})",
                ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE,
            )
        )

    def _command(self, writes: list[tuple[str, Any]], command: Command[Any]) -> None:
        if command.graph == Command.PARENT:
            raise ParentCommand(
                Command(update=command.update, goto=command.goto, resume=command.resume)
            )
        if command.graph is not None:
            raise InvalidUpdateError(
                f"{self.where.capitalize()} returned Command(graph={command.graph!r}); only None or Command.PARENT are supported"
            )
        update = command.update
        if update is not None:
            if isinstance(update, (list, tuple)):
                for key, value in update:
                    if key not in self.output_keys:
                        self._unknown_key(key)
                        continue
                    writes.append((key, value))
            else:
                self._update(writes, update)
        assert self.graph is not None
        for target in command.goto_targets():
            writes.append(self.graph.goto_write(target, self.where))

    def _apply_output(self, writes: list[tuple[str, Any]], output: Any) -> None:
        if output is None:
            pass
        elif type(output) is dict:
            self._update(writes, output)
        elif isinstance(output, Command):
            self._command(writes, output)
        elif (
            isinstance(output, (list, tuple))
            and output
            and any(isinstance(o, Command) for o in output)
        ):
            for item in output:
                if isinstance(item, Command):
                    self._command(writes, item)
                else:
                    self._update(writes, item)
        elif isinstance(output, (str, int, float, bool, bytes, list, tuple, set)):
            raise InvalidUpdateError(
                error_message(
                    f"Expected dict, got {output!r} (returned by {self.where})",
                    ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE,
                )
            )
        else:
            self._update(writes, output)
        if self.edge_writes:
            writes.extend(self.edge_writes)

    def _routing_state(
        self,
        task: PregelExecutableTask,
        read_fresh: Callable[[Sequence[str]], dict[str, Any]],
    ) -> Any:
        state = read_fresh(self.state_keys)
        if self.managed:  # path functions see the managed values their node saw
            source = task.input
            for key in self.managed:
                value = (
                    source.get(key, MISSING)
                    if isinstance(source, dict)
                    else getattr(source, key, MISSING)
                )
                if value is not MISSING:
                    state[key] = value
        if self.state_mapper is not None:
            state = self.state_mapper(state)
        return state

    def __call__(
        self,
        task: PregelExecutableTask,
        output: Any,
        read_fresh: Callable[[Sequence[str]], dict[str, Any]],
    ) -> None:
        self._apply_output(task.writes, output)
        if self.branches:
            assert self.graph is not None
            state = self._routing_state(task, read_fresh)
            known = self.graph.node_names
            for branch in self.branches:
                task.writes.extend(branch.writes(branch.route(state), known))

    async def awrite(
        self,
        task: PregelExecutableTask,
        output: Any,
        read_fresh: Callable[[Sequence[str]], dict[str, Any]],
    ) -> None:
        """Async twin of ``__call__``: async path functions are awaited."""
        self._apply_output(task.writes, output)
        if self.branches:
            assert self.graph is not None
            state = self._routing_state(task, read_fresh)
            known = self.graph.node_names
            for branch in self.branches:
                task.writes.extend(branch.writes(await branch.aroute(state), known))
