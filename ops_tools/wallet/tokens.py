"""Token amounts: plancks (integers) to exact decimal token strings, never through floats."""

from __future__ import annotations

TOKEN_DECIMALS = 12
PLANCKS_PER_TOKEN = 10**TOKEN_DECIMALS


def format_tokens(plancks: int, decimals: int = TOKEN_DECIMALS) -> str:
    """``1_500_000_000_000`` -> ``"1.5"``; exact, trailing zeros dropped, ``0`` -> ``"0"``."""
    sign = "-" if plancks < 0 else ""
    whole, frac = divmod(abs(plancks), 10**decimals)
    frac_text = f"{frac:0{decimals}d}".rstrip("0") if decimals else ""
    return f"{sign}{whole}.{frac_text}" if frac_text else f"{sign}{whole}"


def describe_amount(plancks: int, symbol: str) -> str:
    """``"1.5 UNIT (1500000000000 plancks)"``: the form every message uses."""
    return f"{format_tokens(plancks)} {symbol} ({plancks} plancks)"
