"""The forked side of ``create``: child A (namespaces) and child B (pid 1 of the sandbox).

Imports only the standard library and ``_sys`` so that the zygote can load it by file path and a
rootless child never needs to read the interpreter's library dir after dropping privileges. Once
B has forked, A shares B's mount namespace and its root follows B's ``pivot_root``: A touches no
file after that (no lazy imports, no traceback formatting); errors go back as ``F:`` lines on the
control socket followed by ``os._exit``.

Numbered steps refer to the spec's "create(config)" section.
"""

from __future__ import annotations

import fcntl
import marshal
import os
import signal
import socket
import struct
import time
from dataclasses import dataclass, field

if __name__ == "_nbx_child":  # loaded by file path inside the zygote (``_sys``, ``agent`` injected first):
    import _nbx_sys as _sys  # type: ignore[no-redef]  # never the package (see agent.py)
    import _nbx_agent as agent  # type: ignore[no-redef]
else:
    from neurips26.nitrobox import _sys, agent

# Docker's default capability keep-list; every other cap is dropped from the bounding set.
KEEP_CAPS = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31})
# CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE NET_RAW SYS_CHROOT
# MKNOD AUDIT_WRITE SETFCAP

PROC_RO = ("sys", "sysrq-trigger", "irq", "bus", "fs")
PROC_NULL = ("kcore", "keys", "timer_list", "sched_debug", "latency_stats")
PROC_EMPTY = ("acpi", "scsi")                              # Docker's masked dirs: an empty ro tmpfs
SYS_EMPTY = ("firmware", "devices/virtual/powercap")      # ACPI tables, RAPL energy counters
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40


@dataclass
class ChildSpec:
    """Everything the children need, computed by the client before fork (no work after fork)."""

    sock: int                      # child end of the control socketpair (SEQPACKET, CLOEXEC)
    parent_pid: int
    map_by_parent: bool            # rootful (0 0 65536) or rootless subuid: the client writes maps
    uid: int
    gid: int
    cgroup_procs: list = field(default_factory=list)
    network_none: bool = True
    pdeathsig_b: bool = True
    merged: str = ""
    overlay_data: str = ""
    overlay_cwd: str = "/"         # the layer paths in overlay_data are relative to it (no host path in mountinfo)
    host_usr: bool = True
    disk_dir: str | None = None    # tmpfs mount point holding upper/work when disk_limit is set
    disk_size: int = 0
    disk_mkdirs: tuple = ()
    shm_size: int = 64 << 20
    mounts: list = field(default_factory=list)   # [(host src, sandbox target, "ro"|"rw"|"cow", cow upper dir)]
    devices: list = field(default_factory=list)  # host device paths bound at the same path
    hostname: str = "sandbox"
    rlimits: list = field(default_factory=list)
    cap_last: int = 40
    seccomp: object = None         # _sys.SeccompProgram
    shells: tuple = ("/bin/bash", "/bin/sh")
    resolv_conf: bytes | None = None  # network="host": the host's /etc/resolv.conf, written into the sandbox
    criu_agent: dict | None = None  # criu=True: sources of _sys/agent for an agent exec'd from the image
    env: dict = field(default_factory=dict)
    usr_flags: int = 0             # locked flags of the host /usr mount, translated ST_ -> MS_
    trace: bool = False            # B reports per-step timings ("T:" line) before exec (diagnostics)
    # zygote mode: A exits right after forking B and B is reparented to the zygote (a child
    # subreaper), which reaps it; B then holds the namespaces alone, so a delete waits for one
    # process exit instead of two (B's, then A's mm and mount-namespace teardown)
    a_exits_early: bool = False


def _send(fd: int, msg: str) -> None:
    try:
        os.write(fd, msg.encode(errors="replace"))
    except OSError:
        pass


