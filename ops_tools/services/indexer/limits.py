"""Query limits as GraphQL validation: depth, and a cost that multiplies page sizes.

A query over a limit is refused before any resolver runs, with an ``errors`` entry that says
which limit and by how much.

The cost approximates the work: every field costs 1; a field that reads the database costs
``READ_COST`` (it loads rows, one SQL query per nesting level thanks to the batching of
``schema``); a count costs ``COUNT_COST`` (it may walk up to ``count_cap`` index entries); a
list's items are paid once per item of its page size (a connection's ``pageInfo`` and counts
once), so nested lists multiply; a list whose filter expands to several index branches
(filters.branches: each reads up to a page, and its count up to the cap) is paid once per
branch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    ASTValidationRule,
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
)
from graphql.execution.values import get_variable_values

#: How many index branches a paged field's arguments make (1 for none), given the schema and
#: the operation's variables, coerced; raises Refused for arguments past the branches' bound.
Branches = Callable[[GraphQLSchema, FieldNode, dict[str, Any]], int]


class Refused(Exception):
    """A field's arguments refused while their cost is reckoned (the message says why)."""


@dataclass(frozen=True)
class Limits:
    max_depth: int = 10
    max_page_size: int = 100
    default_page_size: int = 20
    max_cost: int = 20_000
    count_cap: int = 10_000


#: Fields that return pages: their cost is multiplied by the page size asked for.
PAGED_FIELDS = frozenset({"blocks", "extrinsics", "events", "transfers", "operators",
                          "heartbeats", "accounts"})
#: Fields whose resolver reads rows from the database (besides the pages).
READ_FIELDS = PAGED_FIELDS | {"block", "extrinsic", "indexStatus", "networks", "_metadata"}
READ_COST = 10
COUNT_FIELDS = frozenset({"totalCount", "totalCountCapped"})
COUNT_COST = 500
#: A connection's fields that are not per item.
CONNECTION_FIELDS = COUNT_FIELDS | {"pageInfo"}


@dataclass
class _Walk:
    branches: Callable[[FieldNode], int] = lambda _node: 1
    #: The paged fields whose filters made several branches: (field, branches).
    branched: list[tuple[str, int]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def query_cost(selection_set: SelectionSetNode | None, fragments: dict[str, Any],
               limits: Limits, seen: frozenset[str] = frozenset(), page: int = 1,
               walk: _Walk | None = None) -> int:
    """Each field costs 1 (``READ_COST`` if it reads rows, ``COUNT_COST`` if it counts) plus
    its children's cost. Inside a paged field (``page`` > 1, the page size asked for; a variable
    counts as the largest allowed) every field is paid once per item, except the connection's
    own fields (``pageInfo``, the counts), which are paid once. A paged field is paid once per
    index branch of its filter (``walk.branches``)."""
    if selection_set is None:
        return 0
    walk = walk or _Walk()
    total = 0
    for sel in selection_set.selections:
        if isinstance(sel, FieldNode):
            name = sel.name.value
            factor = 1
            branches = 1
            if name in PAGED_FIELDS:
                factor = limits.default_page_size
                for arg in sel.arguments or ():
                    if arg.name.value == "first":
                        factor = (int(arg.value.value) if isinstance(arg.value, IntValueNode)
                                  else limits.max_page_size)
                try:
                    branches = walk.branches(sel)
                except Refused as exc:
                    walk.refused.append(f"{name}: {exc}")
                if branches > 1:
                    walk.branched.append((name, branches))
            children = query_cost(sel.selection_set, fragments, limits, seen, max(factor, 1),
                                  walk)
            own = (COUNT_COST if name in COUNT_FIELDS
                   else READ_COST if name in READ_FIELDS else 1)
            times = 1 if name in CONNECTION_FIELDS else page
            total += times * branches * (own + children)
        elif isinstance(sel, InlineFragmentNode):
            total += query_cost(sel.selection_set, fragments, limits, seen, page, walk)
        elif isinstance(sel, FragmentSpreadNode):
            name = sel.name.value
            if name in fragments and name not in seen:
                total += query_cost(fragments[name].selection_set, fragments, limits,
                                    seen | {name}, page, walk)
    return total


def cost_rule(limits: Limits, variables: dict[str, Any] | None = None,
              branches: Branches | None = None) -> type[ASTValidationRule]:
    """The cost limit for one operation; ``variables``: the request's (raw), which the filters'
    branches are counted with."""

    class CostRule(ASTValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)

        def enter_operation_definition(self, node: OperationDefinitionNode,
                                       *_: Any) -> None:
            fragments = {f.name.value: f for f in self.context.document.definitions
                         if f.__class__.__name__ == "FragmentDefinitionNode"}
            walk = _Walk()
            if branches is not None:
                schema = self.context.schema
                # Variables GraphQL refuses are reported when the operation runs; until then
                # the filters they carry count one branch.
                coerced = get_variable_values(schema, node.variable_definitions or (),
                                              variables or {})
                values = getattr(coerced, "coerced", None) or {}
                walk.branches = lambda field_node: branches(schema, field_node, values)
            cost = query_cost(node.selection_set, fragments, limits, walk=walk)
            for message in walk.refused:
                self.report_error(GraphQLError(message, node))
            if cost > limits.max_cost and not walk.refused:
                why = "ask for smaller pages (first) or fewer nested lists"
                if walk.branched:
                    name, n = max(walk.branched, key=lambda b: b[1])
                    why = (f"the filter of {name} expands to {n} index branches, each paid as a "
                           f"list of its own: {why}, or fewer values in its in and or lists")
                self.report_error(GraphQLError(
                    f"query cost {cost} is over the limit {limits.max_cost}: {why}", node))

    return CostRule
