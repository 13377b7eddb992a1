"""Issue 28 item 1: exec results a trainer can trust. Each reproduction line of the issue is a test
(each failed on 49a5fe8: forged status, shifted results, bleeding output, 137 for stateful exits,
a killed job that looked like a running one), plus separate stdout/stderr and streaming."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from neurips26.nitrobox import Sandbox
from neurips26.nitrobox.diagnostics import support_problem, wait_until

pytestmark = pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")


# ----------------------------------------------------------------- the status cannot be forged
def test_status_fd_is_not_inherited_and_results_do_not_shift(sb):
    r = sb.exec("echo 0 >&3; sleep 0.3; echo after; exit 7")
    assert r.exit_code == 7 and r.output.endswith("after\n")
    assert sb.exec("echo hello") == (0, "hello\n")        # not the previous command's result
    assert sb.exec("exit 4").exit_code == 4


def test_python_cannot_write_a_status(sb):
    r = sb.exec("python3 -c 'import os\ntry:\n os.write(3, b\"0\\n\")\nexcept OSError: pass\nraise SystemExit(1)'")
    assert r.exit_code == 1
    assert sb.exec("true").exit_code == 0


def test_no_fd_beyond_stdio_and_agent_unreachable_through_proc(sb):
    # a command sees only 0, 1, 2 (+ the fd ls itself opens)
    assert sb.exec("ls /proc/self/fd | wc -l").output.strip() == "4"
    # pid 1 (the agent) is non-dumpable and more privileged: its fds and memory are out of reach
    r = sb.exec("for f in /proc/1/fd/*; do echo 'x 0 -' > $f; done 2>/dev/null; "
                "cat /proc/1/environ >/dev/null 2>&1 && echo LEAK; exit 5")
    assert r.exit_code == 5 and "LEAK" not in r.output
    assert sb.exec("echo ok") == (0, "ok\n")


def test_exit_codes_are_the_kernels(sb):
    assert sb.exec("kill -9 $$").exit_code == 137
    assert sb.exec("kill -TERM $$").exit_code == 143
    assert sb.exec("exit 255").exit_code == 255


# ----------------------------------------------------------------- each exec's output is its own
def test_background_output_does_not_bleed_into_the_next_exec(sb):
    r = sb.exec("(sleep 0.5; echo LATE; echo survived > /tmp/survived) & echo started")
    assert r == (0, "started\n")
    time.sleep(0.9)
    assert sb.exec("echo clean") == (0, "clean\n")
    # the late writer was not killed by SIGPIPE: its output was discarded, it ran to the end
    assert wait_until(lambda: sb.exec("cat /tmp/survived 2>/dev/null").output == "survived\n", timeout=5)


def test_timeout_is_exact_and_no_wrapper_text_leaks(sb):
    t0 = time.monotonic()
    r = sb.exec("echo a; sleep 30", timeout=1)
    assert r.exit_code == 124 and r.timed_out and r.output == "a\n"
    assert time.monotonic() - t0 < 5
    assert "Killed" not in r.output and "timeout" not in r.output
    assert sb.exec("echo next") == (0, "next\n")


def test_killing_the_parent_leaks_no_wrapper_text(sb):
    # 49a5fe8: the persistent shell printed "bash: line 2: 2 Killed ( cd -- /workspace && exec timeout ..."
    # into the output and the exec returned 137; the parent is now the agent (init: SIGKILL ignored)
    r = sb.exec("kill -9 $PPID; echo alive", timeout=30)
    assert r == (0, "alive\n") and "Killed" not in r.output
    assert sb.exec("echo next") == (0, "next\n")


def test_large_stdin_does_not_deadlock(sb):
    data = b"x" * (3 << 20)
    r = sb.exec("wc -c", stdin=data)
    assert r == (0, f"{len(data)}\n")


# ----------------------------------------------------------------- stateful mode
def test_stateful_exit_code_exact_and_state_kept(state_root):
    with Sandbox(state_root=state_root) as sb:
        assert sb.exec("cd /tmp; export A=5; B=6; f() { echo fn$1; }", stateful=True).exit_code == 0
        assert sb.exec("exit 3", stateful=True).exit_code == 3
        assert sb.exec("pwd; echo $A $B; f 1", stateful=True) == (0, "/tmp\n5 6\nfn1\n")
        # stateful exports never leak into non-stateful execs
        assert sb.exec("echo \"[$A]\"; pwd") == (0, "[]\n/workspace\n")
        # an explicit workdir wins for that exec and is remembered
        assert sb.exec("pwd", stateful=True, workdir="/") == (0, "/\n")
        assert sb.exec("pwd", stateful=True) == (0, "/\n")


def test_cli_shell_exit_code(state_root):
    r = subprocess.run([sys.executable, "-m", "neurips26", "nitrobox", "shell", "--state-root", state_root,
                        "-c", "echo out; echo err >&2; exit 7"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 7, r.stderr
    assert r.stdout == "out\n" and r.stderr == "err\n"


# ----------------------------------------------------------------- background jobs
def test_killed_job_reports_its_signal(sb):
    job = sb.exec("sleep 100", background=True)
    assert job.poll() is None
    job.kill()
    assert job.wait(10) == 137
    assert job.poll() == 137
    for _ in range(10):  # killed right after the start, before the job has called setsid
        j = sb.exec("sleep 100", background=True)
        j.kill()
        assert j.wait(10) == 137


def test_job_code_cannot_be_forged_through_files(sb):
    job = sb.exec("echo 0 > /tmp/.nbx-jobs/$(ls /tmp/.nbx-jobs | head -1 | cut -d. -f1).rc; exit 9",
                  background=True)
    assert job.wait(10) == 9


def test_job_of_a_reset_tree_is_reported_killed(sb):
    job = sb.exec("sleep 100", background=True)
    sb.reset()
    assert job.poll() == 137 and job.wait(1) == 137


# ----------------------------------------------------------------- stdout/stderr and streaming
def test_separate_stdout_and_stderr(sb):
    r = sb.exec("echo o1; echo e1 >&2; echo o2", merge_stderr=False)
    assert (r.stdout, r.stderr) == ("o1\no2\n", "e1\n")
    assert sorted(r.output.splitlines()) == ["e1", "o1", "o2"]
    m = sb.exec("echo a; echo b >&2")                      # default: one pipe, exact order
    assert (m.output, m.stdout, m.stderr) == ("a\nb\n", "a\nb\n", "")


def test_streaming_callback_and_iterator_deliver_output_while_running(sb):
    seen = []
    r = sb.exec("echo first; sleep 0.6; echo second >&2", merge_stderr=False,
                on_output=lambda s, b: seen.append((s, b, time.monotonic())))
    assert [(s, b) for s, b, _ in seen] == [("stdout", b"first\n"), ("stderr", b"second\n")]
    assert seen[1][2] - seen[0][2] > 0.4                  # the first chunk came before the command ended
    assert r.exit_code == 0
    stream = sb.exec_stream("for i in 1 2 3; do echo $i; sleep 0.1; done; exit 2")
    chunks = b"".join(b for _, b in stream)
    assert chunks == b"1\n2\n3\n" and stream.result.exit_code == 2


def test_concurrent_exec_and_file_ops_from_threads(sb):
    errors = []

    def worker(i):
        try:
            for j in range(5):
                assert sb.exec(f"echo {i}-{j}") == (0, f"{i}-{j}\n")
                sb.write_file(f"/tmp/t{i}", str(j))
                assert sb.read_file(f"/tmp/t{i}") == str(j).encode()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors


def test_agent_death_is_reported_and_the_sandbox_recovers(sb):
    os.kill(sb.pid, 9)
    assert sb.exec("echo x").exit_code == 137
    sb.write_file("/workspace/k", "kept")
    assert sb.exec("cat /workspace/k") == (0, "kept")      # respawned over the same upper
