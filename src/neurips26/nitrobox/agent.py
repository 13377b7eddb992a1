"""The exec agent: pid 1 of every sandbox, and the only party that reports exit codes.

Why an agent and not a persistent shell: a shell that prints ``$?`` to a status pipe shares that
pipe, its stdin and its ``/proc/1/fd`` with every command it runs, so a command can forge the status
of itself and of later commands (``echo 0 >&3``), inject commands, and leave background writers on the
next command's output. The agent removes all three:

1. The client talks to the agent over one ``SOCK_SEQPACKET`` socket that only the agent holds. No
   sandbox process inherits it (``MSG_CMSG_CLOEXEC``, ``close_range`` in every child) and none can
   reach it through ``/proc/1/fd``: the agent is non-dumpable and keeps capabilities (in the sandbox's
   user namespace) that no command has, so ``ptrace_may_access`` refuses every command.
2. Each exec brings its own pipes (``SCM_RIGHTS``): stdout, stderr (or one merged pipe), stdin, and a
   private status pipe whose write end only the agent holds. A background process of an earlier exec
   can only ever write to that earlier exec's pipes.
3. The exit code is ``waitpid()``'s, never text printed by the command: ``code`` for a normal exit,
   ``128 + signal`` for a signal, ``124`` for a timeout the agent enforced (SIGKILL to the exec's
   session). The reply carries the client's per-exec nonce, which the client checks.

Stateful execs (``cd``/variables/functions persist) run ``bash -c PRELUDE``: the prelude sources the
sandbox's state from a memfd the agent owns (fd ``STATE_FD`` of that command only), runs the command
with ``eval``, and rewrites the state from an ``EXIT`` trap, so ``exit 3`` saves the state and exits 3.
Non-stateful execs never see that memfd.

Protocol (client -> agent: ``marshal`` dicts + fds; agent -> client: one text line per reply pipe):
``exec``     fds [status_w, out_w, err_w?, stdin_r?] -> ``"<nonce> P <pid>"`` at once, then
             ``"<nonce> <code> <T|->"`` when the command ends;
``spawn``    (background job) fds [reply_w] -> ``"<nonce> <pid>"`` at once; output goes to ``log``;
``wait``     fds [reply_w] -> ``"<nonce> <code>"`` when the job has ended (``running`` if not ``block``);
``signal``   fds [reply_w] -> ``"<nonce> ok|gone"``;
``discard``  fds [pipes...] -> the agent drains them until EOF (so late background writers never get
             SIGPIPE and never reach a later exec).
Imports only the standard library and ``_sys`` (the zygote loads this file by path).
"""

from __future__ import annotations

import errno
import marshal
import os
import stat
import resource
import selectors
import signal
import socket
import time

if __name__ == "_nbx_agent":  # loaded by file path (the zygote, CRIU's boot), ``_sys`` injected first: never
    import _nbx_sys as _sys  # type: ignore[no-redef]  # the package (it would import nitrobox, +4 MiB a tree)
else:
    from neurips26.nitrobox import _sys

STATE_FD = 63
TIMEOUT_CODE = 124

# The stateful prelude. $1 = the command, $2 = an explicit workdir ('' = keep the saved cwd).
STATE_PRELUDE = r'''
__nbx_save() {
  local __nbx_v __nbx_a
  {
    for __nbx_v in $(compgen -v); do
      case $__nbx_v in
        BASH|BASHOPTS|BASHPID|BASH_*|COLUMNS|COMP_*|DIRSTACK|EPOCHREALTIME|EPOCHSECONDS|EUID|FUNCNAME|\
GROUPS|HISTCMD|HOSTTYPE|LINENO|LINES|MACHTYPE|OLDPWD|OPTERR|OPTIND|OSTYPE|PIPESTATUS|PPID|PWD|RANDOM|\
SECONDS|SHELLOPTS|SHLVL|SRANDOM|UID|_|__nbx_*) continue ;;
      esac
      __nbx_a=${!__nbx_v@a}
      case $__nbx_a in *r*) continue ;; esac
      declare -p -- "$__nbx_v"
    done
    declare -f
    printf 'cd -- %q 2>/dev/null\n' "$PWD"
    umask -p
  } > /dev/fd/63 2>/dev/null
}
[ -s /dev/fd/63 ] && . /dev/fd/63
__nbx_cmd=$1
[ -n "$2" ] && { cd -- "$2" || exit 126; }
trap __nbx_save EXIT
set --
eval "$__nbx_cmd"
'''


