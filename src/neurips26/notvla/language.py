"""Instruction words: colours, shapes and their synonyms, and the instruction parser used for grounding.

Synonyms and the colours purple/orange appear in VL pre-training but never in robot data (semantic OOD).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from neurips26.notvla.scene import COLOURS, KINDS

COLOUR_SYNONYMS = {"crimson": "red", "scarlet": "red", "emerald": "green", "navy": "blue", "azure": "blue",
                   "golden": "yellow", "violet": "purple", "amber": "orange"}
SHAPE_SYNONYMS = {"block": "cube", "box": "cube", "can": "cylinder", "tube": "cylinder", "basin": "bowl",
                  "dish": "plate", "tray": "plate"}
HELD_OUT_COLOURS = ("purple", "orange")


class UnknownWordError(ValueError):
    """A colour or shape word the vocabulary does not know."""


@dataclass(frozen=True)
class Reference:
    colour: str
    shape: str


@dataclass(frozen=True)
class ParsedInstruction:
    template: str
    obj: Reference
    target: Reference | None


def canonical_colour(w: str) -> str:
    w = COLOUR_SYNONYMS.get(w, w)
    if w not in COLOURS:
        raise UnknownWordError(f"unknown colour word {w!r}")
    return w


def canonical_shape(w: str) -> str:
    w = SHAPE_SYNONYMS.get(w, w)
    if w not in KINDS:
        raise UnknownWordError(f"unknown shape word {w!r}")
    return w


_PATTERNS = (("pick", re.compile(r"^pick up the (\w+) (\w+)$")),
             ("bowl", re.compile(r"^put the (\w+) (\w+) in the (\w+) (\w+)$")),
             ("plate", re.compile(r"^put the (\w+) (\w+) on the (\w+) (\w+)$")),
             ("stack", re.compile(r"^stack the (\w+) (\w+) on the (\w+) (\w+)$")))


def parse_instruction(text: str) -> ParsedInstruction:
    """Template and object references of an instruction (synonyms resolved); ``ValueError`` otherwise."""
    if not isinstance(text, str):
        raise TypeError(f"instruction must be a str, got {type(text).__name__}")
    t = " ".join(text.lower().split())
    for template, pat in _PATTERNS:
        m = pat.match(t)
        if m:
            g = m.groups()
            obj = Reference(canonical_colour(g[0]), canonical_shape(g[1]))
            target = Reference(canonical_colour(g[2]), canonical_shape(g[3])) if len(g) == 4 else None
            if (template == "bowl" and target.shape != "bowl"
                    or template == "plate" and target.shape == "bowl"):
                template = {"bowl": "plate", "plate": "bowl"}[template] if target.shape in ("bowl", "plate") \
                    else "stack"
            return ParsedInstruction(template, obj, target)
    raise ValueError(f"instruction {text!r} matches no task template")


def with_synonyms(instruction: str, rng) -> str:
    """The same instruction with every colour/shape word replaced by a synonym where one exists."""
    inv_c: dict[str, list[str]] = {}
    for k, v in COLOUR_SYNONYMS.items():
        inv_c.setdefault(v, []).append(k)
    inv_s: dict[str, list[str]] = {}
    for k, v in SHAPE_SYNONYMS.items():
        inv_s.setdefault(v, []).append(k)
    out = []
    for w in instruction.split():
        pool = inv_c.get(w) or inv_s.get(w)
        out.append(pool[int(rng.integers(len(pool)))] if pool else w)
    return " ".join(out)
