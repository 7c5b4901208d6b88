"""The account pages' POST payloads, validated strictly (``studio.forms.StrictForm``)."""

from __future__ import annotations

from studio.forms import StrictForm

__all__ = ("NewToken",)


class NewToken(StrictForm):
    """``POST /account/tokens/``: a name for the new token (checked by the service)."""

    name: str
