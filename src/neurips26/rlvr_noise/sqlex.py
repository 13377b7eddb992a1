"""Text2SQL execution accuracy on a read-only sqlite connection, the SQL RL reward, and benign tagging.

Rules (spec §1, §4, §6):
  1. the connection is ``sqlite3.connect("file:<path>?mode=ro", uri=True)``: a write raises
     ``sqlite3.OperationalError`` (attempt to write a readonly database);
  2. a step budget: the progress handler runs every 1,000 VM instructions and aborts after 10^7;
  3. EX = 1 iff set(pred rows) == set(gold rows) (BIRD: order and duplicates ignored); any error -> 0;
  4. a prediction that is not one SELECT/WITH statement scores 0 (counted); as gold it raises;
  5. results are cached per (instance, SQL): RL repeats queries and gold results are reused;
  6. RL reward: +1 match, -1 malformed / missing ``<answer>...</answer>`` tags (ASSUMPTION: the tag
     name), 0 otherwise;
  7. benign: a noisy gold is execution-equivalent to the corrected one on the original DB and on K
     re-populated instances of the same schema (test-suite style).
"""

from __future__ import annotations

import inspect
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np

from neurips26.harness.parallel import map_tasks
from neurips26.harness.validation import check_choice, check_scalar

HANDLER_EVERY = 1_000
MAX_STEPS = 10_000_000
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_FIRST_WORD = re.compile(r"^\s*(\w+)")


def make_university_db(
    path: str | Path,
    seed: int = 0,
    n_students: int = 300,
    n_courses: int = 40,
    n_depts: int = 8,
    enroll_per_student: int = 4,
) -> Path:
    """Write the seeded "university" schema (departments, students, courses, enrollments) to ``path``."""
    for name, v in (
        ("n_students", n_students),
        ("n_courses", n_courses),
        ("n_depts", n_depts),
        ("enroll_per_student", enroll_per_student),
    ):
        check_scalar(v, name, int, min=1)
    path = Path(path)
    if path.exists():
        path.unlink()
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE departments(id INTEGER PRIMARY KEY, name TEXT, building TEXT, budget REAL);
        CREATE TABLE students(id INTEGER PRIMARY KEY, name TEXT, gender TEXT, age INTEGER, gpa REAL,
                              dept_id INTEGER REFERENCES departments(id));
        CREATE TABLE courses(id INTEGER PRIMARY KEY, dept_id INTEGER, title TEXT, credits INTEGER);
        CREATE TABLE enrollments(student_id INTEGER, course_id INTEGER, grade TEXT, year INTEGER);
    """)
    con.executemany(
        "INSERT INTO departments VALUES (?,?,?,?)",
        [
            (i + 1, f"Dept{i + 1}", f"B{int(rng.integers(1, 6))}", float(rng.integers(50, 500) * 1000))
            for i in range(n_depts)
        ],
    )
    con.executemany(
        "INSERT INTO students VALUES (?,?,?,?,?,?)",
        [
            (
                i + 1,
                f"S{i + 1}",
                "F" if rng.random() < 0.5 else "M",
                int(rng.integers(17, 30)),
                round(float(rng.uniform(1.0, 4.0)), 2),
                int(rng.integers(1, n_depts + 1)),
            )
            for i in range(n_students)
        ],
    )
    con.executemany(
        "INSERT INTO courses VALUES (?,?,?,?)",
        [
            (i + 1, int(rng.integers(1, n_depts + 1)), f"C{i + 1}", int(rng.integers(1, 6)))
            for i in range(n_courses)
        ],
    )
    con.executemany(
        "INSERT INTO enrollments VALUES (?,?,?,?)",
        [
            (
                s + 1,
                int(rng.integers(1, n_courses + 1)),
                "ABCDF"[int(rng.integers(5))],
                int(rng.integers(2020, 2025)),
            )
            for s in range(n_students)
            for _ in range(enroll_per_student)
        ],
    )
    con.commit()
    con.close()
    return path


def is_single_select(sql: str) -> bool:
    """True iff ``sql`` is one statement starting with SELECT or WITH (a trailing ``;`` allowed)."""
    if not isinstance(sql, str):
        return False
    body = sql.strip().rstrip(";").strip()
    m = _FIRST_WORD.match(body)
    return bool(m) and m.group(1).upper() in ("SELECT", "WITH") and ";" not in body


class SQLEvaluator:
    """Execution accuracy against one read-only sqlite database, with a step budget and a result cache."""

    def __init__(self, db_path: str | Path, max_steps: int = MAX_STEPS, handler_every: int = HANDLER_EVERY):
        self.db_path = Path(db_path)
        if not self.db_path.is_file():
            raise FileNotFoundError(f"db_path: no database file at {self.db_path}")
        self.max_steps = check_scalar(max_steps, "max_steps", int, min=1)
        self.handler_every = check_scalar(handler_every, "handler_every", int, min=1)
        self.conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, check_same_thread=False)
        self.cache: dict[str, frozenset] = {}
        self.stats: Counter = Counter()

    def _run(self, sql: str) -> frozenset:
        calls = [0]
        budget = self.max_steps // self.handler_every

        def handler() -> int:
            calls[0] += 1
            return 1 if calls[0] > budget else 0

        self.conn.set_progress_handler(handler, self.handler_every)
        try:
            return frozenset(self.conn.execute(sql).fetchall())
        finally:
            self.conn.set_progress_handler(None, self.handler_every)

    def execute(self, sql: str, cached: bool = True) -> frozenset:
        """The row set of ``sql`` (raises sqlite3 errors; a timeout raises OperationalError 'interrupted')."""
        if cached and sql in self.cache:
            return self.cache[sql]
        rows = self._run(sql)
        if cached:
            self.cache[sql] = rows
        return rows

    def gold_rows(self, gold: str) -> frozenset:
        if not is_single_select(gold):
            raise ValueError(f"gold must be one read-only SELECT/WITH statement, got {gold!r}")
        return self.execute(gold)

    def ex(self, pred: str, gold: str, cached: bool = True) -> int:
        """1 iff pred's row set equals gold's; a non-SELECT or failing prediction scores 0 (counted)."""
        g = self.gold_rows(gold)
        if not is_single_select(pred):
            self.stats["not_select"] += 1
            return 0
        try:
            return int(self.execute(pred, cached) == g)
        except sqlite3.Error as e:
            self.stats["timeout" if "interrupt" in str(e) else "error"] += 1
            return 0

    def close(self) -> None:
        self.conn.close()


def extract_answer(text: str) -> str | None:
    """The SQL inside the last ``<answer>...</answer>``; None when the tags are missing or empty."""
    found = _ANSWER.findall(text) if isinstance(text, str) else []
    return found[-1].strip() or None if found else None


def sql_reward(completion: str, gold: str, evaluator: SQLEvaluator) -> int:
    """+1 execution match, -1 missing/malformed answer tags, 0 otherwise."""
    sql = extract_answer(completion)
    if sql is None:
        return -1
    return 1 if evaluator.ex(sql, gold) else 0


def is_benign(noisy_gold: str, clean_gold: str, evaluators) -> bool:
    """True iff the two gold queries give equal row sets on every instance (original + K re-populated)."""
    if not evaluators:
        raise ValueError("evaluators must name at least one database instance")
    return all(ev.execute(noisy_gold) == ev.gold_rows(clean_gold) for ev in evaluators)


EXECUTORS = ("serial", "process", "ray", "nitrobox")


def _ex_shard(task: tuple) -> list[int]:
    """One worker's shard: one read-only connection, EX of each (pred, gold) pair."""
    db_path, pairs, max_steps = task
    ev = SQLEvaluator(db_path, max_steps=max_steps)
    try:
        return [ev.ex(p, g) for p, g in pairs]
    finally:
        ev.close()


