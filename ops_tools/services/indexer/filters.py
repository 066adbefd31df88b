"""SubQuery-style filters (``filter: {field: {equalTo, in, greaterThan, …}, and, or}``) compiled
to SQL, refused when no index would serve them.

Every field is either a *key*, which leads one of the list's indexes (a page filtered by it
walks an index range), or a *residual*, which only narrows rows found by a key: a residual
without one of its keys in the same conjunction would be a walk through the whole list until a
page is found, so it is refused, naming the field and the keys that serve it. A block range
bounded on both sides and at most ``MAX_RANGE_BLOCKS`` wide counts as a key.

The boolean tree is distributed into its conjunctions (disjunctive normal form), so a
conjunction is what the rule above judges, wherever its conditions sit in ``and``/``or``, and
each conjunction is read as its own index range (see branches): an ``or`` of two accounts is two
walks of the account index, not one condition a planner may serve by walking the whole list.
The expansion is bounded (``MAX_BRANCHES``) and the query cost pays for it (limits.py).

A block time range becomes a block number range: block times only grow along the chain
(pallet_timestamp refuses a time not past its parent's), so the first block at or after a time
is one seek on the blocks' time index, and the list walks its block-number key from there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from types import SimpleNamespace
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
#: Index branches one filter may expand to (see branches): a two-sided field's ``in`` at its
#: largest. The query cost multiplies a connection by its filter's branches (limits.py).
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
    #: A branch with this field is read through the table of ``columns`` (a join on its
    #: index, which leads with the network and the field, then the list's sort key): its
    #: condition there is not wrapped, see Branch.joined.
    drive: bool = False
    #: For a residual that an index of this key's holds next (an event's name after its
    #: pallet): beside an equality on that key, its ``in`` is one branch per value, each an
    #: ordered walk of that index (as one IN, a walk of the key's range for the values).
    after: str | None = None


@dataclass(frozen=True)
class _Atom:
    """One field's operators where the filter names them (``where``: ``filter.or[1]``); in a
    branch, with the one column of a field of several that this branch reads."""

    attr: str
    ops: Any
    where: str
    column: int | None = None

    def sig(self) -> tuple[Any, ...]:
        ops = tuple((a, _frozen(getattr(self.ops, a, None))) for a in OPERATORS)
        return (self.attr, self.column, ops)


def _frozen(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Branch:
    """One index range of a filter: ``where`` its condition; ``joined``: a ``drive`` field's
    condition is on that field's table, which the list joins (queries.events)."""

    where: ColumnElement[bool]
    joined: bool = False


def compile_filter(spec: dict[str, Field], value: Any, *,
                   ranged: bool = False) -> ColumnElement[bool]:
    """The SQL condition of ``value`` (a filter input object, or None for no filter), one
    condition (an OR of its conjunctions), for a list ordered by the key its filter names
    (operators, accounts: an OR of that key's values is ranges of the walk in its order);
    ``ranged``: the caller bounds the block range itself."""
    if value is None:
        return true()
    conjunctions = _conjunctions(spec, value, ranged)
    if not conjunctions:
        return false()
    return or_(*[_compile(spec, atoms, None) for atoms in conjunctions])


def branches(spec: dict[str, Field], value: Any, *, ranged: bool = False) -> list[Branch]:
    """``value`` as the branches whose union is the list, each served by one index range in
    the list's order, where one OR or IN is not (see queries.paginate). The filter's boolean
    tree is distributed into its conjunctions (each ``or`` member is one, at any depth, with
    what the ``and``s around it add); in each, a field of several columns (a transfer's
    ``account``: from or to) makes one branch per column, and the leading key's ``in`` one per
    value. Identical branches are read once. More than ``MAX_BRANCHES`` is refused
    (TooManyBranches), naming where the filter overflowed."""
    if value is None:
        return [Branch(true())]
    out: dict[frozenset[tuple[Any, ...]], Branch] = {}
    for atoms in _conjunctions(spec, value, ranged):
        for split in _split(spec, atoms):
            sig = frozenset(a.sig() for a in split)
            if sig in out:
                continue
            _bound(len(out) + 1, "filter")
            driver = _driver(spec, split)
            out[sig] = Branch(_compile(spec, split, driver), joined=driver is not None)
    return list(out.values()) or [Branch(false())]


def compile_branches(spec: dict[str, Field], value: Any, *,
                     ranged: bool = False) -> list[ColumnElement[bool]]:
    """The conditions of ``branches``."""
    return [b.where for b in branches(spec, value, ranged=ranged)]


def count_branches(spec: dict[str, Field], value: Any) -> int:
    """How many index branches ``value`` expands to (the query cost's factor, limits.py);
    past ``MAX_BRANCHES`` it raises TooManyBranches; a filter refused for another reason
    counts 1 (its resolver refuses it, naming the field)."""
    try:
        return len(branches(spec, value, ranged=True))
    except TooManyBranches:
        raise
    except QueryError:
        return 1


