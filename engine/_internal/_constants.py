"""Reserved channel names and config keys, interned so hot-path comparisons are cheap.

Values match LangGraph's so checkpoints and configs read the same way.
"""

from __future__ import annotations

import sys

# Reserved write keys (never state keys).
INPUT = sys.intern("__input__")
INTERRUPT = sys.intern("__interrupt__")
RESUME = sys.intern("__resume__")
ERROR = sys.intern("__error__")
NO_WRITES = sys.intern("__no_writes__")
TASKS = sys.intern("__pregel_tasks")
RETURN = sys.intern("__return__")
PREVIOUS = sys.intern("__previous__")
ERROR_SOURCE_NODE = sys.intern("__error_source_node__")

# Cache namespace of node results: (CACHE_NS_WRITES, graph name, node name).
CACHE_NS_WRITES = sys.intern("__engine_writes")

# Task kinds (first element of a task path).
PUSH = sys.intern("__pregel_push")
PULL = sys.intern("__pregel_pull")

# Graph boundaries.
START = sys.intern("__start__")
END = sys.intern("__end__")

# Config keys.
CONF = sys.intern("configurable")
CONFIG_KEY_THREAD_ID = sys.intern("thread_id")
CONFIG_KEY_CHECKPOINT_ID = sys.intern("checkpoint_id")
CONFIG_KEY_CHECKPOINT_NS = sys.intern("checkpoint_ns")
CONFIG_KEY_CHECKPOINT_MAP = sys.intern("checkpoint_map")
CONFIG_KEY_TASK = sys.intern("__engine_task")
CONFIG_KEY_CHECKPOINTER = sys.intern("__pregel_checkpointer")
CONFIG_KEY_RESUMING = sys.intern("__pregel_resuming")
CONFIG_KEY_REPLAY = sys.intern("__engine_replay")

# Namespace separators: "parent_node:task_id|child_node:task_id".
NS_SEP = sys.intern("|")
NS_END = sys.intern(":")

NULL_TASK_ID = sys.intern("00000000-0000-0000-0000-000000000000")

# Write keys that are not channels.
RESERVED_WRITES = frozenset(
    {INPUT, INTERRUPT, RESUME, ERROR, NO_WRITES, RETURN, ERROR_SOURCE_NODE}
)

# Names a user may not give a node or a state key.
RESERVED_NAMES = frozenset(
    {
        START,
        END,
        INPUT,
        INTERRUPT,
        RESUME,
        ERROR,
        NO_WRITES,
        TASKS,
        RETURN,
        PREVIOUS,
        PUSH,
        PULL,
        ERROR_SOURCE_NODE,
    }
)