def run_a(s: ChildSpec) -> None:
    """Child A: steps 2-4. Never returns."""
    step = "A:start"
    try:
        _sys.prctl(_sys.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != s.parent_pid:  # parent (spawner thread) already gone
            os._exit(1)
        try:  # the zygote ignores SIGCHLD (inherited: waitpid would fail); A waits for B itself
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        except ValueError:
            pass
        _sys.close_all_except([s.sock])
        step = "A:cgroup"
        me = str(os.getpid()).encode()
        for procs in s.cgroup_procs:  # step 2: join the sandbox's cgroup(s)
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, me)
            finally:
                os.close(fd)
        step = "A:unshare"
        flags = (_sys.CLONE_NEWUSER | _sys.CLONE_NEWNS | _sys.CLONE_NEWPID | _sys.CLONE_NEWIPC
                 | _sys.CLONE_NEWUTS | _sys.CLONE_NEWCGROUP)
        if s.network_none:
            flags |= _sys.CLONE_NEWNET
        _sys.unshare(flags)  # step 3
        step = "A:idmap"
        if s.map_by_parent:
            os.write(s.sock, b"U")
            if os.read(s.sock, 1) != b"G":
                os._exit(1)
        else:  # rootless single-id map, self-written (no parent round trip)
            for name, data in (("setgroups", b"deny"), ("uid_map", b"0 %d 1" % s.uid),
                               ("gid_map", b"0 %d 1" % s.gid)):
                fd = os.open("/proc/self/" + name, os.O_WRONLY)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
        step = "A:mount-private"
        _sys.mount(None, "/", None, _sys.MS_REC | _sys.MS_PRIVATE)  # step 4
        keep = None
        if s.disk_dir:  # disk_limit: upper/work on a per-sandbox tmpfs, mounted inside the ns
            step = "A:disk-tmpfs"
            _sys.mount("tmpfs", s.disk_dir, "tmpfs", _sys.MS_NOSUID | _sys.MS_NODEV,
                       f"size={s.disk_size},mode=755")
            for d in s.disk_mkdirs:
                os.mkdir(d, 0o755)
            keep = os.open(s.disk_dir, os.O_PATH | os.O_DIRECTORY)
        step = "A:fork"
        pid = os.fork()
        if pid == 0:
            run_b(s)
        # From here on A's root follows B's pivot_root: no filesystem access.
        _send(s.sock, f"P:{pid}\n" + (f"D:{os.getpid()},{keep}\n" if keep is not None else ""))
        os.close(s.sock)
        if s.a_exits_early:  # B re-arms its PDEATHSIG on the zygote once reparented (run_b)
            os._exit(0)
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        del keep
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 137)
    except BaseException as e:  # noqa: BLE001 - report and die, never unwind into the client's code
        _send(s.sock, f"F:{step}: {_describe(e)}\n")
        os._exit(127)


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError):
        return f"{e.strerror or e} [errno {e.errno}]" + (f" ({e.filename})" if e.filename else "")
    return f"{type(e).__name__}: {e}"


def _mkfile(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    os.close(fd)


def _target_fd(m: str, target: str, is_dir: bool) -> int:
    """An O_PATH fd of ``target`` inside the new root, created if missing, every component resolved
    *inside* it (B still sees the host's root: a symlink planted in the layers must not lead there;
    a dangling symlink component is followed inside the root and its target created there)."""
    flags = _sys.RESOLVE_IN_ROOT | _sys.RESOLVE_NO_MAGICLINKS
    root = os.open(m, os.O_PATH | os.O_DIRECTORY)
    try:
        parts = [p for p in target.split("/") if p]
        cur, hops = "", 0
        while parts:
            p = parts.pop(0)
            nxt = cur + "/" + p if cur else p
            try:
                os.close(_sys.openat2(root, nxt, os.O_PATH, 0, flags))
                cur = nxt
                continue
            except FileNotFoundError:
                pass
            dfd = _sys.openat2(root, cur or ".", os.O_RDONLY | os.O_DIRECTORY, 0, flags)
            try:
                try:
                    link = os.readlink(p, dir_fd=dfd)
                except OSError:
                    link = None
                if link is not None:  # dangling symlink: continue from its target, inside the root
                    hops += 1
                    if hops > 40:
                        raise OSError(40, "too many levels of symbolic links", target)
                    base = [] if link.startswith("/") else [x for x in cur.split("/") if x]
                    parts = base + [x for x in link.split("/") if x] + parts
                    cur = ""
                    continue
                if not parts and not is_dir:
                    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dfd))
                else:
                    os.mkdir(p, 0o755, dir_fd=dfd)
            finally:
                os.close(dfd)
            cur = nxt
        return _sys.openat2(root, cur or ".", os.O_PATH, 0, flags)
    finally:
        os.close(root)