def _conjunctions(spec: dict[str, Field], value: Any, ranged: bool) -> list[list[_Atom]]:
    """The filter's disjunctive normal form, bounded, each conjunction checked: every
    residual field has one of its keys beside it."""
    walk = _Walk()
    conjunctions = _dnf(spec, value, walk, 1)
    outer = {BLOCK_RANGE} if ranged else set()
    for atoms in conjunctions:
        keys = outer | _keys(spec, atoms)
        for atom in atoms:
            f = spec[atom.attr]
            if not f.key and not f.block_number and not f.time and not keys & set(f.needs):
                raise QueryError(
                    f"{atom.where}.{f.name}: no index serves this filter on its own, and it is "
                    f"not run as a scan; combine it in the same and with {' or '.join(f.needs)}")
    return conjunctions


@dataclass
class _Walk:
    terms: int = 0
    path: list[str] = field(default_factory=list)


def _dnf(spec: dict[str, Field], value: Any, walk: _Walk, depth: int) -> list[list[_Atom]]:
    where = "filter" + "".join(walk.path)
    if depth > MAX_DEPTH:
        raise QueryError(f"{where}: and/or nested deeper than {MAX_DEPTH}; flatten the filter")
    atoms = []
    for attr in spec:
        ops = getattr(value, attr, None)
        if ops is not None:
            _check(spec[attr], ops, walk, where)
            atoms.append(_Atom(attr, ops, where))
    out = [atoms]
    for i, child in enumerate(value.and_ or ()):
        walk.path.append(f".and[{i}]")
        out = _product(out, _dnf(spec, child, walk, depth + 1), "filter" + "".join(walk.path))
        walk.path.pop()
    members: list[list[_Atom]] = []
    for i, child in enumerate(value.or_ or ()):
        walk.path.append(f".or[{i}]")
        members += _dnf(spec, child, walk, depth + 1)
        _bound(len(members), "filter" + "".join(walk.path))
        walk.path.pop()
    if value.or_:
        out = _product(out, members, f"{where}.or")
    return out


def _product(left: list[list[_Atom]], right: list[list[_Atom]],
             where: str) -> list[list[_Atom]]:
    _bound(len(left) * len(right), where)
    return [a + b for a in left for b in right]


class TooManyBranches(QueryError):
    """A filter that expands to more index branches than ``MAX_BRANCHES``."""


def _bound(n: int, where: str) -> None:
    if n > MAX_BRANCHES:
        raise TooManyBranches(
            f"{where}: the filter expands to {n} or more index branches, at most "
            f"{MAX_BRANCHES} (one per member of an or at any depth, times each or beside it, "
            f"each value of a key's in, of a name's or call's in beside a pallet, and each "
            f"side of a transfer's account); split the query or shorten the or and in lists")


def _check(f: Field, ops: Any, walk: _Walk, where: str) -> None:
    """Bounds the input once, where it is written (a condition may sit in many branches)."""
    given = [a for a in OPERATORS if getattr(ops, a, None) is not None]
    if not given:
        raise QueryError(f"{where}.{f.name}: give an operator ({', '.join(OPERATORS.values())})")
    for attr in given:
        walk.terms += len(f.columns)
        if walk.terms > MAX_TERMS:
            raise QueryError(f"{where}.{f.name}: more than {MAX_TERMS} conditions in one "
                             f"filter; split the query")
        if attr == "in_" and len(ops.in_) > MAX_IN:
            raise QueryError(f"{where}.{f.name}.in: {len(ops.in_)} values, at most "
                             f"{MAX_IN}; split the query")


def _split(spec: dict[str, Field], atoms: list[_Atom]) -> list[list[_Atom]]:
    """One conjunction as branches: one per column of each field of several, then one per
    value of the leading key's ``in`` (a driving field's first: joined as one IN, an item
    naming two of its values would come twice), then, in a branch not read through a driving
    field, one per value of the ``in`` of a field its key's index holds next (Field.after)."""
    out: list[list[_Atom]] = [[]]
    for atom in atoms:
        n = len(spec[atom.attr].columns)
        _bound(len(out) * n, f"{atom.where}.{spec[atom.attr].name}")
        out = [[*b, replace(atom, column=i) if n > 1 else atom] for b in out for i in range(n)]
    for atom in sorted(atoms, key=lambda a: not spec[a.attr].drive):
        f = spec[atom.attr]
        if f.key and _listed(atom) and not f.time:
            out = _per_value(out, atom, f)
            break
    if any(spec[a.attr].drive for a in atoms):
        return out  # read through the driving field's index: the rest is checked per row
    for atom in atoms:
        f = spec[atom.attr]
        if f.after is None or not _listed(atom):
            continue
        split: list[list[_Atom]] = []
        for branch in out:
            keyed = any(a.attr == f.after and getattr(a.ops, "equal_to", None) is not None
                        for a in branch)
            split += _per_value([branch], atom, f) if keyed else [branch]
            _bound(len(split), f"{atom.where}.{f.name}.in")
        out = split
    return out


def _listed(atom: _Atom) -> bool:
    return (getattr(atom.ops, "in_", None) is not None
            and getattr(atom.ops, "equal_to", None) is None)