AT_FDCWD = -100
FILE_OPS = frozenset({"open", "lstat", "mkdir", "symlink", "link", "remove", "utime"})


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def _opath(path: str, nofollow: bool = False) -> int:
    """An O_PATH fd: resolved in the sandbox's root and mounts, never through /proc magic links."""
    return _sys.openat2(AT_FDCWD, path, os.O_PATH | (os.O_NOFOLLOW if nofollow else 0), 0,
                        _sys.RESOLVE_NO_MAGICLINKS)


def _reopen(pfd: int, flags: int) -> int:
    """Open the inode an O_PATH fd names (no second path walk: no race with a swapped path)."""
    return os.open(f"/proc/self/fd/{pfd}", flags | os.O_CLOEXEC | os.O_NOCTTY)


def _refuse(path: str, mode: int, want: str) -> OSError:
    return OSError(errno.EINVAL if want != "directory" else errno.ENOTDIR,
                   f"{path} is a {_kind(mode)}, not a {want} (pass special=True to allow)"
                   if want != "directory" else f"{path} is a {_kind(mode)}, not a directory")


def _st_text(st: os.stat_result) -> str:
    return f"{st.st_mode} {st.st_size} {st.st_mtime_ns} {st.st_uid} {st.st_gid} {st.st_ino} {st.st_nlink}"


