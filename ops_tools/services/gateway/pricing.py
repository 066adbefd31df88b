"""Prices in plancks per 1,000 input and output tokens, per model (configuration)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    input_per_1k: int
    output_per_1k: int

    def cost(self, input_tokens: int, output_tokens: int) -> int:
        # Rounded up: a request is never free because it was short.
        total = input_tokens * self.input_per_1k + output_tokens * self.output_per_1k
        return -(-total // 1000)
