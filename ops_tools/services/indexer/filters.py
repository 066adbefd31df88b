"""SubQuery-style filters (``filter: {field: {equalTo, in, greaterThan, …}, and, or}``) compiled
to SQL, refused when no index would serve them.

Every field is either a *key*, which leads one of the list's indexes (a page filtered by it
walks an index range), or a *residual*, which only narrows rows found by a key: a residual
without one of its keys in the same conjunction would be a walk through the whole list until a
page is found, so it is refused, naming the field and the keys that serve it. A block range
bounded on both sides and at most ``MAX_RANGE_BLOCKS`` wide counts as a key.

A block time range becomes a block number range: block times only grow along the chain
(pallet_timestamp refuses a time not past its parent's), so the first block at or after a time
is one seek on the blocks' time index, and the list walks its block-number key from there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, false, or_, select, true

from ops_tools.services.indexer.queries import QueryError
from ops_tools.services.indexer.tables import (
    AccountRow,
    BlockRow,
    EventAccountRow,
    EventRow,
    ExtrinsicRow,
    HeartbeatRow,
    OperatorRow,
    TransferRow,
)

MAX_IN = 100
MAX_DEPTH = 4
MAX_TERMS = 32
MAX_RANGE_BLOCKS = 1_000
#: Branches of one filter (compile_branches): a two-sided field's ``in`` at its largest.
MAX_BRANCHES = 2 * MAX_IN
BLOCK_RANGE = "a blockNumber range (greaterThan… and lessThan…) at most 1000 blocks wide"

#: Operator attribute (the Python name of the input's field) -> GraphQL name.
OPERATORS = {"equal_to": "equalTo", "in_": "in", "greater_than": "greaterThan",
             "greater_than_or_equal_to": "greaterThanOrEqualTo", "less_than": "lessThan",
             "less_than_or_equal_to": "lessThanOrEqualTo"}


@dataclass(frozen=True)
class Field:
    name: str  # as GraphQL spells it
    columns: tuple[ColumnElement[Any], ...]  # several: any of them matches (either side)
    key: bool = False
    needs: tuple[str, ...] = ()  # for a residual: the keys that serve it
    block_number: bool = False
    time: bool = False  # a block time range on ``columns``, the list's block number
    #: Turns the condition on ``columns`` into the list's (a correlated EXISTS, say).
    wrap: Callable[[ColumnElement[bool]], ColumnElement[bool]] | None = None
    #: At the top of a filter the list is read through the table of ``columns`` (a join on
    #: its index, which leads with the network and the field, then the list's sort key), so
    #: the condition is not wrapped there: see drives.
    drive: bool = False


@dataclass
class _Walk:
    terms: int = 0
    path: list[str] = field(default_factory=list)


def compile_filter(spec: dict[str, Field], value: Any, *, ranged: bool = False,
                   nested: dict[str, Field] | None = None) -> ColumnElement[bool]:
    """The SQL condition of ``value`` (a filter input object, or None for no filter);
    ``ranged``: the caller bounds the block range itself (subscriptions read new blocks);
    ``nested``: the fields of its ``and``/``or`` children, when not ``spec``'s."""
    if value is None:
        return true()
    return _compile(spec, value, frozenset({BLOCK_RANGE} if ranged else ()), _Walk(), 1,
                    nested or spec)


def drives(spec: dict[str, Field], value: Any) -> bool:
    """Whether the list of ``value`` is read through a ``drive`` field's table (the field is
    at the top of the filter): compile_branches then leaves the field unwrapped, a condition
    on that table, which the list joins (queries.events)."""
    return value is not None and any(
        f.drive and getattr(value, attr, None) is not None for attr, f in spec.items())


def compile_branches(spec: dict[str, Field], value: Any, *,
                     ranged: bool = False) -> list[ColumnElement[bool]]:
    """``value`` as conditions whose union is the list, each served by one index range in the
    list's order, where one OR or IN is not (see queries.paginate): a field of several columns
    at the top of the filter (a transfer's ``account``: from or to) makes one branch per column,
    and the first key field's ``in`` at the top one branch per value. At most
    ``MAX_BRANCHES``; past it the filter stays one condition."""
    top = spec
    if drives(spec, value):
        top = {a: replace(f, wrap=None) if f.drive else f for a, f in spec.items()}
    branches = _branches(top, value)
    if len(branches) > MAX_BRANCHES:
        branches = [(top, value)]
    return [compile_filter(s, v, ranged=ranged, nested=spec) for s, v in branches]