def file_op(req: dict) -> tuple[str, list]:
    """One file operation (called with the agent's effective caps lowered to a command's).

    Returns (reply text after the nonce, fds to pass back).
    """
    op, path = req["op"], req["path"]
    if op == "open":
        how = req["how"]
        special = bool(req.get("special"))
        if how in ("r", "dir"):
            pfd = _opath(path, bool(req.get("nofollow")))
            try:
                st = os.fstat(pfd)
                if how == "dir":
                    if not stat.S_ISDIR(st.st_mode):
                        raise _refuse(path, st.st_mode, "directory")
                    return "OK " + _st_text(st), [_reopen(pfd, os.O_RDONLY | os.O_DIRECTORY)]
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(errno.EISDIR, f"{path} is a directory")
                if not stat.S_ISREG(st.st_mode) and not special:
                    raise _refuse(path, st.st_mode, "regular file")
                return "OK " + _st_text(st), [_reopen(pfd, os.O_RDONLY | os.O_NONBLOCK)]
            finally:
                os.close(pfd)
        # how == "w": an existing path is opened (after the type check), a missing one created
        try:
            pfd = _opath(path)
        except FileNotFoundError:
            if req.get("parents"):
                parent = os.path.dirname(path)
                if parent and parent != "/":
                    os.makedirs(parent, 0o755, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOCTTY | os.O_NONBLOCK
            try:
                fd = _sys.openat2(AT_FDCWD, path, flags | os.O_EXCL, req.get("perm", 0o644),
                                  _sys.RESOLVE_NO_MAGICLINKS)
                os.fchmod(fd, req.get("perm", 0o644))  # exact mode, whatever the umask
            except FileExistsError:  # a dangling symlink: create its target (inside the root)
                fd = _sys.openat2(AT_FDCWD, path, flags, req.get("perm", 0o644), _sys.RESOLVE_NO_MAGICLINKS)
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    os.close(fd)
                    raise _refuse(path, st.st_mode, "regular file") from None
                os.ftruncate(fd, 0)
            os.set_blocking(fd, True)
            return "OK " + _st_text(os.fstat(fd)), [fd]
        try:
            st = os.fstat(pfd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, f"{path} is a directory")
            if not stat.S_ISREG(st.st_mode) and not special:
                raise _refuse(path, st.st_mode, "regular file")
            fd = _reopen(pfd, os.O_WRONLY | os.O_NONBLOCK)
            if stat.S_ISREG(st.st_mode):
                os.set_blocking(fd, True)
                if req.get("trunc", True):
                    os.ftruncate(fd, 0)
                if req.get("chmod"):
                    os.fchmod(fd, req.get("perm", 0o644))
            return "OK " + _st_text(os.fstat(fd)), [fd]
        finally:
            os.close(pfd)
    if op == "lstat":
        pfd = _opath(path, nofollow=not req.get("follow"))
        try:
            st = os.fstat(pfd)
        finally:
            os.close(pfd)
        target = os.readlink(path) if stat.S_ISLNK(st.st_mode) and not req.get("follow") else ""
        return "OK " + _st_text(st) + (" " + target if target else ""), []
    if op == "mkdir":
        perm = req.get("perm", 0o755)
        if req.get("parents"):
            os.makedirs(path, 0o755, exist_ok=True)
        else:
            try:
                os.mkdir(path, perm)
            except FileExistsError:
                if not req.get("exist_ok"):
                    raise
        pfd = _opath(path, nofollow=True)
        try:
            st = os.fstat(pfd)
            if not stat.S_ISDIR(st.st_mode):
                raise _refuse(path, st.st_mode, "directory")
            if req.get("chmod", True):
                os.chmod(f"/proc/self/fd/{pfd}", perm)
        finally:
            os.close(pfd)
        return "OK", []
    if op in ("symlink", "link"):
        if req.get("replace"):
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    os.unlink(path)
            except FileNotFoundError:
                pass
        if op == "symlink":
            os.symlink(req["target"], path)
        else:
            os.link(req["target"], path, follow_symlinks=False)
        return "OK", []
    if op == "remove":
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{path} is a directory")
        os.unlink(path)
        return "OK", []
    if op == "utime":
        ns = int(req["ns"])
        os.utime(path, ns=(ns, ns), follow_symlinks=not req.get("nofollow"))
        return "OK", []
    raise OSError(errno.EINVAL, f"unknown file op {op!r}")


class _Job:
    __slots__ = ("pid", "nonce", "reply", "deadline", "timed_out", "jid")

    def __init__(self, pid, nonce, reply, deadline, jid):
        self.pid, self.nonce, self.reply, self.deadline, self.jid = pid, nonce, reply, deadline, jid
        self.timed_out = False


def _reply(fd: int, text: str) -> None:
    try:
        os.write(fd, (text + "\n").encode())
    except OSError:
        pass
    try:
        os.close(fd)
    except OSError:
        pass


def _noop(*_a) -> None:
    return None


def kill_session(sid: int, sig: int) -> None:
    """Signal the exec's process group and every process still in its session (a command that
    called ``setpgid`` stays in the session; one that called ``setsid`` has left it on purpose).
    The leader itself is signalled by pid first: right after fork it may not have called setsid yet."""
    for fn in (os.kill, os.killpg):
        try:
            fn(sid, sig)
        except OSError:
            pass
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[3]) == sid:
                os.kill(int(name), sig)
        except (OSError, ValueError, IndexError):
            continue