def _bind_mounts(m: str, s: "ChildSpec") -> None:
    """Bind mounts (read-only, read-write, copy-on-write overlay) and devices, before pivot_root."""
    for src, target, mode, upper in s.mounts:
        is_dir = os.path.isdir(src)
        fd = _target_fd(m, target, is_dir)
        where = f"/proc/self/fd/{fd}"
        try:
            if mode == "cow":
                _sys.mount("overlay", where, "overlay", 0,
                           f"lowerdir={src},upperdir={upper}/upper,workdir={upper}/work,userxattr")
            else:
                _sys.mount(src, where, None, _sys.MS_BIND | _sys.MS_REC)
                if mode == "ro":  # a fresh fd: the old one names the dentry under the new mount
                    top = _target_fd(m, target, is_dir)
                    try:
                        _sys.mount(None, f"/proc/self/fd/{top}", None, _sys.MS_BIND | _sys.MS_REMOUNT
                                   | _sys.MS_RDONLY | _sys.locked_mount_flags(src))
                    finally:
                        os.close(top)
        finally:
            os.close(fd)
    for dev in s.devices:
        fd = _target_fd(m, dev, False)
        try:
            _sys.mount(dev, f"/proc/self/fd/{fd}", None, _sys.MS_BIND)
        finally:
            os.close(fd)


def _host_ppid(fd: int) -> int:
    """B's parent's pid as the host sees it (getppid() in B's pid ns is 0: the parent is outside),
    from ``fd`` = the host's /proc/self/status, opened while it was still in B's view."""
    data = os.pread(fd, 4096, 0)
    i = data.index(b"\nPPid:")
    return int(data[i + 6:data.index(b"\n", i + 1)])


def _await_reparent(s: "ChildSpec", status_fd: int, a_host: int) -> None:
    """A exits right after reporting B's pid; B is then the zygote's child (a child subreaper).
    Wait for that, arm PDEATHSIG on the zygote, then check it is still the parent: if the zygote
    (and so the client) died meanwhile, B was reparented elsewhere and must not run on. Arming
    only after the reparenting: A's exit would otherwise deliver the PDEATHSIG armed on A. Done
    at the end of B's setup, so A's exit overlaps B's mounts instead of delaying them."""
    end = time.monotonic() + 10.0
    while True:
        ppid = _host_ppid(status_fd)
        if ppid == s.parent_pid:
            break
        if ppid != a_host or time.monotonic() > end:
            raise OSError(3, "not reparented to the zygote", str(ppid))
        time.sleep(0.0002)
    if s.pdeathsig_b:
        _sys.prctl(_sys.PR_SET_PDEATHSIG, signal.SIGKILL)
    if _host_ppid(status_fd) != s.parent_pid:
        os._exit(1)


def _mask_dir(path: str) -> None:
    """Hide a directory behind an empty read-only tmpfs (Docker's masked paths)."""
    if os.path.isdir(path):
        _sys.mount("tmpfs", path, "tmpfs", _sys.MS_RDONLY | _sys.MS_NOSUID | _sys.MS_NODEV | _sys.MS_NOEXEC,
                   "size=0,mode=555")


def _executable(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_mode & 0o170000) == 0o100000 and bool(st.st_mode & 0o111)


