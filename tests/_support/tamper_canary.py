"""A module no stored value may make the studio import (serializer injection tests).

A tampered checkpoint names ``tests._support.tamper_canary:Payload``; if the
serializer ever imported the named module, it would appear in ``sys.modules``.
"""

from __future__ import annotations

IMPORTED = True


class Payload:
    def __init__(self, **kwargs: object) -> None:
        raise AssertionError("a stored value built a Payload")
