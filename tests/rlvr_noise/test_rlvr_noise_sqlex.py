"""Acceptance check 11: SQL EX semantics, read-only connection, step budget, benign tagging."""

import sqlite3

import pytest

from neurips26.rlvr_noise.sqlex import (SQLEvaluator, execution_accuracy, extract_answer, is_benign,
                                        is_single_select, make_university_db, sql_reward)


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    d = tmp_path_factory.mktemp("uni")
    return [SQLEvaluator(make_university_db(d / f"u{k}.db", seed=k)) for k in range(6)]


def test_ex_ignores_order_and_duplicates(dbs):
    ev = dbs[0]
    gold = "SELECT gender FROM students WHERE age > 20"
    assert ev.ex("SELECT DISTINCT gender FROM students WHERE age > 20 ORDER BY gender DESC", gold) == 1
    assert ev.ex("SELECT gender FROM students WHERE age > 40", gold) == 0


def test_read_only_and_non_select(dbs):
    ev = dbs[0]
    with pytest.raises(sqlite3.OperationalError):
        ev.execute("DELETE FROM students", cached=False)
    assert ev.ex("DELETE FROM students", "SELECT 1") == 0 and ev.stats["not_select"] >= 1
    assert ev.ex("SELECT 1; DROP TABLE students", "SELECT 1") == 0
    with pytest.raises(ValueError, match="gold"):
        ev.ex("SELECT 1", "UPDATE students SET age = 1")
    assert ev.ex("SELECT nonsense FROM nowhere", "SELECT 1") == 0 and ev.stats["error"] >= 1
    assert ev.execute("SELECT COUNT(*) FROM students") == frozenset({(300,)})


def test_runaway_query_times_out(dbs):
    ev = dbs[0]
    runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT MAX(x) FROM c"
    assert ev.ex(runaway, "SELECT 1") == 0 and ev.stats["timeout"] == 1


def test_missing_db_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="db_path"):
        SQLEvaluator(tmp_path / "none.db")


def test_rl_reward(dbs):
    gold = "SELECT COUNT(*) FROM students WHERE gender = 'F'"
    assert sql_reward(f"<answer>{gold}</answer>", gold, dbs[0]) == 1
    assert sql_reward("<answer>SELECT COUNT(*) FROM students</answer>", gold, dbs[0]) == 0
    assert sql_reward("SELECT 1", gold, dbs[0]) == -1 and extract_answer("<answer> </answer>") is None


def test_benign_tagging_on_k_instances(dbs):
    ev0 = dbs[0]
    values = {r[0] for r in ev0.execute("SELECT DISTINCT gpa FROM students")}
    others = set().union(*({r[0] for r in ev.execute("SELECT DISTINCT gpa FROM students")} for ev in dbs[1:]))
    v = next(x for x in sorted(others) if x not in values and 1.5 < x < 3.5)
    a, b = f"SELECT COUNT(*) FROM students WHERE gpa > {v}", f"SELECT COUNT(*) FROM students WHERE gpa >= {v}"
    assert is_benign(a, b, dbs[:1])                 # agree on the original DB ...
    assert not is_benign(a, b, dbs)                 # ... told apart on the re-populated instances
    assert is_benign("SELECT COUNT(*) FROM students", "SELECT COUNT(id) FROM students", dbs)


def test_is_single_select():
    assert is_single_select("  with x as (select 1) select * from x;")
    assert not is_single_select("PRAGMA table_info(students)") and not is_single_select(None)


def test_process_pool_equals_serial(dbs):
    db = dbs[0].db_path
    gold = "SELECT COUNT(*) FROM students WHERE age > 20"
    pairs = [(f"SELECT COUNT(*) FROM students WHERE age > {a}", gold) for a in range(17, 25)]
    pairs.append(("DROP TABLE students", "SELECT 1"))
    serial = execution_accuracy(pairs, db, executor="serial")
    assert serial == [int(a == 20) for a in range(17, 25)] + [0]
    assert execution_accuracy(pairs, db, executor="process", workers=2) == serial
    with pytest.raises(ValueError, match="executor"):
        execution_accuracy(pairs, db, executor="docker")


def test_nitrobox_executor_equals_serial(dbs):
    from neurips26.rlvr_noise.sandboxexec import nitrobox_status

    ok, why = nitrobox_status()
    if not ok:
        pytest.skip(f"nitrobox sandbox not available: {why}")
    db = dbs[0].db_path
    gold = "SELECT COUNT(*) FROM students WHERE age > 20"
    pairs = [(f"SELECT COUNT(*) FROM students WHERE age > {a}", gold) for a in range(17, 25)]
    pairs += [("DROP TABLE students", "SELECT 1"), ("SELECT * FROM nope", "SELECT 1"),
              ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c", "SELECT 1")]
    serial = execution_accuracy(pairs, db, executor="serial", max_steps=100_000)
    assert serial == [int(a == 20) for a in range(17, 25)] + [0, 0, 0]
    assert execution_accuracy(pairs, db, executor="nitrobox", workers=2, max_steps=100_000) == serial
    with pytest.raises(ValueError, match="gold"):
        execution_accuracy([("SELECT 1", "DELETE FROM students")], db, executor="nitrobox")
