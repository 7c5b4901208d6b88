"""PersistentDict: a dict kept in memory and written to a file on ``sync``/``close``.

What LangGraph's development server keeps an ``InMemorySaver``'s tables in
between restarts (``InMemorySaver(factory=...)``). The file is tagged JSON
(``engine.checkpoint.serde.jsonplus``), never pickle: loading it builds only
plain data and allowed classes, so a file someone else wrote cannot run code.
Writes go to ``<filename>.tmp`` first and then replace the file in one step, so
a crash mid-write leaves the previous version intact.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import IO, Any

from engine.checkpoint.serde.jsonplus import JsonPlusSerializer
from engine.errors import SerializationError

__all__ = ("PersistentDict",)


class PersistentDict(defaultdict[Any, Any]):
    """A ``defaultdict`` that can save itself to ``filename`` and load it back.

    Nothing is read or written until asked: call :meth:`load` after creating
    it (a missing file raises ``FileNotFoundError``), :meth:`sync` to save, and
    :meth:`close` (or leave a ``with`` block) to save and empty it.

    Attributes:
        flag: ``"c"`` (read and write, the default), ``"r"`` (``sync`` writes
            nothing) or ``"n"`` (``load`` reads nothing: start empty).
        mode: file permissions to set after writing (e.g. ``0o600``), or None.
        format: ``"json"``, the only format.
    """

    def __init__(self, *args: Any, filename: str, **kwds: Any) -> None:
        self.flag = "c"
        self.mode: int | None = None
        self.format = "json"
        self.filename = filename
        super().__init__(*args, **kwds)

    def sync(self) -> None:
        """Write the contents to the file (atomically), unless read-only."""
        if self.flag == "r":
            return
        temporary = self.filename + ".tmp"
        try:
            with open(temporary, "wb") as fileobj:
                self.dump(fileobj)
                fileobj.flush()
                os.fsync(fileobj.fileno())
        except BaseException:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise
        os.replace(temporary, self.filename)
        if self.mode is not None:
            os.chmod(self.filename, self.mode)

    def close(self) -> None:
        """Save, then empty the dict."""
        self.sync()
        self.clear()

    def __enter__(self) -> PersistentDict:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def dump(self, fileobj: IO[bytes]) -> None:
        """Write the contents to a binary file object."""
        if self.format != "json":
            raise NotImplementedError(f"Unknown format: {self.format!r}")
        fileobj.write(JsonPlusSerializer().dumps(dict(self)))

    def load(self) -> None:
        """Add the file's contents (an empty file adds nothing)."""
        if self.flag == "n":
            return
        with open(self.filename, "rb") as fileobj:
            data = fileobj.read()
        if not data:
            return
        try:
            loaded = JsonPlusSerializer().loads(data)
        except SerializationError:
            raise
        except ValueError as exc:
            raise SerializationError(
                f"{self.filename} is not a PersistentDict file (expected JSON): {exc}"
            ) from exc
        if not isinstance(loaded, dict):
            raise SerializationError(
                f"{self.filename} does not hold a dict (found {type(loaded).__name__})"
            )
        self.update(loaded)