def execution_accuracy(pairs, db_path: str | Path, executor: str = "process", workers: int | None = None,
                       max_steps: int = MAX_STEPS) -> list[int]:
    """EX of every (pred, gold) pair, sharded over ``workers`` (one read-only connection per shard).

    executor: ``"process"`` (default; the harness process pool), ``"serial"`` or ``"ray"``
    (``harness.parallel.map_tasks``), or ``"nitrobox"``: each shard runs in a sandbox of a
    ``neurips26.nitrobox`` ``SandboxPool`` (the database copied in, opened read-only there, same rules);
    it raises with the reason when nitrobox is not available (``sandboxexec.nitrobox_status()``).
    A bad gold raises, as in ``SQLEvaluator.ex``.
    """
    check_choice(executor, "executor", EXECUTORS)
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs must not be empty")
    if not Path(db_path).is_file():
        raise FileNotFoundError(f"db_path: no database file at {db_path}")
    n = min(workers or 2, len(pairs)) if executor != "serial" else 1
    if executor == "nitrobox":
        results = _nitrobox_shards(pairs, Path(db_path), n, max_steps)
    else:
        shards = [(str(db_path), pairs[i::n], max_steps) for i in range(n)]
        results = map_tasks(_ex_shard, shards, backend=executor, workers=n, progress=False)
    out = [0] * len(pairs)
    for i, res in enumerate(results):
        out[i::n] = res
    return out


_SANDBOX_SQL = """
import json, re, sqlite3
_FIRST_WORD = re.compile({first_word!r})
{is_single_select}
task = json.load(open("task.json"))
conn = sqlite3.connect("file:uni.db?mode=ro", uri=True)
budget, every = task["max_steps"] // task["every"], task["every"]
cache = {{}}
def run(sql):
    if sql not in cache:
        calls = [0]
        def handler():
            calls[0] += 1
            return 1 if calls[0] > budget else 0
        conn.set_progress_handler(handler, every)
        try:
            cache[sql] = frozenset(conn.execute(sql).fetchall())
        finally:
            conn.set_progress_handler(None, every)
    return cache[sql]
out = []
for pred, gold in task["pairs"]:
    g = run(gold)
    if not is_single_select(pred):
        out.append(0)
        continue
    try:
        out.append(int(run(pred) == g))
    except sqlite3.Error:
        out.append(0)
print("EX=" + json.dumps(out))
"""


def _nitrobox_shards(pairs: list, db_path: Path, n: int, max_steps: int) -> list[list[int]]:
    """The shards of ``execution_accuracy`` run in a nitrobox SandboxPool (same EX rules as SQLEvaluator)."""
    from neurips26.rlvr_noise.sandboxexec import run_python_jobs

    for _, gold in pairs:
        if not is_single_select(gold):
            raise ValueError(f"gold must be one read-only SELECT/WITH statement, got {gold!r}")
    script = _SANDBOX_SQL.format(first_word=_FIRST_WORD.pattern,
                                 is_single_select=inspect.getsource(is_single_select))
    db = db_path.read_bytes()
    tasks = [json.dumps({"pairs": pairs[i::n], "max_steps": max_steps, "every": HANDLER_EVERY})
             for i in range(n)]
    jobs = [(script, {"uni.db": db, "task.json": t}) for t in tasks]
    results = []
    for r in run_python_jobs(jobs, executor="nitrobox", workers=n, timeout=120.0):
        line = [x for x in r.output.splitlines() if x.startswith("EX=")]
        if r.exit_code != 0 or not line:
            raise RuntimeError(f"sandboxed SQL shard failed (exit {r.exit_code}): {r.output[-500:]}")
        results.append(json.loads(line[-1][3:]))
    return results
