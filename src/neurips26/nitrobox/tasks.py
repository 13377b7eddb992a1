"""Generated Python bug-fix tasks for the toy GRPO loop (spec "Reproduction at laptop scale").

Each task: ``solution.py`` with one function from a fixed family, ``test_solution.py`` (unittest, 5
cases computed from the reference), and K=4 candidate patches: the reference plus 3 single
mutations (off-by-one ``range`` bound, ``<``<->``<=``, ``+``<->``-``, wrong returned variable),
made with ``ast`` on the reference. The generator runs the 5 tests on every candidate and redraws
any mutant that passes, so exactly one candidate is correct; the starting file is one mutant;
candidate order is shuffled by ``random.Random(seed*1000+j)``.
"""

from __future__ import annotations

import ast
import copy
import random
from dataclasses import dataclass, field

K = 4
N_TESTS = 5
VERIFY_CMD = "cd /workspace && python3 -m unittest -q"

FAMILIES: dict[str, str] = {
    "sum_range": '''
def sum_range(a, b):
    total = 0
    for i in range(a, b + 1):
        total = total + i
    return total
''',
    "count_even": '''
def count_even(xs):
    count = 0
    for i in range(0, len(xs)):
        if xs[i] % 2 == 0:
            count = count + 1
    return count
''',
    "max_of": '''
def max_of(xs):
    best = xs[0]
    for i in range(1, len(xs)):
        if best < xs[i]:
            best = xs[i]
    return best
''',
    "reverse_words": '''
def reverse_words(s):
    words = s.split()
    out = []
    for i in range(len(words) - 1, -1, -1):
        out.append(words[i])
    result = " ".join(out)
    return result
''',
    "factorial": '''
def factorial(n):
    result = 1
    for i in range(1, n + 1):
        result = result * i
    return result
''',
    "is_palindrome": '''
def is_palindrome(s):
    n = len(s)
    ok = True
    for i in range(0, n // 2):
        if s[i] != s[n - 1 - i]:
            ok = False
    return ok
''',
    "clamp": '''
def clamp(x, lo, hi):
    result = x
    if x < lo:
        result = lo
    if x > hi:
        result = hi
    return result
''',
    "fib": '''
def fib(n):
    a = 0
    b = 1
    for i in range(0, n):
        a, b = b, a + b
    return a
''',
    "gcd": '''
def gcd(a, b):
    x = abs(a)
    y = abs(b)
    for _ in range(0, 200):
        if y < 1:
            break
        x, y = y, x % y
    return x
''',
    "dedupe": '''
def dedupe(xs):
    seen = set()
    out = []
    for i in range(0, len(xs)):
        if xs[i] not in seen:
            seen.add(xs[i])
            out.append(xs[i])
    return out
''',
}


def _inputs(family: str, rng: random.Random) -> tuple:
    r = rng
    if family == "sum_range":
        a = r.randint(-5, 10)
        return (a, a + r.randint(1, 12))
    if family in ("count_even", "max_of"):
        return ([r.randint(-20, 20) for _ in range(r.randint(2, 8))],)
    if family == "reverse_words":
        words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta"]
        return (" ".join(r.choice(words) for _ in range(r.randint(2, 5))),)
    if family == "factorial":
        return (r.randint(2, 9),)
    if family == "is_palindrome":
        half = "".join(r.choice("abc") for _ in range(r.randint(1, 4)))
        if r.random() < 0.5:
            return (half + half[::-1],)
        return (half + "x" + half,) if r.random() < 0.5 else (half + "ab",)
    if family == "clamp":
        lo = r.randint(-5, 5)
        return (r.randint(-12, 12), lo, lo + r.randint(0, 6))
    if family == "fib":
        return (r.randint(2, 15),)
    if family == "gcd":
        g = r.randint(1, 6)
        return (g * r.randint(1, 20), g * r.randint(1, 20))
    if family == "dedupe":
        return ([r.randint(0, 5) for _ in range(r.randint(3, 9))],)
    raise KeyError(family)


# --------------------------------------------------------------------------- mutation operators
class _Sites(ast.NodeVisitor):
    """Enumerate mutation sites as (kind, index) in a deterministic traversal order."""

    def __init__(self) -> None:
        self.sites: list[tuple[str, int]] = []
        self.n = 0
        self.names: set[str] = set()

    def generic_visit(self, node):
        idx = self.n
        self.n += 1
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "range":
            stop = 1 if len(node.args) >= 2 else 0
            self.sites += [("range+", idx), ("range-", idx)] if stop < len(node.args) else []
            if len(node.args) >= 2:
                self.sites.append(("rangestart+", idx))
        if isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            self.sites.append(("cmp", idx))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            self.sites.append(("addsub", idx))
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
            self.sites.append(("return", idx))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            self.names.add(node.id)
        if isinstance(node, ast.arg):
            self.names.add(node.arg)
        super().generic_visit(node)