def run_b(s: ChildSpec) -> None:
    """Child B = pid 1 of the sandbox: steps 5-10. Never returns."""
    step = "B:start"
    marks = []
    clock = time.perf_counter
    if s.trace:
        marks.append((step, clock()))
    try:
        os.setsid()
        status_fd = a_host = None
        if s.a_exits_early:  # the host's /proc is still this process's /proc (before pivot_root)
            status_fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
            a_host = _host_ppid(status_fd)
        if s.pdeathsig_b and not s.a_exits_early:
            _sys.prctl(_sys.PR_SET_PDEATHSIG, signal.SIGKILL)
        m = s.merged
        step = "B:overlay"
        if s.trace:
            marks.append((step, clock()))
        os.chdir(s.overlay_cwd)
        _sys.mount("overlay", m, "overlay", 0, s.overlay_data)  # step 5
        if s.resolv_conf is not None:  # network="host": the host's resolver config (pip, git, curl work)
            step = "B:resolv.conf"
            root = os.open(m, os.O_PATH | os.O_DIRECTORY)
            try:
                try:
                    os.mkdir("etc", 0o755, dir_fd=root)
                except FileExistsError:
                    pass
                # resolved inside the new root, the old entry replaced, never followed: a symlink
                # planted in a kept upper cannot make this write land on the host
                etc = _sys.openat2(root, "etc", os.O_PATH | os.O_DIRECTORY, 0,
                                   _sys.RESOLVE_IN_ROOT | _sys.RESOLVE_NO_MAGICLINKS)
                try:
                    try:
                        os.unlink("resolv.conf", dir_fd=etc)
                    except (FileNotFoundError, IsADirectoryError, PermissionError):
                        pass
                    try:
                        fd = _sys.openat2(etc, "resolv.conf", os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                          | os.O_NOFOLLOW, 0o644, _sys.RESOLVE_BENEATH | _sys.RESOLVE_NO_SYMLINKS)
                    except OSError:  # e.g. the sandbox made it a directory: its own resolver, its problem
                        fd = None
                    if fd is not None:
                        try:
                            os.write(fd, s.resolv_conf)
                        finally:
                            os.close(fd)
                finally:
                    os.close(etc)
            finally:
                os.close(root)
        if s.host_usr:
            step = "B:usr"
            if s.trace:
                marks.append((step, clock()))
            _sys.mount("/usr", m + "/usr", None, _sys.MS_BIND | _sys.MS_REC)
            _sys.mount(None, m + "/usr", None,
                       _sys.MS_BIND | _sys.MS_REMOUNT | _sys.MS_RDONLY | s.usr_flags)
        step = "B:proc"
        if s.trace:
            marks.append((step, clock()))  # spec step 6
        for d in ("proc", "dev", "sys", "tmp"):
            if not os.path.isdir(m + "/" + d):
                os.mkdir(m + "/" + d, 0o1777 if d == "tmp" else 0o755)
        pflags = _sys.MS_NOSUID | _sys.MS_NODEV | _sys.MS_NOEXEC
        _sys.mount("proc", m + "/proc", "proc", pflags)
        for name in PROC_RO:  # read-only self-binds (Docker's masked/readonly paths)
            p = m + "/proc/" + name
            if os.path.exists(p):
                _sys.mount(p, p, None, _sys.MS_BIND | _sys.MS_REC)
                _sys.mount(None, p, None, _sys.MS_BIND | _sys.MS_REMOUNT | _sys.MS_RDONLY | pflags)
        for name in PROC_NULL:
            p = m + "/proc/" + name
            if os.path.exists(p):
                _sys.mount("/dev/null", p, None, _sys.MS_BIND)
        for name in PROC_EMPTY:
            _mask_dir(m + "/proc/" + name)
        step = "B:dev"
        if s.trace:
            marks.append((step, clock()))
        dev = m + "/dev"
        _sys.mount("tmpfs", dev, "tmpfs", _sys.MS_NOSUID | _sys.MS_NOEXEC, "mode=755,size=64k")
        for n in DEV_NODES:
            if os.path.exists("/dev/" + n):
                _mkfile(dev + "/" + n)
                _sys.mount("/dev/" + n, dev + "/" + n, None, _sys.MS_BIND)
        for link, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"),
                             ("ptmx", "pts/ptmx")):
            os.symlink(target, dev + "/" + link)
        os.mkdir(dev + "/pts", 0o755)
        _sys.mount("devpts", dev + "/pts", "devpts", _sys.MS_NOSUID | _sys.MS_NOEXEC,
                   "newinstance,ptmxmode=0666,mode=620")
        os.mkdir(dev + "/shm", 0o1777)
        _sys.mount("tmpfs", dev + "/shm", "tmpfs", _sys.MS_NOSUID | _sys.MS_NODEV,
                   f"mode=1777,size={s.shm_size}")
        if s.mounts or s.devices:
            step = "B:mounts"
            _bind_mounts(m, s)
        step = "B:sys"
        if s.trace:
            marks.append((step, clock()))
        sflags = _sys.MS_RDONLY | _sys.MS_NOSUID | _sys.MS_NODEV | _sys.MS_NOEXEC
        if s.network_none:
            _sys.mount("sysfs", m + "/sys", "sysfs", sflags)
            for name in SYS_EMPTY:
                _mask_dir(m + "/sys/" + name)
        else:
            _sys.mount("tmpfs", m + "/sys", "tmpfs", sflags, "size=4k")
        step = "B:net"
        if s.trace:
            marks.append((step, clock()))  # spec step 7
        if s.network_none:
            sk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                fcntl.ioctl(sk.fileno(), SIOCSIFFLAGS,
                            struct.pack("16sH14s", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING, b""))
            finally:
                sk.close()
        _sys.sethostname(s.hostname)
        step = "B:pivot_root"
        if s.trace:
            marks.append((step, clock()))  # spec step 8
        os.chdir(m)
        _sys.pivot_root(".", ".")
        _sys.umount2(".", _sys.MNT_DETACH)
        os.chdir("/")
        step = "B:caps"
        if s.trace:
            marks.append((step, clock()))
        drop = tuple(c for c in range(s.cap_last + 1) if c not in KEEP_CAPS)
        if s.criu_agent is None:
            for cap in drop:
                _sys.prctl(_sys.PR_CAPBSET_DROP, cap)
        _sys.prctl(_sys.PR_SET_NO_NEW_PRIVS, 1)
        step = "B:seccomp"
        if s.trace:
            marks.append((step, clock()))
        if s.seccomp is not None:
            s.seccomp.load()
        step = "B:shell"  # the agent runs every command with the first executable shell
        shells = tuple(sh for sh in s.shells if _executable(sh))
        if not shells:
            raise FileNotFoundError(2, "no executable shell in the image", " or ".join(s.shells))
        if status_fd is not None:
            step = "B:reparent"
            _await_reparent(s, status_fd, a_host)
            os.close(status_fd)
            status_fd = None
        step = "B:agent"
        if s.trace:
            marks.append((step, clock()))  # spec step 10: the agent instead of a shell
        if s.criu_agent is None:  # (criu mode: CRIU needs a dumpable init; the capability check
            _sys.prctl(_sys.PR_SET_DUMPABLE, 0)  # below still keeps /proc/1/* from every command)
        sock = fcntl.fcntl(s.sock, fcntl.F_DUPFD_CLOEXEC, 10)
        _sys.close_all_except([sock])
        s.sock = sock
        null = os.open("/dev/null", os.O_RDWR)  # fd 0
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.dup2(sock, 3, inheritable=False)  # fixed fd 3 for the agent's socket (CRIU finds it there)
        os.close(sock)
        s.sock = 3
        if s.trace:
            marks.append(("B:end", clock()))
            _send(s.sock, "T:" + ",".join(f"{a}={(t2 - t1) * 1e3:.3f}" for (a, t1), (_, t2)
                                          in zip(marks, marks[1:])) + "\n")
        keep = sum(1 << c for c in KEEP_CAPS)
        if s.criu_agent is not None:
            step = "B:criu-agent"
            py = next((p for p in agent.CRIU_PYTHONS if _executable(p)), None)
            if py is None:
                raise FileNotFoundError(2, "criu=True needs python3 in the image", agent.CRIU_PYTHONS[0])
            args = dict(s.criu_agent, env=s.env, rlimits=[list(r) for r in s.rlimits], shells=list(shells),
                        keep=keep, drop=list(drop))
            boot = os.memfd_create("nbx-agent-boot", 0)  # the arguments (sources) as fd 4
            os.write(boot, marshal.dumps(args))
            os.lseek(boot, 0, os.SEEK_SET)
            if boot != 4:
                os.dup2(boot, 4)
                os.close(boot)
            # a control socket born in the sandbox's netns (CRIU finds sockets by netns): B keeps
            # one end as fd 3, the client gets the other over the old socket, which B then closes
            here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            old = socket.socket(fileno=os.dup(3))
            socket.send_fds(old, [b"S\n"], [there.fileno()])
            old.close()
            there.close()
            os.dup2(here.detach(), 3)
            os.set_inheritable(3, True)
            os.set_inheritable(4, True)
            _send(s.sock, "R\n")
            os.execve(py, ["python3", "-S", "-c", agent.CRIU_BOOT], {"PATH": "/usr/bin:/bin"})
        # ready, with the files fast path's base: an O_PATH fd of the new root (see files.py); not in
        # criu mode. One message: every wake-up of the client counts on a loaded machine.
        rfd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        out = socket.socket(fileno=os.dup(s.sock))
        try:
            socket.send_fds(out, [b"O\nR\n"], [rfd])
        finally:
            out.close()
            os.close(rfd)
        agent.serve(s.sock, s.env, s.rlimits, shells, keep)
        os._exit(0)
    except BaseException as e:  # noqa: BLE001
        _send(s.sock, f"F:{step}: {_describe(e)}\n")
        os._exit(127)
