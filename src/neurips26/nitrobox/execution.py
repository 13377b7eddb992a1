"""The client side of the exec protocol (see ``agent.py`` for the agent's side).

``ExecClient`` is mixed into ``Sandbox``: it needs ``self._proc.ctl`` (the agent's socket),
``self._life`` (lifecycle lock), ``self._generation``, ``self._shell_dead``, ``self._respawn_keep()``
and ``self.config``.
"""

from __future__ import annotations

import marshal
import os
import secrets
import selectors
import shlex
import signal
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from neurips26.nitrobox.agent import TIMEOUT_CODE
from neurips26.nitrobox.config import check_env, check_path_text, check_timeout
from neurips26.nitrobox.errors import SandboxError
from neurips26.nitrobox.procfs import wait_fd


@dataclass
class ExecResult:
    """Result of ``Sandbox.exec``.

    ``output``: stdout and stderr in order (one pipe by default; with ``merge_stderr=False`` the two
    pipes interleaved in arrival order), ``stdout``/``stderr``: the streams (with the default merged
    pipe, ``stdout`` is ``output`` and ``stderr`` is empty). ``exit_code`` is the kernel's
    (``waitpid``): the code, ``128 + signal``, or 124 with ``timed_out``.
    """

    exit_code: int
    output: str
    output_bytes: bytes = field(default=b"", repr=False)
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    stdout_bytes: bytes = field(default=b"", repr=False)
    stderr_bytes: bytes = field(default=b"", repr=False)

    @property
    def stdout(self) -> str:
        return self.stdout_bytes.decode(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_bytes.decode(errors="replace")

    def __iter__(self):  # ``code, out = sb.exec(...)`` and ``== (0, "hi\n")`` comparisons
        return iter((self.exit_code, self.output))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return (self.exit_code, self.output) == other
        if isinstance(other, ExecResult):
            return (self.exit_code, self.output_bytes, self.timed_out, self.truncated) == (
                other.exit_code, other.output_bytes, other.timed_out, other.truncated)
        return NotImplemented


class ExecStream:
    """Iterator over ``(stream, bytes)`` chunks of a running exec (``"stdout"``/``"stderr"``);
    ``result`` holds the ``ExecResult`` once the iteration has ended."""

    def __init__(self, gen):
        self._gen = gen
        self.result: ExecResult | None = None
        self.pid: int | None = None

    def _set_pid(self, pid: int) -> None:
        self.pid = pid

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._gen)
        except StopIteration as stop:
            self.result = stop.value
            raise

    def close(self) -> None:
        self._gen.close()


class BackgroundJob:
    """A command started with ``exec(..., background=True)``: its own session, output to a log file.

    The exit code comes from the sandbox's agent (``waitpid``), never from a file the job could write.
    """

    def __init__(self, sandbox: "ExecClient", job_id: str, pid: int, generation: int):
        self.sandbox, self.id, self.pid = sandbox, job_id, pid
        self._gen = generation
        self.log_path = f"{_JOBS_DIR}/{job_id}.log"

    def _ask(self, op: dict, timeout: float | None) -> str:
        sb = self.sandbox
        if sb.closed or sb._generation != self._gen:
            return str(_KILLED)  # the tree it ran in was killed (reset/restore/delete)
        reply = sb._agent_request(op, timeout)
        if reply is None:
            return "timeout"
        return reply

    def poll(self) -> int | None:
        """Exit code, or ``None`` while it runs."""
        r = self._ask({"op": "wait", "job": self.id, "block": False}, 10.0)
        return _job_code(r)

    def wait(self, timeout: float = 30.0) -> int | None:
        """Block until the job ends (its exit code) or ``timeout`` s pass (``None``)."""
        timeout = check_timeout(timeout, "timeout")
        return _job_code(self._ask({"op": "wait", "job": self.id, "block": True}, timeout))

    def output(self) -> str:
        try:
            return self.sandbox.read_file(self.log_path).decode(errors="replace")
        except FileNotFoundError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the job's process group and session; ``wait`` then returns ``128 + sig``."""
        self._ask({"op": "signal", "job": self.id, "sig": int(sig)}, 10.0)