def _branches(spec: dict[str, Field], value: Any) -> list[tuple[dict[str, Field], Any]]:
    if value is None:
        return [(spec, value)]
    out = [(spec, value)]
    for attr, f in spec.items():
        if len(f.columns) > 1 and getattr(value, attr, None) is not None:
            out = [({**spec, attr: replace(f, columns=(column,))}, value)
                   for column in f.columns]
            break
    # A driving field's values first: joined as one IN, an item naming two of them would
    # come twice.
    for attr, f in sorted(spec.items(), key=lambda item: not item[1].drive):
        ops = getattr(value, attr, None)
        if (f.key and ops is not None and getattr(ops, "in_", None)
                and getattr(ops, "equal_to", None) is None and not f.time):
            values = list(dict.fromkeys(ops.in_))
            return [(s, replace(value, **{attr: replace(ops, in_=None, equal_to=one)}))
                    for s, _ in out for one in values]
    return out


def _present(value: Any, spec: dict[str, Field]) -> dict[str, Any]:
    return {attr: getattr(value, attr) for attr in spec if getattr(value, attr, None) is not None}


def _keys(spec: dict[str, Field], fields: dict[str, Any]) -> set[str]:
    keys = set()
    for attr, ops in fields.items():
        f = spec[attr]
        if f.key and (ops.equal_to is not None or getattr(ops, "in_", None) is not None):
            keys.add(f.name)
        if f.block_number:
            low = _first_set(ops, "greater_than", "greater_than_or_equal_to", "equal_to")
            high = _first_set(ops, "less_than", "less_than_or_equal_to", "equal_to")
            if ops.in_ is not None or (low is not None and high is not None
                                       and high - low <= MAX_RANGE_BLOCKS):
                keys.add(BLOCK_RANGE)
    return keys


def _first_set(ops: Any, *names: str) -> Any:
    for name in names:
        got = getattr(ops, name, None)
        if got is not None:
            return got
    return None


def _compile(spec: dict[str, Field], value: Any, outer_keys: frozenset[str], walk: _Walk,
             depth: int, nested: dict[str, Field]) -> ColumnElement[bool]:
    where = "filter" + "".join(walk.path)
    if depth > MAX_DEPTH:
        raise QueryError(f"{where}: and/or nested deeper than {MAX_DEPTH}; flatten the filter")
    fields = _present(value, spec)
    ands: Sequence[Any] = value.and_ or ()
    ors: Sequence[Any] = value.or_ or ()
    keys = set(outer_keys) | _keys(spec, fields)
    for child in ands:
        keys |= _keys(spec, _present(child, spec))
    clauses: list[ColumnElement[bool]] = []
    for attr, ops in fields.items():
        f = spec[attr]
        if not f.key and not f.block_number and not f.time and not keys & set(f.needs):
            raise QueryError(
                f"{where}.{f.name}: no index serves this filter on its own, and it is not run "
                f"as a scan; combine it in the same and with {' or '.join(f.needs)}")
        clauses.append(_field(f, ops, walk, where))
    for name, children in (("and", ands), ("or", ors)):
        parts = []
        for i, child in enumerate(children):
            walk.path.append(f".{name}[{i}]")
            parts.append(_compile(nested, child, frozenset(keys), walk, depth + 1, nested))
            walk.path.pop()
        if parts:
            clauses.append(and_(*parts) if name == "and" else or_(*parts))
    if not clauses:
        return true()
    return and_(*clauses)


#: The network of the list a filter is compiled for, bound by ``queries.with_network``.
NETWORK = bindparam("filter_network", type_=BlockRow.network_id.type)


