"""Errors and result records shared by the codec, the detokenizer and the execution loop (a leaf module)."""

from __future__ import annotations

from dataclasses import dataclass


class PlanParseError(ValueError):
    """Plan text that is not in the grammar; ``position`` is the index of the offending token."""

    def __init__(self, message: str, position: int, token: str | None):
        super().__init__(f"token {position} ({token!r}): {message}" if token is not None
                         else f"token {position} (end of text): {message}")
        self.position = position
        self.token = token


class DepthUnavailableError(ValueError):
    """``depth_source="sensor"`` and the sensor has no valid depth at the anchor pixel or around it."""


@dataclass(frozen=True)
class Refusal:
    """The typed "refuse" result: the instruction names something the scene does not contain."""

    reason: str
    missing: str
