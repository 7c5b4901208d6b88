"""The purchase request form (new request and change request), checked strictly.

The page posts ``amount`` (CNY text such as ``480.50``), ``vendor``,
``category``, ``reason`` and up to :data:`MAX_ITEMS` item rows as
``items-N-sku``, ``items-N-qty``, ``items-N-unit_price`` (N from 0). Amounts
become fen through :class:`decimal.Decimal`, never through a float.

:func:`bind` never raises for bad input: it returns a :class:`BoundPurchase`
with the errors by field, so the view re-renders the form with each error next
to its field (422) without ``try/except``. A form that passes its own checks is
then checked against the graph's input schema
(:class:`studio.demo_graphs.purchase.PurchaseRequest`), whose errors are mapped back
to the fields too, so a request the graph would refuse is never queued.

Server-set fields: ``request_id``, ``approval_version`` and ``requester`` come
from the server (a fresh id, the next version, the signed-in user). A POST that
carries any of them, or any other field the form does not have, is *refused*
(422, nothing queued) rather than silently ignored: a client that tries learns
it did not work, as the graph itself refuses an input ``requester``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, Field, ValidationError

from studio.demo_graphs.purchase import PurchaseRequest
from studio.forms import StrictForm

__all__ = (
    "ITEM_FIELDS",
    "MAX_ITEMS",
    "SERVER_SET_FIELDS",
    "BoundPurchase",
    "FieldState",
    "ItemRow",
    "ItemState",
    "PurchaseDraft",
    "PurchaseFields",
    "bind",
    "blank",
    "cny_text",
    "initial",
    "to_minor",
)

MAX_ITEMS = 5
ITEM_FIELDS = ("sku", "qty", "unit_price")
SCALAR_FIELDS = ("amount", "vendor", "category", "reason")
SERVER_SET_FIELDS = ("request_id", "approval_version", "requester")
"""Set by the server, never by the form: posting one is refused."""
ITEMS = "items"
"""Key of errors about the item rows as a whole (they do not add up)."""
FORM_ERRORS = ""
"""Key of errors that belong to no single field."""
REQUIRED = "This field is required."
_NOT_FIELDS = frozenset({"csrfmiddlewaretoken"})
_CNY = re.compile(r"\d{1,12}(?:\.\d{1,2})?")
_PLACEHOLDER_ID = "PO-00000000"
"""Stands in for the server's request id while the draft is checked against the graph."""


# -- the strict models ---------------------------------------------------------------


def _cny(text: str) -> str:
    """CNY as typed: digits, optionally a point and at most 2 decimals (fen)."""
    if _CNY.fullmatch(text):
        return text
    if text.startswith("-"):
        raise ValueError("must be more than 0")
    if re.fullmatch(r"\d+\.\d{3,}", text):
        raise ValueError("use at most 2 decimals (fen), e.g. 480.50")
    raise ValueError(
        "enter an amount in CNY such as 480.50: digits, then optionally a point "
        "and at most 2 decimals"
    )


def _positive_cny(text: str) -> str:
    if to_minor(_cny(text)) <= 0:
        raise ValueError("must be more than 0")
    return text


class PurchaseFields(StrictForm):
    """The request's own fields, as posted."""

    amount: Annotated[str, AfterValidator(_positive_cny)]
    vendor: str = Field(min_length=1, max_length=200)
    category: str = Field(default="", max_length=64)
    reason: str = Field(min_length=1, max_length=2000)


class ItemRow(StrictForm):
    """One posted item row (``items-N-*``)."""

    sku: str = Field(min_length=1, max_length=64)
    qty: int = Field(gt=0, le=1_000_000)
    unit_price: Annotated[str, AfterValidator(_cny)]


def to_minor(text: str) -> int:
    """Exact fen from checked CNY text (``"480.5"`` -> ``48050``), via Decimal."""
    minor = Decimal(text) * 100
    if minor != minor.to_integral_value():
        raise ValueError(f"{text!r} is not a whole number of fen")
    return int(minor)


def cny_text(minor: int) -> str:
    """Fen as the form's CNY text (``48050`` -> ``"480.50"``), exactly."""
    return f"{Decimal(minor) / 100:.2f}"


