"""Query limits as GraphQL validation: depth, and a cost that multiplies page sizes.

A query over a limit is refused before any resolver runs, with an ``errors`` entry that says
which limit and by how much.

The cost approximates the work: every field costs 1; a field that reads the database costs
``READ_COST`` (it loads rows, one SQL query per nesting level thanks to the batching of
``schema``); a count costs ``COUNT_COST`` (it may walk up to ``count_cap`` index entries); a
list's items are paid once per item of its page size (a connection's ``pageInfo`` and counts
once), so nested lists multiply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import (
    ASTValidationRule,
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
)


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


def query_cost(selection_set: SelectionSetNode | None, fragments: dict[str, Any],
               limits: Limits, seen: frozenset[str] = frozenset(), page: int = 1) -> int:
    """Each field costs 1 (``READ_COST`` if it reads rows, ``COUNT_COST`` if it counts) plus
    its children's cost. Inside a paged field (``page`` > 1, the page size asked for; a variable
    counts as the largest allowed) every field is paid once per item, except the connection's
    own fields (``pageInfo``, the counts), which are paid once."""
    if selection_set is None:
        return 0
    total = 0
    for sel in selection_set.selections:
        if isinstance(sel, FieldNode):
            name = sel.name.value
            factor = 1
            if name in PAGED_FIELDS:
                factor = limits.default_page_size
                for arg in sel.arguments or ():
                    if arg.name.value == "first":
                        factor = (int(arg.value.value) if isinstance(arg.value, IntValueNode)
                                  else limits.max_page_size)
            children = query_cost(sel.selection_set, fragments, limits, seen, max(factor, 1))
            own = (COUNT_COST if name in COUNT_FIELDS
                   else READ_COST if name in READ_FIELDS else 1)
            times = 1 if name in CONNECTION_FIELDS else page
            total += times * (own + children)
        elif isinstance(sel, InlineFragmentNode):
            total += query_cost(sel.selection_set, fragments, limits, seen, page)
        elif isinstance(sel, FragmentSpreadNode):
            name = sel.name.value
            if name in fragments and name not in seen:
                total += query_cost(fragments[name].selection_set, fragments, limits,
                                    seen | {name}, page)
    return total


def cost_rule(limits: Limits) -> type[ASTValidationRule]:
    class CostRule(ASTValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)

        def enter_operation_definition(self, node: OperationDefinitionNode,
                                       *_: Any) -> None:
            fragments = {f.name.value: f for f in self.context.document.definitions
                         if f.__class__.__name__ == "FragmentDefinitionNode"}
            cost = query_cost(node.selection_set, fragments, limits)
            if cost > limits.max_cost:
                self.report_error(GraphQLError(
                    f"query cost {cost} is over the limit {limits.max_cost}: ask for smaller "
                    f"pages (first) or fewer nested lists", node))

    return CostRule