def _child(req: dict, fds: list, env: dict, rlimits: list, shells: tuple, state_fd, drop: tuple = ()) -> None:
    """The forked exec child: its own session, its own pipes on 0/1/2, rlimits, cwd, execve."""
    err = 2
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        os.setsid()
        if req["op"] == "spawn":
            log = req["log"]
            os.makedirs(os.path.dirname(log), exist_ok=True)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            errfd, stdin = out, None
        else:
            out = fds[1]
            errfd = out if req["merge"] else fds[2]
            stdin = fds[-1] if req["stdin"] else None
        if stdin is None:
            stdin = os.open("/dev/null", os.O_RDONLY)
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(errfd, 2)
        keep = [0, 1, 2]
        if state_fd is not None:
            os.dup2(state_fd, STATE_FD)
            keep.append(STATE_FD)
        _sys.close_all_except(keep)
        for res, soft, hard in rlimits:
            resource.setrlimit(res, (soft, hard))
        for cap in drop:  # criu mode: the agent kept its bounding set, every command drops it
            _sys.prctl(_sys.PR_CAPBSET_DROP, cap)
        if req.get("uid") is not None:  # exec as another user of the image (Docker's ``user=``)
            os.setgroups([])
            os.setresgid(req["gid"], req["gid"], req["gid"])
            os.setresuid(req["uid"], req["uid"], req["uid"])
        cwd = req["cwd"]
        try:
            os.chdir(cwd)
        except OSError as e:
            os.write(err, f"nitrobox: workdir {cwd}: {e.strerror}\n".encode())
            os._exit(126)
        cmd = req["cmd"]
        if req["state"]:
            argv = ["bash", "-c", STATE_PRELUDE, "bash", cmd, req.get("wd") or ""]
        else:
            argv = ["bash", "-c", cmd]
        for shell in shells:
            try:
                os.execve(shell, argv, env)
            except FileNotFoundError:
                continue
        os.write(err, b"nitrobox: no shell (/bin/bash, /bin/sh) in this image\n")
        os._exit(127)
    except BaseException as e:  # noqa: BLE001 - never unwind into the agent's loop
        try:
            os.write(err, f"nitrobox: exec failed: {e}\n".encode())
        finally:
            os._exit(127)


