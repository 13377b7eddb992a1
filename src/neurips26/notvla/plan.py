"""The narrative action text: canonical grammar, ``format_plan``, a strict LL(1) ``parse_plan`` and the
grammar-constrained decoding mask.

    plan := step (" ; " step)* " ."
    step := VERB [" the " COLOR " " SHAPE " at (" U ", " V ") depth " D] " height " H [" close" | " open"]
    D    := INT " . " INT     (metres, then hundredths 0-99 without padding: 0.05 m -> "0 . 5")
    VERB := approach | grasp | lift | move to | place in | place on | release | retreat

Tokens are whitespace-separated words plus the punctuation ``( ) , ; .``; ``tokenize`` splits them, and
``format_plan`` writes the canonical spacing (``at (41, 57)``). One token automaton (``_Automaton``)
serves both the parser (each token either matches the state's expectation or raises ``PlanParseError``
with its index: one token of look-ahead, no backtracking) and the decoding mask (``allowed_next``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from neurips26.notvla.errors import PlanParseError
from neurips26.notvla.scene import COLOURS, KINDS

VERBS = ("approach", "grasp", "lift", "move to", "place in", "place on", "release", "retreat")
COLOUR_WORDS = tuple(COLOURS)
SHAPE_WORDS = KINDS
EVENTS = ("close", "open")
MAX_HEIGHT = 100
MAX_METRES = 9
_TOKEN = re.compile(r"[A-Za-z]+|\d+|[(),;.\-]")
_INT = re.compile(r"0|[1-9]\d*")


@dataclass(frozen=True)
class Step:
    """One plan step. ``colour``/``shape``/``u``/``v``/``depth_cm`` are None for anchor-free steps;
    ``depth_cm`` is the anchor's z-depth in centimetres (hundredths of a metre); ``height`` in cm."""

    verb: str
    height: int
    colour: str | None = None
    shape: str | None = None
    u: int | None = None
    v: int | None = None
    depth_cm: int | None = None
    event: str | None = None

    @property
    def anchored(self) -> bool:
        return self.colour is not None

    @property
    def depth(self) -> float | None:
        return None if self.depth_cm is None else self.depth_cm / 100


def tokenize(text: str) -> list[str]:
    if not isinstance(text, str):
        raise TypeError(f"plan text must be a str, got {type(text).__name__}")
    return _TOKEN.findall(text)


def format_step(s: Step) -> str:
    out = s.verb
    if s.anchored:
        out += (f" the {s.colour} {s.shape} at ({s.u}, {s.v}) depth {s.depth_cm // 100} . "
                f"{s.depth_cm % 100}")
    out += f" height {s.height}"
    if s.event:
        out += f" {s.event}"
    return out


def format_plan(steps: list[Step]) -> str:
    """The canonical text of a plan (``parse_plan(format_plan(p)) == p``)."""
    if not steps:
        raise ValueError("steps: a plan needs at least one step")
    return " ; ".join(format_step(s) for s in steps) + " ."


def plan_tokens(steps: list[Step]) -> list[str]:
    return tokenize(format_plan(steps))


# --- the token automaton: state -> what may come next
INT_RANGES = {"U": (0, 99), "V": (0, 99), "DM": (0, MAX_METRES), "DC": (0, 99), "H": (0, MAX_HEIGHT)}
_FIRST_VERB = {v.split()[0] for v in VERBS}


class _Automaton:
    """States of the step grammar; ``expect(state)`` -> allowed literal tokens or an INT class."""

    TABLE = {
        "verb": ("lit", tuple(sorted(_FIRST_VERB))),
        "move": ("lit", ("to",)),
        "place": ("lit", ("in", "on")),
        "after_verb": ("lit", ("the", "height")),
        "colour": ("lit", COLOUR_WORDS),
        "shape": ("lit", SHAPE_WORDS),
        "at": ("lit", ("at",)),
        "lp": ("lit", ("(",)),
        "U": ("int", "U"),
        "comma": ("lit", (",",)),
        "V": ("int", "V"),
        "rp": ("lit", (")",)),
        "depth": ("lit", ("depth",)),
        "DM": ("int", "DM"),
        "dot": ("lit", (".",)),
        "DC": ("int", "DC"),
        "height": ("lit", ("height",)),
        "H": ("int", "H"),
        "after_h": ("lit", ("close", "open", ";", ".")),
        "after_event": ("lit", (";", ".")),
        "end": ("lit", ()),
    }

    @staticmethod
    def advance(state: str, tok: str, depth: bool = True) -> str:
        if state == "rp" and not depth:  # the no-depth ablation's grammar: "at (U, V) height H"
            return "height"
        nxt = {"colour": "shape", "shape": "at", "at": "lp", "lp": "U", "U": "comma", "comma": "V", "V": "rp",
               "rp": "depth", "depth": "DM", "DM": "dot", "dot": "DC", "DC": "height", "height": "H",
               "H": "after_h", "move": "after_verb", "place": "after_verb"}
        if state == "verb":
            return tok if tok in ("move", "place") else "after_verb"
        if state == "after_verb":
            return "colour" if tok == "the" else "H"
        if state in ("after_h", "after_event"):
            return {"close": "after_event", "open": "after_event", ";": "verb", ".": "end"}[tok]
        return nxt[state]

    @classmethod
    def accepts(cls, state: str, tok: str) -> bool:
        kind, what = cls.TABLE[state]
        if kind == "lit":
            return tok in what
        lo, hi = INT_RANGES[what]
        return bool(_INT.fullmatch(tok)) and lo <= int(tok) <= hi

    @classmethod
    def describe(cls, state: str) -> str:
        kind, what = cls.TABLE[state]
        if kind == "lit":
            return "one of " + ", ".join(repr(w) for w in what) if what else "end of text"
        lo, hi = INT_RANGES[what]
        return f"an integer {lo}-{hi} without leading zeros"


