"""What a request is billed: the worker's reported usage when the gateway can vouch for it, the
gateway's own count of what it relayed when it cannot. Pure logic.

A worker is hostile until proven otherwise: its usage is taken only when both counts are
integers between 0 and the bound the gateway computed before dispatch (the prompt's UTF-8 bytes,
a token being at least one byte, and ``max_tokens``). Anything else (negative, fractional,
missing, absurd) is a *discrepancy*: the gateway bills its own count (words of the prompt and of
the relayed text, or the relayed chunks of a stream), records what the worker claimed, and counts
it against the operator.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_WORD = re.compile(rb"\S+")
_SHOWN = 40  # characters of a hostile value kept on the receipt


@dataclass(frozen=True)
class Billed:
    input_tokens: int
    output_tokens: int
    discrepancy: str | None  # what the worker claimed and why it was not billed


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _problem(name: str, value: Any, bound: int) -> str | None:
    if value is None:
        return f"{name} missing"
    if not isinstance(value, int) or isinstance(value, bool):
        return f"{name}={_shown(value)} is not an integer"
    if value < 0:
        return f"{name}={_shown(value)} is negative"
    if value > bound:
        return f"{name}={_shown(value)} is over the bound {bound}"
    return None


def bill(reported_prompt: Any, reported_completion: Any, *, input_bound: int, output_bound: int,
         count: Callable[[], tuple[int, int]]) -> Billed:
    """The tokens to bill. ``count`` gives the gateway's own (input, output) count; it is called
    only when the report fails (an honest answer costs no counting)."""
    problems = [p for p in (_problem("prompt_tokens", reported_prompt, input_bound),
                            _problem("completion_tokens", reported_completion, output_bound)) if p]
    if not problems:
        return Billed(reported_prompt, reported_completion, None)
    counted_input, counted_output = count()
    return Billed(min(max(counted_input, 0), input_bound),
                  min(max(counted_output, 0), output_bound),
                  "usage not billed as reported: " + "; ".join(problems))


def count_words(value: Any) -> int:
    """The gateway's own token count of a prompt or an answer: runs of non-space characters in
    every string (a token id in a pre-tokenized prompt counts one). A lower bound of what a real
    tokenizer counts, so a worker that lies is never paid more than an honest one."""
    if isinstance(value, str):
        return len(_WORD.findall(value.encode()))
    if isinstance(value, list):
        return sum(count_words(v) for v in value)
    if isinstance(value, dict):
        return sum(count_words(v) for k, v in value.items() if k != "role")
    if isinstance(value, int) and not isinstance(value, bool):
        return 1
    return 0


def prompt_words(kind: str, body: dict[str, Any]) -> int:
    field = {"chat": "messages", "text": "prompt", "embeddings": "input"}[kind]
    return count_words(body.get(field))


def answer_words(doc: Any) -> int:
    """Words of the answer text of a (non-streamed) completion; 0 for anything else."""
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
        return 0
    total = 0
    for choice in doc["choices"]:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        if isinstance(message, dict):
            total += count_words(message.get("content"))
        total += count_words(choice.get("text"))
    return total