# -- what the template shows ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldState:
    """One input as the template shows it: its posted name, what was typed, its errors."""

    name: str
    value: str = ""
    errors: tuple[str, ...] = ()

    @property
    def dom_id(self) -> str:
        return f"purchase-{self.name}"


@dataclass(frozen=True, slots=True)
class ItemState:
    index: int
    sku: FieldState
    qty: FieldState
    unit_price: FieldState

    @property
    def number(self) -> int:
        return self.index + 1


@dataclass(frozen=True, slots=True)
class PurchaseDraft:
    """A valid request without the server-set fields (id, version, requester)."""

    amount_minor: int
    vendor: str
    category: str
    reason: str
    items: tuple[dict[str, Any], ...] = ()

    def graph_input(self, request_id: str, approval_version: int) -> dict[str, Any]:
        """The purchase graph's input (its ``PurchaseRequest`` fields)."""
        return {
            "request_id": request_id,
            "approval_version": approval_version,
            "amount_minor": self.amount_minor,
            "items": [dict(item) for item in self.items],
            "vendor": self.vendor,
            "category": self.category,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class BoundPurchase:
    """A blank, prefilled or submitted form: values, errors and, if valid, the draft."""

    amount: FieldState
    vendor: FieldState
    category: FieldState
    reason: FieldState
    items: tuple[ItemState, ...]
    items_errors: tuple[str, ...] = ()
    form_errors: tuple[str, ...] = ()
    draft: PurchaseDraft | None = None

    @property
    def is_valid(self) -> bool:
        return self.draft is not None

    @property
    def errors(self) -> dict[str, tuple[str, ...]]:
        """Every error by posted name (``""``: the form, ``"items"``: the rows as a whole)."""
        found: dict[str, tuple[str, ...]] = {}
        fields = [self.amount, self.vendor, self.category, self.reason]
        for row in self.items:
            fields += [row.sku, row.qty, row.unit_price]
        for f in fields:
            if f.errors:
                found[f.name] = f.errors
        if self.items_errors:
            found[ITEMS] = self.items_errors
        if self.form_errors:
            found[FORM_ERRORS] = self.form_errors
        return found


def _item_name(index: int, field: str) -> str:
    return f"items-{index}-{field}"


def _state(
    values: Mapping[str, str], errors: Mapping[str, list[str]] | None = None
) -> BoundPurchase:
    errors = errors or {}

    def field(name: str) -> FieldState:
        return FieldState(name, values.get(name, ""), tuple(errors.get(name, ())))

    return BoundPurchase(
        amount=field("amount"),
        vendor=field("vendor"),
        category=field("category"),
        reason=field("reason"),
        items=tuple(
            ItemState(i, *(field(_item_name(i, f)) for f in ITEM_FIELDS))
            for i in range(MAX_ITEMS)
        ),
        items_errors=tuple(errors.get(ITEMS, ())),
        form_errors=tuple(errors.get(FORM_ERRORS, ())),
    )


# -- binding -------------------------------------------------------------------------


def blank() -> BoundPurchase:
    return _state({})


def initial(values: Mapping[str, str]) -> BoundPurchase:
    """A form prefilled with posted-name -> text values (the change form)."""
    return _state(values)


_KNOWN = frozenset(SCALAR_FIELDS) | {
    _item_name(i, f) for i in range(MAX_ITEMS) for f in ITEM_FIELDS
}


def bind(data: Mapping[str, Any]) -> BoundPurchase:
    """Check a POST. Never raises for bad input; see :attr:`BoundPurchase.draft`."""
    errors: dict[str, list[str]] = {}
    values: dict[str, str] = {}
    for name in data:
        if name in _NOT_FIELDS:
            continue
        if name in SERVER_SET_FIELDS:
            _add(errors, FORM_ERRORS, f"{name}: set by the server; do not send it.")
        elif name not in _KNOWN:
            _add(errors, FORM_ERRORS, f"Unknown field {name!r}.")
        else:
            if len(_all(data, name)) > 1:
                _add(errors, name, "Sent more than once.")
            values[name] = str(data[name])

    fields = _check(PurchaseFields, values, SCALAR_FIELDS, errors, prefix="")
    rows: list[tuple[int, ItemRow]] = []
    for i in range(MAX_ITEMS):
        names = {f: _item_name(i, f) for f in ITEM_FIELDS}
        if not any(values.get(n, "").strip() for n in names.values()):
            continue  # an empty row is not an item
        row = _check(ItemRow, values, ITEM_FIELDS, errors, prefix=f"items-{i}-")
        if row is not None:
            rows.append((i, row))

    draft: PurchaseDraft | None = None
    if fields is not None and not errors:
        draft = PurchaseDraft(
            amount_minor=to_minor(fields.amount),
            vendor=fields.vendor,
            category=fields.category,
            reason=fields.reason,
            items=tuple(
                {
                    "sku": row.sku,
                    "qty": row.qty,
                    "unit_price_minor": to_minor(row.unit_price),
                }
                for _, row in rows
            ),
        )
        _check_sum(draft, errors)
        if not errors:
            _check_graph_input(draft, [i for i, _ in rows], errors)
    return _state(values, errors) if errors else _valid(values, draft)


def _valid(values: Mapping[str, str], draft: PurchaseDraft | None) -> BoundPurchase:
    state = _state(values)
    return BoundPurchase(
        amount=state.amount,
        vendor=state.vendor,
        category=state.category,
        reason=state.reason,
        items=state.items,
        draft=draft,
    )


def _all(data: Mapping[str, Any], name: str) -> list[Any]:
    getlist = getattr(data, "getlist", None)  # a QueryDict may carry a name twice
    return list(getlist(name)) if getlist is not None else [data[name]]


def _add(errors: dict[str, list[str]], key: str, message: str) -> None:
    errors.setdefault(key, []).append(message)


def _check[M: StrictForm](
    model: type[M],
    values: Mapping[str, str],
    names: tuple[str, ...],
    errors: dict[str, list[str]],
    *,
    prefix: str,
) -> M | None:
    """Validate one group of fields strictly; a blank field counts as not sent."""
    payload = {}
    for name in names:
        text = values.get(prefix + name, "").strip()
        if text:
            payload[name] = text
    try:
        return model.from_data(payload)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            loc = [str(part) for part in error["loc"]]
            key = prefix + loc[0] if loc else FORM_ERRORS
            _add(errors, key, _message(error))
        return None


_PLAIN = {
    "int_parsing": "Enter a whole number, e.g. 3.",
    "int_type": "Enter a whole number, e.g. 3.",
    "string_too_short": REQUIRED,
}
"""pydantic's wording for a programmer -> words for the person filling the form."""


def _message(error: Mapping[str, Any]) -> str:
    if error["type"] == "missing":
        return REQUIRED
    if error["type"] in _PLAIN:
        return _PLAIN[error["type"]]
    text = str(error["msg"]).removeprefix("Value error, ")
    return text[:1].upper() + text[1:]


def _check_sum(draft: PurchaseDraft, errors: dict[str, list[str]]) -> None:
    if not draft.items:
        return
    total = sum(item["qty"] * item["unit_price_minor"] for item in draft.items)
    if total != draft.amount_minor:
        _add(
            errors,
            ITEMS,
            f"The items add up to {cny_text(total)} CNY, but the amount is "
            f"{cny_text(draft.amount_minor)} CNY: they must be equal.",
        )


_GRAPH_FIELDS = {
    "amount_minor": "amount",
    "vendor": "vendor",
    "category": "category",
    "reason": "reason",
}
_GRAPH_ITEM_FIELDS = {"sku": "sku", "qty": "qty", "unit_price_minor": "unit_price"}


def _check_graph_input(
    draft: PurchaseDraft, item_rows: list[int], errors: dict[str, list[str]]
) -> None:
    """The graph's own input schema has the last word; its errors go to the fields."""
    try:
        PurchaseRequest.model_validate(draft.graph_input(_PLACEHOLDER_ID, 1))
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            _add(errors, _graph_key(error["loc"], item_rows), _message(error))


def _graph_key(loc: tuple[int | str, ...], item_rows: list[int]) -> str:
    if not loc:
        return ITEMS if item_rows else FORM_ERRORS
    head = str(loc[0])
    if head in _GRAPH_FIELDS:
        return _GRAPH_FIELDS[head]
    if head == ITEMS:
        if len(loc) >= 3 and isinstance(loc[1], int) and loc[1] < len(item_rows):
            field = _GRAPH_ITEM_FIELDS.get(str(loc[2]))
            if field:
                return _item_name(item_rows[loc[1]], field)
        return ITEMS
    return FORM_ERRORS