def parse_plan(text: str) -> list[Step]:
    """Parse plan text strictly; any deviation raises ``PlanParseError`` naming the token index."""
    toks = tokenize(text)
    pos, n_tok = 0, 0
    for m in _TOKEN.finditer(text):   # characters the tokenizer skips (other than spaces) are errors
        gap = text[pos:m.start()]
        if gap.strip():
            bad = gap.strip()[0]
            raise PlanParseError(f"unexpected character {bad!r}", n_tok, bad)
        pos, n_tok = m.end(), n_tok + 1
    if text[pos:].strip():
        raise PlanParseError(f"unexpected character {text[pos:].strip()[0]!r}", n_tok, text[pos:].strip()[0])
    steps: list[Step] = []
    state, cur = "verb", {}
    for i, tok in enumerate(toks):
        if state == "end":
            raise PlanParseError("text after the final '.'", i, tok)
        if not _Automaton.accepts(state, tok):
            raise PlanParseError(f"expected {_Automaton.describe(state)}", i, tok)
        if state == "verb":
            cur = {"verb": tok}
        elif state in ("move", "place"):
            cur["verb"] += " " + tok
        elif state == "colour":
            cur["colour"] = tok
        elif state == "shape":
            cur["shape"] = tok
        elif state in ("U", "V", "H", "DM", "DC"):
            cur[state] = int(tok)
        elif state == "after_h" and tok in EVENTS:
            cur["event"] = tok
        if state in ("after_h", "after_event") and tok in (";", "."):
            steps.append(_make_step(cur))
        state = _Automaton.advance(state, tok)
    if state != "end":
        raise PlanParseError(f"incomplete plan: expected {_Automaton.describe(state)}", len(toks), None)
    return steps


def _make_step(cur: dict) -> Step:
    depth = None if "DM" not in cur else cur["DM"] * 100 + cur["DC"]
    return Step(cur["verb"], cur["H"], cur.get("colour"), cur.get("shape"), cur.get("U"), cur.get("V"),
                depth, cur.get("event"))


def grammar_state(prefix: list[str]) -> str:
    """The automaton state after a token prefix (``PlanParseError`` if the prefix is already invalid)."""
    state = "verb"
    for i, tok in enumerate(prefix):
        if state == "end" or not _Automaton.accepts(state, tok):
            raise PlanParseError(f"expected {_Automaton.describe(state)}", i, tok)
        state = _Automaton.advance(state, tok)
    return state


def allowed_next(prefix: list[str], vocab: list[str]) -> list[bool]:
    """Decoding mask over ``vocab``: True where ``prefix + [token]`` stays a valid plan prefix."""
    state = grammar_state(prefix)
    if state == "end":
        return [False] * len(vocab)
    return [_Automaton.accepts(state, w) for w in vocab]


def advance_state(state: str, tok: str, depth: bool = True) -> str:
    """One automaton step from ``state`` on an accepted token (``grammar_state`` one token at a time);
    ``depth=False``: the no-depth ablation's grammar (no ``depth D`` slot after the anchor pixel)."""
    return _Automaton.advance(state, tok, depth)


def strip_depth(tokens: list[str]) -> list[str]:
    """Plan tokens without the ``depth DM . DC`` slots (the no-depth ablation's training targets)."""
    out, i = [], 0
    while i < len(tokens):
        if tokens[i] == "depth" and i + 3 < len(tokens) and tokens[i + 2] == ".":
            i += 4
            continue
        out.append(tokens[i])
        i += 1
    return out


def state_mask(state: str, vocab: list[str]) -> list[bool]:
    """``allowed_next`` of any prefix whose automaton state is ``state`` (the mask depends on it only)."""
    if state == "end":
        return [False] * len(vocab)
    return [_Automaton.accepts(state, w) for w in vocab]


def is_complete(prefix: list[str]) -> bool:
    try:
        return grammar_state(prefix) == "end"
    except PlanParseError:
        return False
