"""The one error type every concern raises for bad input or a failed operation.

The CLI turns it into a single line on stderr and a non-zero exit; the message must already say
what was wrong (the field, the value) and what to do about it.
"""

from __future__ import annotations


class OpsError(Exception):
    """A failure the user can act on. ``exit_code`` is what the CLI exits with."""

    exit_code: int = 1

    def __init__(
        self, message: str, *, hint: str | None = None, exit_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class InputError(OpsError):
    """The input (a file, an argument, a definition) is invalid. Exit status 2, as for usage."""

    exit_code = 2
