"""The no-anchor ablation's action text: absolute end-effector waypoints in centimetres, no visual anchor.

    plan := step (" ; " step)* " ."
    step := VERB " x " X " y " ["- "] Y " z " Z [" close" | " open"]      X, Y, Z: integers 0-100 (cm)

Same verbs and gripper events as the narrative grammar; the waypoint is ``(x, y, z) / 100`` in the world
frame, so the model must regress metric positions from the image instead of pointing at an object and
reading its depth. ``XYZDetokenizer`` renders these plans with the same spline, timing and gripper rules
as ``Detokenizer`` (only the grounding differs). Training targets come from the oracle's anchored plans,
grounded with their analytic depths (``to_xyz``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from neurips26.notvla.detokenizer import Detokenizer, Waypoints
from neurips26.notvla.errors import PlanParseError
from neurips26.notvla.plan import EVENTS, VERBS, Step, tokenize

MAX_CM = 100
_INT = re.compile(r"0|[1-9]\d*")
_FIRST = tuple(sorted({v.split()[0] for v in VERBS}))


@dataclass(frozen=True)
class XYZStep:
    verb: str
    x: int
    y: int
    z: int
    event: str | None = None

    @property
    def anchored(self) -> bool:
        return False


def format_xyz(steps: list[XYZStep]) -> str:
    if not steps:
        raise ValueError("steps: a plan needs at least one step")
    parts = []
    for s in steps:
        y = f"- {-s.y}" if s.y < 0 else str(s.y)
        parts.append(f"{s.verb} x {s.x} y {y} z {s.z}" + (f" {s.event}" if s.event else ""))
    return " ; ".join(parts) + " ."


# --- automaton: state -> accepted tokens; shared by the parser and the decoding mask
def _accepts(state: str, tok: str) -> bool:
    if state in ("X", "Y", "Z"):
        return bool(_INT.fullmatch(tok)) and int(tok) <= MAX_CM
    lits = {
        "verb": _FIRST, "move": ("to",), "place": ("in", "on"), "x": ("x",), "y": ("y",), "z": ("z",),
        "after_z": ("close", "open", ";", "."), "after_event": (";", "."), "end": (),
    }
    if state == "ysign":
        return tok == "-" or _accepts("Y", tok)
    return tok in lits[state]


def advance_xyz(state: str, tok: str) -> str:
    if state == "verb":
        return tok if tok in ("move", "place") else "x"
    if state == "ysign":
        return "Y" if tok == "-" else "z"
    if state in ("after_z", "after_event"):
        return {"close": "after_event", "open": "after_event", ";": "verb", ".": "end"}[tok]
    return {"move": "x", "place": "x", "x": "X", "X": "y", "y": "ysign", "Y": "z", "z": "Z",
            "Z": "after_z"}[state]


def xyz_state_mask(state: str, vocab: list[str]) -> list[bool]:
    return [False] * len(vocab) if state == "end" else [_accepts(state, w) for w in vocab]


def parse_xyz(text: str) -> list[XYZStep]:
    """Strict parse; ``PlanParseError`` with the token index on any deviation."""
    toks = tokenize(text)
    state, cur, steps, neg = "verb", {}, [], False
    for i, tok in enumerate(toks):
        if state == "end":
            raise PlanParseError("text after the final '.'", i, tok)
        if not _accepts(state, tok):
            raise PlanParseError(f"unexpected token in state {state!r}", i, tok)
        if state == "verb":
            cur, neg = {"verb": tok}, False
        elif state in ("move", "place"):
            cur["verb"] += " " + tok
        elif state == "X":
            cur["x"] = int(tok)
        elif state == "ysign":
            if tok == "-":
                neg = True
            else:
                cur["y"] = int(tok)
        elif state == "Y":
            cur["y"] = -int(tok) if neg else int(tok)
        elif state == "Z":
            cur["z"] = int(tok)
        elif state == "after_z" and tok in EVENTS:
            cur["event"] = tok
        if state in ("after_z", "after_event") and tok in (";", "."):
            steps.append(XYZStep(cur["verb"], cur["x"], cur["y"], cur["z"], cur.get("event")))
        state = advance_xyz(state, tok)
    if state != "end":
        raise PlanParseError(f"incomplete plan (state {state!r})", len(toks), None)
    return steps


def to_xyz(steps: list[Step], camera, start, anchor_z: float | None = None) -> list[XYZStep]:
    """An anchored plan -> absolute waypoints in whole cm (grounded with the plan's own depths)."""
    wp = Detokenizer(depth_source="predicted").ground(steps, camera, start, anchor_z=anchor_z)
    out = []
    for s, p in zip(steps, wp.positions):
        x, y, z = (int(round(100 * c)) for c in p)
        out.append(XYZStep(s.verb, min(max(x, 0), MAX_CM), min(max(y, -MAX_CM), MAX_CM), min(max(z, 0), MAX_CM),
                           s.event))
    return out


class XYZDetokenizer(Detokenizer):
    """``Detokenizer`` for the no-anchor text: waypoints are the written positions (no camera, no depth)."""

    def parse(self, text: str):
        return parse_xyz(text)

    def ground(self, steps, camera=None, start=None, depth_image=None, anchor_z=None) -> Waypoints:
        pos = np.array([[s.x, s.y, s.z] for s in steps], float).reshape(-1, 3) / 100
        return Waypoints(pos, [s.event for s in steps], [0.0] * len(steps))