class _Apply(ast.NodeTransformer):
    def __init__(self, kind: str, target: int, alt_name: str | None) -> None:
        self.kind, self.target, self.alt = kind, target, alt_name
        self.n = 0

    def generic_visit(self, node):
        idx = self.n
        self.n += 1
        node = super().generic_visit(node)
        if idx != self.target:
            return node
        one = ast.Constant(1)
        if self.kind in ("range+", "range-"):
            stop = 1 if len(node.args) >= 2 else 0
            op = ast.Add() if self.kind == "range+" else ast.Sub()
            node.args[stop] = ast.BinOp(node.args[stop], op, one)
        elif self.kind == "rangestart+":
            node.args[0] = ast.BinOp(node.args[0], ast.Add(), one)
        elif self.kind == "cmp":
            swap = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
            node.ops[0] = swap[type(node.ops[0])]()
        elif self.kind == "addsub":
            node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        elif self.kind == "return":
            node.value = ast.Name(self.alt, ast.Load())
        return node


def mutants(source: str) -> list[str]:
    """Every single mutation of ``source`` (deterministic order, duplicates removed)."""
    tree = ast.parse(source)
    sites = _Sites()
    sites.visit(tree)
    out: list[str] = []
    ret_name = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
            ret_name = node.value.id
    for kind, idx in sites.sites:
        alts = [None]
        if kind == "return":
            alts = sorted(n for n in sites.names if n not in (ret_name, "_"))
        for alt in alts:
            t = _Apply(kind, idx, alt).visit(copy.deepcopy(tree))
            ast.fix_missing_locations(t)
            src = ast.unparse(t) + "\n"
            if src not in out and src != ast.unparse(tree) + "\n":
                out.append(src)
    return out


def passes(source: str, family: str, cases: list) -> bool:
    """Run the 5 cases on a candidate in-process (our own generated code, bounded loops)."""
    ns: dict = {}
    try:
        exec(compile(source, "<candidate>", "exec"), ns)  # noqa: S102 - generated reference/mutant
        fn = ns[family]
        return all(fn(*copy.deepcopy(args)) == want for args, want in cases)
    except Exception:  # noqa: BLE001 - a crashing mutant fails its tests
        return False


def _test_file(family: str, cases: list) -> str:
    lines = ["import unittest", f"from solution import {family}", "", "",
             "class TestSolution(unittest.TestCase):"]
    for k, (args, want) in enumerate(cases):
        lines.append(f"    def test_{k}(self):")
        lines.append(f"        self.assertEqual({family}(*{args!r}), {want!r})")
        lines.append("")
    return "\n".join(lines)


@dataclass
class Task:
    """One bug-fix task: files to put in /workspace, K candidates, which one is correct."""

    index: int
    family: str
    files: dict = field(default_factory=dict)
    candidates: list = field(default_factory=list)
    correct: int = 0
    cases: list = field(default_factory=list)

    def label(self, a: int) -> int:
        """Oracle reward of candidate ``a``."""
        return int(a == self.correct)


def generate(n: int, seed: int) -> list[Task]:
    """``n`` tasks, deterministic in ``seed``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    fams = sorted(FAMILIES)
    out = []
    for j in range(n):
        rng = random.Random(seed * 1000 + j)
        family = fams[rng.randrange(len(fams))]
        ref = ast.unparse(ast.parse(FAMILIES[family])) + "\n"
        ns: dict = {}
        exec(compile(ref, "<reference>", "exec"), ns)  # noqa: S102
        pool = mutants(ref)
        rng.shuffle(pool)
        for _attempt in range(50):  # redraw the test inputs until 3 mutants fail them
            cases = []
            for _ in range(N_TESTS):
                args = _inputs(family, rng)
                cases.append((args, ns[family](*copy.deepcopy(args))))
            bad = []
            for m in pool:  # "redraw any mutant that passes"
                if not passes(m, family, cases):
                    bad.append(m)
                if len(bad) == K - 1:
                    break
            if len(bad) == K - 1:
                break
        else:
            raise RuntimeError(f"family {family!r}: fewer than {K - 1} failing mutants")
        cands = [ref] + bad
        order = list(range(K))
        random.Random(seed * 1000 + j).shuffle(order)
        candidates = [cands[i] for i in order]
        correct = order.index(0)
        start = bad[0]
        out.append(Task(j, family, {"solution.py": start, "test_solution.py": _test_file(family, cases)},
                        candidates, correct, cases))
    return out