def serve(sock_fd: int, env: dict, rlimits: list, shells: tuple = ("/bin/bash", "/bin/sh"),
          keep_caps: int = -1, drop: tuple = ()) -> None:
    """The agent's loop (never returns). Exits when the client closes the socket.

    ``keep_caps``: the capability mask a command runs with; file operations run with the agent's
    effective set lowered to it (same rights as the sandbox's root, not more).
    """
    sock = socket.socket(fileno=sock_fd)
    eff, perm, inh = _sys.capget()
    low = eff & keep_caps
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, _noop)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.set_wakeup_fd(wake_w)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ, "sock")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    running: dict[int, _Job] = {}     # pid -> job (foreground execs and background jobs)
    bg: dict[str, int] = {}           # job id -> pid while it runs
    done: dict[str, int] = {}         # job id -> exit code
    waiters: dict[str, list] = {}     # job id -> [(reply fd, nonce)]
    state = [None]                    # the stateful shell's memfd (created on first use)

    def finish(job: _Job, status: int) -> None:
        code = os.waitstatus_to_exitcode(status)
        if code < 0:
            code = 128 - code
        if job.timed_out:
            code = TIMEOUT_CODE
        if job.jid is None:
            _reply(job.reply, f"{job.nonce} {code} {'T' if job.timed_out else '-'}")
            return
        bg.pop(job.jid, None)
        done[job.jid] = code
        for fd, nonce in waiters.pop(job.jid, []):
            _reply(fd, f"{nonce} {code}")

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            job = running.pop(pid, None)
            if job is not None:
                finish(job, status)

    def handle(req: dict, fds: list) -> None:
        op = req.get("op")
        nonce = req.get("n", "")
        if op in FILE_OPS:
            out_fds: list = []
            try:
                _sys.capset(low, perm, inh)
                try:
                    text, out_fds = file_op(req)
                finally:
                    _sys.capset(eff, perm, inh)
            except OSError as e:
                text = f"E {e.errno or 0} {e.strerror or e}"
            except (KeyError, TypeError, ValueError) as e:
                text = f"E {errno.EINVAL} bad request: {e}"
            reply = socket.socket(fileno=fds[0])
            try:
                reply.settimeout(5.0)
                socket.send_fds(reply, [f"{nonce} {text}".encode(errors="replace")], out_fds)
            except OSError:
                pass
            finally:
                reply.close()
                for fd in out_fds + fds[1:]:
                    os.close(fd)
            return
        if op == "discard":
            for fd in fds:
                os.set_blocking(fd, False)
                sel.register(fd, selectors.EVENT_READ, "discard")
            return
        if op in ("exec", "spawn"):
            state_fd = None
            if req.get("state"):
                if state[0] is None:
                    state[0] = os.memfd_create("nbx-shell-state", os.MFD_CLOEXEC)
                state_fd = state[0]
            try:
                pid = os.fork()
            except OSError as e:
                _reply(fds[0], f"{nonce} E fork failed: {e.strerror}")
                for fd in fds[1:]:
                    os.close(fd)
                return
            if pid == 0:
                _child(req, fds, {**env, **req.get("env", {})}, rlimits, shells, state_fd, drop)
            for fd in fds[1:]:
                os.close(fd)
            timeout = req.get("timeout")
            deadline = None if timeout is None else time.monotonic() + timeout
            if op == "spawn":
                jid = req["job"]
                running[pid] = _Job(pid, nonce, None, deadline, jid)
                bg[jid] = pid
                _reply(fds[0], f"{nonce} {pid}")
            else:
                running[pid] = _Job(pid, nonce, fds[0], deadline, None)
                try:  # the command's pid (in the sandbox's pid ns) first, the status when it ends
                    os.write(fds[0], f"{nonce} P {pid}\n".encode())
                except OSError:
                    pass
            return
        if op == "wait":
            jid = req.get("job")
            if jid in done:
                _reply(fds[0], f"{nonce} {done[jid]}")
            elif jid in bg:
                if req.get("block"):
                    waiters.setdefault(jid, []).append((fds[0], nonce))
                else:
                    _reply(fds[0], f"{nonce} running")
            else:
                _reply(fds[0], f"{nonce} unknown")
            return
        if op == "signal":
            jid = req.get("job")
            pid = bg.get(jid)
            if pid is None:
                _reply(fds[0], f"{nonce} gone")
            else:
                kill_session(pid, int(req.get("sig", signal.SIGKILL)))
                _reply(fds[0], f"{nonce} ok")
            return
        for fd in fds:
            os.close(fd)

    while True:
        now = time.monotonic()
        deadlines = [j.deadline for j in running.values() if j.deadline is not None and not j.timed_out]
        wait = None if not deadlines else max(0.0, min(deadlines) - now)
        for key, _ in sel.select(wait):
            if key.data == "wake":
                try:
                    while os.read(wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                reap()
            elif key.data == "sock":
                try:
                    msg, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8, socket.MSG_CMSG_CLOEXEC)
                except InterruptedError:
                    continue
                except OSError:
                    os._exit(0)
                if not msg:  # the client closed the socket: the sandbox ends with us
                    os._exit(0)
                try:
                    req = marshal.loads(msg)
                except (EOFError, ValueError, TypeError):
                    for fd in fds:
                        os.close(fd)
                    continue
                handle(req, fds)
            else:  # discard
                try:
                    data = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fd)
                    os.close(key.fd)
        now = time.monotonic()
        for job in list(running.values()):
            if job.deadline is not None and not job.timed_out and now >= job.deadline:
                job.timed_out = True
                kill_session(job.pid, signal.SIGKILL)
        reap()


# criu=True: the agent must not map files from outside the sandbox (CRIU dumps every mapping), so
# B execs the image's own python3 with this boot code; _sys and agent come as source text.
CRIU_BOOT = r"""
import sys, types, marshal
def _mod(name, src):
    m = types.ModuleType(name)
    sys.modules[name] = m
    exec(compile(src, name, "exec"), m.__dict__)
    return m
import os
with os.fdopen(4, "rb") as f:
    args = marshal.loads(f.read())
_mod("_nbx_sys", args["sys_src"])
agent = _mod("_nbx_agent", args["agent_src"])
agent.serve(3, args["env"], args["rlimits"], tuple(args["shells"]), args["keep"], tuple(args["drop"]))
"""
CRIU_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