def millis(value: datetime) -> int:
    """A GraphQL DateTime as the chain's block time (ms since the epoch; naive means UTC)."""
    return int((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp() * 1000)


def _time(number: ColumnElement[Any], attr: str, operand: Any) -> ColumnElement[bool]:
    """``number``'s block has a time ``attr`` ``operand``, as a block number condition."""
    blocks = select(BlockRow.number).where(BlockRow.network_id == NETWORK)
    if attr in ("equal_to", "in_"):
        stamps = [millis(v) for v in (operand if attr == "in_" else [operand])]
        return number.in_(blocks.where(BlockRow.timestamp.in_(stamps)))
    stamp = millis(operand)
    if attr.startswith("greater_than"):
        cond = BlockRow.timestamp >= stamp if attr.endswith("equal_to") else (
            BlockRow.timestamp > stamp)
        first = blocks.where(cond).order_by(BlockRow.timestamp).limit(1).scalar_subquery()
        return number >= first
    cond = BlockRow.timestamp <= stamp if attr.endswith("equal_to") else (
        BlockRow.timestamp < stamp)
    last = blocks.where(cond).order_by(BlockRow.timestamp.desc()).limit(1).scalar_subquery()
    return number <= last


def _field(f: Field, ops: Any, walk: _Walk, where: str) -> ColumnElement[bool]:
    per_column: list[ColumnElement[bool]] = []
    for column in f.columns:
        conds: list[ColumnElement[bool]] = []
        for attr in OPERATORS:
            operand = getattr(ops, attr, None)
            if operand is None:
                continue
            walk.terms += 1
            if walk.terms > MAX_TERMS:
                raise QueryError(f"{where}.{f.name}: more than {MAX_TERMS} conditions in one "
                                 f"filter; split the query")
            if attr == "in_":
                if len(operand) > MAX_IN:
                    raise QueryError(f"{where}.{f.name}.in: {len(operand)} values, at most "
                                     f"{MAX_IN}; split the query")
                conds.append((_time(column, attr, operand) if f.time else column.in_(
                    list(operand))) if operand else false())
            elif f.time:
                conds.append(_time(column, attr, operand))
            else:
                conds.append({"equal_to": column.__eq__, "greater_than": column.__gt__,
                              "greater_than_or_equal_to": column.__ge__,
                              "less_than": column.__lt__,
                              "less_than_or_equal_to": column.__le__}[attr](operand))
        if not conds:
            raise QueryError(f"{where}.{f.name}: give an operator "
                             f"({', '.join(OPERATORS.values())})")
        per_column.append(and_(*conds))
    cond = per_column[0] if len(per_column) == 1 else or_(*per_column)
    return f.wrap(cond) if f.wrap else cond


def _event_names(cond: ColumnElement[bool]) -> ColumnElement[bool]:
    # Correlated with the event only: where the list joins the accounts (queries.events), the
    # subquery's accounts are its own (SQL resolves a name in the innermost FROM first).
    return select(EventAccountRow.event_idx).where(
        EventAccountRow.network_id == EventRow.network_id,
        EventAccountRow.block_number == EventRow.block_number,
        EventAccountRow.event_idx == EventRow.idx, cond).correlate(EventRow).exists()


#: The filters of each list, by the attribute names of their GraphQL inputs (schema.py).
TRANSFERS = {
    "from_": Field("from", (TransferRow.sender,), key=True),
    "to": Field("to", (TransferRow.recipient,), key=True),
    "account": Field("account", (TransferRow.sender, TransferRow.recipient), key=True),
    "block_number": Field("blockNumber", (TransferRow.block_number,), block_number=True),
    "timestamp": Field("timestamp", (TransferRow.block_number,), time=True),
}
EXTRINSICS = {
    "signer": Field("signer", (ExtrinsicRow.signer,), key=True),
    "pallet": Field("pallet", (ExtrinsicRow.pallet,), key=True),
    "call": Field("call", (ExtrinsicRow.call,), needs=("pallet",)),
    "success": Field("success", (ExtrinsicRow.success,),
                     needs=("signer", "pallet", "hash", BLOCK_RANGE)),
    "hash": Field("hash", (ExtrinsicRow.hash,), key=True),
    "block_number": Field("blockNumber", (ExtrinsicRow.block_number,), block_number=True),
    "timestamp": Field("timestamp", (ExtrinsicRow.block_number,), time=True),
}
EVENTS = {
    "pallet": Field("pallet", (EventRow.pallet,), key=True),
    "name": Field("name", (EventRow.name,), needs=("pallet", BLOCK_RANGE)),
    "account": Field("account", (EventAccountRow.account,), key=True, wrap=_event_names,
                     drive=True),
    "block_number": Field("blockNumber", (EventRow.block_number,), block_number=True),
    "timestamp": Field("timestamp", (EventRow.block_number,), time=True),
}
BLOCKS = {
    "number": Field("number", (BlockRow.number,), block_number=True),
    "hash": Field("hash", (BlockRow.hash,), key=True),
    "timestamp": Field("timestamp", (BlockRow.number,), time=True),
}
HEARTBEATS = {
    "account": Field("account", (HeartbeatRow.account,), key=True),
    "epoch": Field("epoch", (HeartbeatRow.epoch,), needs=("account", BLOCK_RANGE)),
    "block_number": Field("blockNumber", (HeartbeatRow.block_number,), block_number=True),
    "timestamp": Field("timestamp", (HeartbeatRow.block_number,), time=True),
}
#: Operators and accounts are keyed by their account: that is their index (and their order).
OPERATOR_RECORDS = {
    "account": Field("account", (OperatorRow.account,), key=True),
}
ACCOUNTS = {
    "address": Field("address", (AccountRow.address,), key=True),
}
