"""Behaviour probes run against every sandbox backend (the README feature table comes from these).

``python -m neurips26.nitrobox.probes [backend ...]`` prints one JSON object per backend. Each probe
is something a rollout engineer relies on, run through the backend's own API
(``backends.SandboxBackend``: create / exec / write_file / read_file / reset / delete):

``exit_exact``     ``exit 3`` -> 3 and ``kill -9 $$`` -> 137
``no_forge``       a command writing ``0`` to fd 3..9 and exiting 7 is still reported as 7, and the
                   next command's result is its own
``no_bleed``       output of a background process started by one exec does not show up in the next
``file_sandbox_rights``  ``write_file`` on a symlink planted inside, pointing at an absolute path that
                   exists only on the host (a sentinel file this probe made), leaves the host file alone
``fifo_no_hang``   ``read_file`` of a FIFO planted inside returns (an error or bytes) within 5 s
``reset_clean``    a file written before ``reset`` is gone after it
Each result is ``True`` / ``False`` or ``"error: ..."``; nothing is hard-coded per backend.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
import uuid

PROBES = ("exit_exact", "no_forge", "no_bleed", "file_sandbox_rights", "reset_clean", "fifo_no_hang")


class _Abandoned(Exception):
    """The backend hung in a probe and was torn down: the probe failed, no further probes run."""


def _with_timeout(fn, seconds: float):
    """(finished, value or exception) of ``fn()`` run in a daemon thread for at most ``seconds``."""
    box: dict = {}

    def run():
        try:
            box["v"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported
            box["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        return False, None
    return True, box.get("e", box.get("v"))


def probe(be, name: str):
    """Run probe ``name`` on backend ``be`` in a fresh sandbox; True/False. A call that hangs
    (``TimeoutError`` from an out-of-process backend, which it then tears down) fails the probe."""
    try:
        return _probe(be, name)
    except TimeoutError:
        raise _Abandoned from None


def _probe(be, name: str):
    h = be.create()
    try:
        if name == "exit_exact":
            return be.exec(h, "exit 3", timeout=30)[0] == 3 and be.exec(h, "kill -9 $$", timeout=30)[0] == 137
        if name == "no_forge":
            code, _ = be.exec(h, "for fd in 3 4 5 6 7 8 9; do (echo 0 >&$fd) 2>/dev/null; done; exit 7")
            nxt = be.exec(h, "echo own")
            return code == 7 and nxt == (0, "own\n")
        if name == "no_bleed":
            be.exec(h, "(sleep 0.3; echo LATE) & echo started")
            time.sleep(0.6)
            return be.exec(h, "echo clean") == (0, "clean\n")
        if name == "file_sandbox_rights":
            fd, sentinel = tempfile.mkstemp(prefix="nbx-probe-sentinel-", dir="/tmp")
            os.write(fd, b"host\n")
            os.close(fd)
            try:
                be.exec(h, f"ln -sf {sentinel} /workspace/planted")
                try:
                    be.write_file(h, "/workspace/planted", b"written from the trainer\n")
                except Exception:  # noqa: BLE001 - refusing is fine
                    pass
                with open(sentinel, "rb") as f:
                    return f.read() == b"host\n"
            finally:
                os.unlink(sentinel)
        if name == "fifo_no_hang":
            be.exec(h, "mkfifo /workspace/pipe")
            done, _ = _with_timeout(lambda: be.read_file(h, "/workspace/pipe"), 5.0)
            if not done:  # unblock the reader so the backend can be closed
                if hasattr(be, "abandon"):  # an out-of-process backend stuck in the call
                    be.abandon()
                    raise _Abandoned
                be.exec(h, "timeout 1 sh -c 'echo x > /workspace/pipe' || true")
            return done
        if name == "reset_clean":
            be.write_file(h, "/workspace/before-reset.txt", b"x")
            h = be.reset(h)
            return be.exec(h, "ls -A /workspace")[1].strip() == ""
        raise ValueError(f"probe must be one of {PROBES}, got {name!r}")
    finally:
        try:
            if getattr(getattr(be, "proc", None), "returncode", None) is None:
                be.delete(h)
        except Exception:  # noqa: BLE001
            pass


def probe_all(be) -> dict:
    out = {}
    for name in PROBES:
        try:
            out[name] = bool(probe(be, name))
        except _Abandoned:
            out[name] = False
            break
        except Exception as e:  # noqa: BLE001 - a probe the backend cannot run is a result too
            out[name] = f"error: {type(e).__name__}: {str(e)[:120]}"
    return out


def main(argv: list[str] | None = None) -> int:
    from neurips26.nitrobox.backends import BACKENDS, BackendUnavailable, make_backend

    names = (argv if argv is not None else sys.argv[1:]) or [
        "nitrobox", "docker", "bwrap", "agentdocker-lite", "nitrobox-0.1.0"]
    root = f"/dev/shm/neurips26-nbx-probes-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    for name in names:
        if name not in BACKENDS:
            print(json.dumps({"backend": name, "error": f"unknown; one of {sorted(BACKENDS)}"}))
            continue
        try:
            be = make_backend(name, state_root=root)
        except BackendUnavailable as e:
            print(json.dumps({"backend": name, "unavailable": str(e)}), flush=True)
            continue
        try:
            print(json.dumps({"backend": name, **probe_all(be)}), flush=True)
        finally:
            be.close()
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