_KILLED = 128 + signal.SIGKILL


_JOBS_DIR = "/tmp/.nbx-jobs"


def _job_code(reply: str) -> int | None:
    if reply in ("running", "timeout"):
        return None
    if reply in ("unknown", "gone"):
        return _KILLED
    return int(reply)


class _AgentGone(Exception):
    """The sandbox's agent is not reachable (it died, or the tree is being replaced)."""


class _Capture:
    """Head and tail of a stream, ``cap`` bytes in all (the middle of a flood is dropped)."""

    __slots__ = ("half", "head", "tail", "total")

    def __init__(self, cap: int):
        self.half = cap // 2
        self.head, self.tail = bytearray(), bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        if len(self.head) < self.half:
            take = self.half - len(self.head)
            self.head += data[:take]
            data = data[take:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[:len(self.tail) - self.half]

    def value(self) -> bytes:
        return bytes(self.head + self.tail)


def _read_line(fd: int, deadline: float | None) -> str | None:
    """One reply line from a pipe ('' on EOF, None when ``deadline`` passes first)."""
    buf = b""
    while b"\n" not in buf:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            return None
        if not wait_fd(fd, 3600.0 if wait is None else min(wait, 3600.0)):
            continue  # the deadline check above ends the wait
        data = os.read(fd, 4096)
        if not data:
            break
        buf += data
    return buf.split(b"\n", 1)[0].decode(errors="replace")



class ExecClient:
    """``exec``, ``exec_stream`` and background jobs over the agent's socket."""

    def _send(self, op: dict, fds: list[int]) -> None:
        """One request to the agent (``marshal`` dict + fds); ``_AgentGone`` if it is not there."""
        ctl = self._proc.ctl
        if ctl is None:
            raise _AgentGone()
        try:
            with self._send_lock:
                socket.send_fds(ctl, [marshal.dumps(op)], fds)
        except OSError:
            raise _AgentGone() from None

    def _agent_request(self, op: dict, timeout: float | None) -> str | None:
        """Send ``op`` with a fresh reply pipe; the reply text after the nonce, or None on timeout."""
        nonce = secrets.token_hex(8)
        op = dict(op, n=nonce)
        r, w = os.pipe2(os.O_CLOEXEC)
        try:
            try:
                self._send(op, [w])
            except _AgentGone:
                return "gone"
            finally:
                os.close(w)
            line = _read_line(r, None if timeout is None else time.monotonic() + timeout)
        finally:
            os.close(r)
        if line is None:
            return None
        got, _, rest = line.partition(" ")
        if got != nonce:  # EOF (the agent died) or a reply that is not ours
            return "gone"
        return rest

    def _exec_gen(self, cmd: str, timeout: float | None, workdir: str | None, env: dict,
                  stdin: bytes | None, stateful: bool, merge: bool, user: tuple | None = None, on_pid=None):
        """The exec protocol as a generator of ``(stream, bytes)``; returns the ``ExecResult``.

        1. fresh pipes: status (agent -> client only), stdout, stderr (unless merged), stdin;
        2. one ``exec`` request with a per-exec nonce; the write ends go to the agent, ours are closed;
        3. read both streams (epoll) and feed stdin until the status line arrives, check its nonce;
        4. drain what the command wrote before it exited, then hand our read ends to the agent to
           discard (late writers of background processes neither block nor reach a later exec).
        """
        cap = self.config.max_output_bytes
        # no exec-wide lock: execs of one sandbox run concurrently (each has its own pipes); the
        # lifecycle lock covers only the hand-over of the request, so a reset never sees half a send
        with self._life:
            self._check_open()
            if self._shell_dead:
                self._respawn_keep()
            nonce = secrets.token_hex(8)
            st_r, st_w = os.pipe2(os.O_CLOEXEC)
            out_r, out_w = os.pipe2(os.O_CLOEXEC)
            err_r = err_w = in_r = in_w = None
            if not merge:
                err_r, err_w = os.pipe2(os.O_CLOEXEC)
            if stdin is not None:
                in_r, in_w = os.pipe2(os.O_CLOEXEC)
            wd = workdir or self.config.working_dir
            op = {"op": "exec", "n": nonce, "cmd": cmd, "env": env, "cwd": self.config.working_dir if stateful
                  else wd, "wd": workdir if stateful else None, "timeout": timeout, "merge": merge,
                  "stdin": stdin is not None, "state": stateful}
            if user is not None:
                op["uid"], op["gid"] = user
            fds = [st_w, out_w] + ([err_w] if err_w is not None else []) + ([in_r] if in_r is not None else [])
            gen = self._generation  # an EOF from a tree that a reset has since replaced is not "dead"
            t0 = time.monotonic()
            try:
                self._send(op, fds)
            except _AgentGone:
                self._shell_dead = True
                for fd in (st_r, out_r, err_r, in_w):
                    if fd is not None:
                        os.close(fd)
                return ExecResult(_KILLED, "", b"", 0.0, False, False)
            finally:
                for fd in fds:
                    os.close(fd)
        caps = {"stdout": _Capture(cap), "stderr": _Capture(cap)}
        merged = _Capture(cap)
        streams = {out_r: "stdout"}
        if err_r is not None:
            streams[err_r] = "stderr"
        open_streams = dict(streams)
        for fd in streams:
            os.set_blocking(fd, False)
        view = memoryview(stdin) if stdin is not None else None
        if in_w is not None:
            os.set_blocking(in_w, False)
        status = bytearray()
        line = None
        sel = selectors.DefaultSelector()
        # client-side backstop only (the agent enforces ``timeout``): a stuck agent is replaced
        backstop = None if timeout is None else t0 + timeout + 10.0
        try:
            for fd in streams:
                sel.register(fd, selectors.EVENT_READ, "out")
            sel.register(st_r, selectors.EVENT_READ, "st")
            if in_w is not None:
                if view:
                    sel.register(in_w, selectors.EVENT_WRITE, "in")
                else:
                    os.close(in_w)
                    in_w = None
            while line is None:
                wait = None if backstop is None else backstop - time.monotonic()
                if wait is not None and wait <= 0:
                    break
                for key, _ in sel.select(wait):
                    if key.data == "in":
                        try:
                            n = os.write(in_w, view[:1 << 16])
                        except BlockingIOError:
                            continue
                        except OSError:  # the command closed its stdin
                            n = len(view)
                        view = view[n:]
                        if not view:
                            sel.unregister(in_w)
                            os.close(in_w)
                            in_w = None
                    elif key.data == "st":
                        data = os.read(st_r, 4096)
                        status += data
                        while b"\n" in status:
                            first, _, rest = bytes(status).partition(b"\n")
                            status = bytearray(rest)
                            text = first.decode(errors="replace")
                            if text.startswith(nonce + " P "):
                                if on_pid is not None:
                                    on_pid(int(text.split()[2]))
                                continue
                            line = text
                            break
                        if not data and line is None:
                            line = ""
                        if line is not None:
                            sel.unregister(st_r)
                    else:
                        try:
                            data = os.read(key.fd, 1 << 16)
                        except BlockingIOError:
                            continue
                        if not data:
                            sel.unregister(key.fd)
                            open_streams.pop(key.fd, None)
                            continue
                        name = streams[key.fd]
                        caps[name].add(data)
                        merged.add(data)
                        yield name, data
            # the command has exited: what it wrote is in the pipes already
            for fd in list(open_streams):
                while True:
                    try:
                        data = os.read(fd, 1 << 16)
                    except (BlockingIOError, InterruptedError):
                        break
                    if not data:
                        open_streams.pop(fd, None)
                        break
                    name = streams[fd]
                    caps[name].add(data)
                    merged.add(data)
                    yield name, data
        finally:
            sel.close()
            if in_w is not None:
                os.close(in_w)
            os.close(st_r)
            late = list(open_streams)
            for fd in streams:
                if fd not in late:
                    os.close(fd)
            if late:
                try:
                    self._send({"op": "discard"}, late)
                except _AgentGone:
                    pass
                for fd in late:
                    os.close(fd)
        dur = time.monotonic() - t0
        timed_out = False
        if line is None:  # backstop: the agent did not answer in time
            self._shell_dead = self._shell_dead or self._generation == gen
            code, timed_out = TIMEOUT_CODE, True
        else:
            got, _, rest = line.partition(" ")
            parts = rest.split(" ")
            if not line or got != nonce or not parts or parts[0] == "E":
                if got == nonce and parts and parts[0] == "E":
                    raise SandboxError(f"sandbox {self.id}: {rest[2:]}")
                self._shell_dead = self._shell_dead or self._generation == gen  # EOF: agent died (OOM, delete)
                code = _KILLED
            else:
                code = int(parts[0])
                timed_out = len(parts) > 1 and parts[1] == "T"
        raw = merged.value()
        out_b = caps["stdout"].value()
        return ExecResult(code, raw.decode(errors="replace"), raw, dur, timed_out,
                          merged.total > cap or caps["stdout"].total > cap or caps["stderr"].total > cap,
                          out_b, caps["stderr"].value())

    def _check_exec_args(self, cmd, timeout, workdir, env, stdin, stateful):
        if isinstance(cmd, (list, tuple)):
            if not all(isinstance(c, str) for c in cmd):
                raise TypeError("cmd list must contain only str")
            cmd = shlex.join(cmd)
        if not isinstance(cmd, str):
            raise TypeError(f"cmd must be a str or a list of str, got {type(cmd).__name__}")
        if "\0" in cmd:
            raise ValueError("cmd must not contain NUL bytes")
        if timeout is None:
            timeout = self.config.exec_timeout
        timeout = check_timeout(timeout, "timeout", allow_none=True)
        if workdir is not None:
            check_path_text(workdir, "workdir")
            if not workdir.startswith("/"):
                workdir = os.path.join(self.config.working_dir, workdir)
        env = check_env(env or {}, "env")
        if stdin is not None and not isinstance(stdin, (bytes, bytearray, str)):
            raise TypeError(f"stdin must be bytes or str, got {type(stdin).__name__}")
        if isinstance(stdin, str):
            stdin = stdin.encode()
        stateful = self.config.stateful if stateful is None else bool(stateful)
        return cmd, timeout, workdir, env, stdin, stateful

    def exec(self, cmd: str | list, timeout: float | None = None, workdir: str | None = None,
             env: Mapping[str, str] | None = None, stdin: bytes | str | None = None,
             background: bool = False, stateful: bool | None = None, merge_stderr: bool = True,
             on_output: Callable[[str, bytes], Any] | None = None,
             user: str | int | None = None) -> ExecResult | BackgroundJob:
        """Run ``cmd`` with ``bash -c`` in the sandbox (see ``agent.py`` for the protocol).

        ``timeout``: the agent SIGKILLs the command's session (exit 124, ``timed_out``).
        ``stateful``: cwd, variables and functions persist across stateful execs (never into
        non-stateful ones). ``merge_stderr=False``: separate ``stdout``/``stderr``. ``on_output``:
        called with ``("stdout"|"stderr", chunk)`` as output arrives. ``background``: a
        ``BackgroundJob`` (its own session; output in ``job.output()``). ``user``: a name from the
        image's ``/etc/passwd``, a uid, or ``"uid:gid"`` (needs those ids mapped: rootful or subuid).
        """
        cmd, timeout, workdir, env, stdin, stateful = self._check_exec_args(cmd, timeout, workdir, env,
                                                                             stdin, stateful)
        if on_output is not None and not callable(on_output):
            raise TypeError(f"on_output must be callable, got {type(on_output).__name__}")
        ids = self._resolve_user(user)
        if ids is not None and "HOME" not in env:
            env = dict(env, HOME=ids[2])
        if background:
            return self._start_background(cmd, workdir, env, stateful, None if ids is None else ids[:2])
        gen = self._exec_gen(cmd, timeout, workdir, env, stdin, stateful, bool(merge_stderr),
                             None if ids is None else ids[:2])
        while True:
            try:
                name, chunk = next(gen)
            except StopIteration as stop:
                return stop.value
            if on_output is not None:
                on_output(name, chunk)

    def exec_stream(self, cmd: str | list, timeout: float | None = None, workdir: str | None = None,
                    env: Mapping[str, str] | None = None, stdin: bytes | str | None = None,
                    stateful: bool | None = None, merge_stderr: bool = False,
                    user: str | int | None = None) -> ExecStream:
        """``for stream, chunk in sb.exec_stream("pytest -x"): ...``; then ``.result``; ``.pid`` is the
        command's pid inside the sandbox once the first chunk (or the end) has been read."""
        cmd, timeout, workdir, env, stdin, stateful = self._check_exec_args(cmd, timeout, workdir, env,
                                                                             stdin, stateful)
        ids = self._resolve_user(user)
        if ids is not None and "HOME" not in env:
            env = dict(env, HOME=ids[2])
        stream = ExecStream(None)
        stream._gen = self._exec_gen(cmd, timeout, workdir, env, stdin, stateful, bool(merge_stderr),
                                     None if ids is None else ids[:2], on_pid=stream._set_pid)
        return stream

    def _resolve_user(self, user: str | int | None) -> tuple[int, int, str] | None:
        """(uid, gid, home) from the sandbox's own /etc/passwd and /etc/group; None = root.

        ``user=None`` means the image's default (an imported image's config ``User``), else root."""
        if user is None:
            user = (getattr(getattr(self, "image", None), "config", None) or {}).get("User") or None
        if user is None or user == "" or user == "root" or user == 0 or user == "0":
            return None
        if isinstance(user, bool) or not isinstance(user, (str, int)):
            raise TypeError(f"user must be a name, a uid or 'uid:gid', got {user!r}")
        name, _, group = str(user).partition(":")
        try:
            passwd = self.read_file("/etc/passwd").decode(errors="replace").splitlines()
        except OSError:
            passwd = []
        entry = next((ln.split(":") for ln in passwd if ln.split(":")[:1] == [name]
                      or (name.isdigit() and len(ln.split(":")) > 2 and ln.split(":")[2] == name)), None)
        if entry is not None and len(entry) >= 6:
            uid, gid, home = int(entry[2]), int(entry[3]), entry[5] or "/"
        elif name.isdigit():
            uid, gid, home = int(name), int(name), "/"
        else:
            raise ValueError(f"user {name!r} is not in the sandbox's /etc/passwd")
        if group:
            if group.isdigit():
                gid = int(group)
            else:
                try:
                    groups = self.read_file("/etc/group").decode(errors="replace").splitlines()
                except OSError:
                    groups = []
                g = next((ln.split(":") for ln in groups if ln.split(":")[:1] == [group]), None)
                if g is None or len(g) < 3:
                    raise ValueError(f"group {group!r} is not in the sandbox's /etc/group")
                gid = int(g[2])
        return uid, gid, home

    def _start_background(self, cmd: str, workdir: str | None, env: dict, stateful: bool,
                          user: tuple | None = None) -> BackgroundJob:
        with self._life:
            self._check_open()
            if self._shell_dead:
                self._respawn_keep()
            self._jobs += 1
            jid = f"{self._jobs}-{uuid.uuid4().hex[:6]}"
            wd = workdir or self.config.working_dir
            op = {"op": "spawn", "job": jid, "cmd": cmd, "env": env, "cwd": self.config.working_dir
                  if stateful else wd, "wd": workdir if stateful else None, "timeout": None, "merge": True,
                  "stdin": False, "state": stateful, "log": f"{_JOBS_DIR}/{jid}.log"}
            if user is not None:
                op["uid"], op["gid"] = user
            gen = self._generation
            reply = self._agent_request(op, 30.0)
        if reply in (None, "gone") or not reply.isdigit():
            raise SandboxError(f"could not start background job in sandbox {self.id}: {reply}")
        return BackgroundJob(self, jid, int(reply), gen)
