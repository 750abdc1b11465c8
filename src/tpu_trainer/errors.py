"""The one exception hierarchy of tpu-trainer.

Library code raises these; only the CLI turns them into exit codes and messages.
Every error carries ``fix``: the next thing the user should do.
"""

from __future__ import annotations


class TpuTrainerError(Exception):
    """Root of every error the tool reports to a user."""

    exit_code = 1

    def __init__(self, message: str, *, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def __str__(self) -> str:
        return self.message


class InputError(TpuTrainerError):
    """A request, path or flag the tool cannot act on."""

    exit_code = 2


class ConfigError(TpuTrainerError):
    """A configuration file that is missing, unreadable or invalid."""

    exit_code = 3


class RecipeError(TpuTrainerError):
    """A recipe script the reader does not accept (names the file and line)."""

    exit_code = 4


class TopologyError(InputError):
    """A slice, device type or topology that does not exist."""