def _per_value(out: list[list[_Atom]], atom: _Atom, f: Field) -> list[list[_Atom]]:
    """Each branch of ``out`` once per value of ``atom``'s ``in``, as an equality."""
    ops = atom.ops
    values = list(dict.fromkeys(ops.in_))
    _bound(len(out) * len(values), f"{atom.where}.{f.name}.in")
    rest = {a: getattr(ops, a, None) for a in OPERATORS if a not in ("in_", "equal_to")}
    return [[replace(a, ops=_Ops(equal_to=v, **rest)) if a.ops is ops else a
             for a in b] for b in out for v in values]


def _driver(spec: dict[str, Field], atoms: list[_Atom]) -> _Atom | None:
    """The ``drive`` field's condition the branch is read through: an equality first."""
    driving = [a for a in atoms if spec[a.attr].drive]
    driving.sort(key=lambda a: getattr(a.ops, "equal_to", None) is None)
    return driving[0] if driving else None


def _keys(spec: dict[str, Field], atoms: list[_Atom]) -> set[str]:
    keys = set()
    low: Any = None
    high: Any = None
    for atom in atoms:
        f, ops = spec[atom.attr], atom.ops
        if f.key and (ops.equal_to is not None or getattr(ops, "in_", None) is not None):
            keys.add(f.name)
        if f.block_number:
            if ops.in_ is not None:
                keys.add(BLOCK_RANGE)
            lo = _first_set(ops, "greater_than", "greater_than_or_equal_to", "equal_to")
            hi = _first_set(ops, "less_than", "less_than_or_equal_to", "equal_to")
            low = lo if low is None or (lo is not None and lo > low) else low
            high = hi if high is None or (hi is not None and hi < high) else high
    if low is not None and high is not None and high - low <= MAX_RANGE_BLOCKS:
        keys.add(BLOCK_RANGE)
    return keys


def _first_set(ops: Any, *names: str) -> Any:
    for name in names:
        got = getattr(ops, name, None)
        if got is not None:
            return got
    return None


def _compile(spec: dict[str, Field], atoms: list[_Atom],
             driver: _Atom | None) -> ColumnElement[bool]:
    if not atoms:
        return true()
    return and_(*[_field(spec[a.attr], a, unwrapped=a is driver) for a in atoms])


@dataclass(frozen=True)
class _Ops:
    """A field's operators, by their Python names."""

    equal_to: Any = None
    in_: Any = None
    greater_than: Any = None
    greater_than_or_equal_to: Any = None
    less_than: Any = None
    less_than_or_equal_to: Any = None


def from_graphql(spec: dict[str, Field], raw: Any) -> Any:
    """A filter as GraphQL coerces it before the resolver (a dict by GraphQL names, as
    ``graphql.value_from_ast`` gives it), read by the Python names this module reads."""
    if not isinstance(raw, dict):
        return None
    node: dict[str, Any] = {}
    for attr, f in spec.items():
        ops = raw.get(f.name)
        node[attr] = None if not isinstance(ops, dict) else _Ops(
            **{a: ops.get(g) for a, g in OPERATORS.items()})
    for attr, name in (("and_", "and"), ("or_", "or")):
        children = raw.get(name)
        node[attr] = None if not isinstance(children, list) else [
            from_graphql(spec, c) for c in children]
    return SimpleNamespace(**node)


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


def _field(f: Field, atom: _Atom, *, unwrapped: bool = False) -> ColumnElement[bool]:
    """``atom``'s condition: on its branch's column (any of the field's, without one); on the
    field's own table when ``unwrapped`` (the branch reads through it), else the list's."""
    columns = f.columns if atom.column is None else (f.columns[atom.column],)
    per_column: list[ColumnElement[bool]] = []
    for column in columns:
        conds: list[ColumnElement[bool]] = []
        for attr in OPERATORS:
            operand = getattr(atom.ops, attr, None)
            if operand is None:
                continue
            if attr == "in_":
                conds.append((_time(column, attr, operand) if f.time else column.in_(
                    list(operand))) if operand else false())
            elif f.time:
                conds.append(_time(column, attr, operand))
            else:
                conds.append({"equal_to": column.__eq__, "greater_than": column.__gt__,
                              "greater_than_or_equal_to": column.__ge__,
                              "less_than": column.__lt__,
                              "less_than_or_equal_to": column.__le__}[attr](operand))
        per_column.append(and_(*conds))
    cond = per_column[0] if len(per_column) == 1 else or_(*per_column)
    return f.wrap(cond) if f.wrap and not unwrapped else cond


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
    "call": Field("call", (ExtrinsicRow.call,), needs=("pallet",), after="pallet"),
    "success": Field("success", (ExtrinsicRow.success,),
                     needs=("signer", "pallet", "hash", BLOCK_RANGE)),
    "hash": Field("hash", (ExtrinsicRow.hash,), key=True),
    "block_number": Field("blockNumber", (ExtrinsicRow.block_number,), block_number=True),
    "timestamp": Field("timestamp", (ExtrinsicRow.block_number,), time=True),
}
EVENTS = {
    "pallet": Field("pallet", (EventRow.pallet,), key=True),
    "name": Field("name", (EventRow.name,), needs=("pallet", BLOCK_RANGE), after="pallet"),
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
