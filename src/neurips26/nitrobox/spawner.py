"""The spawner thread: every ``fork`` of a child A goes through one long-lived thread per process.

PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process (MEASURED in the spec),
so in direct mode forks from short-lived threads are handed to this thread.
"""

from __future__ import annotations

import os
import queue
import threading


class _Box:
    __slots__ = ("ev", "result", "exc")

    def __init__(self) -> None:
        self.ev = threading.Event()
        self.result = None
        self.exc = None


class _Call:
    __slots__ = ("fn",)

    def __init__(self, fn) -> None:
        self.fn = fn


def _fork_a(spec) -> int:
    """Fork; the child becomes the sandbox's process A and never returns into the caller's code."""
    from neurips26.nitrobox import child

    pid = os.fork()
    if pid == 0:
        try:
            child.run_a(spec)
        finally:
            os._exit(127)
    return pid


class Spawner:
    """One long-lived thread per process that performs every ``fork`` (PDEATHSIG is per thread)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.q: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="nitrobox-spawner", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            spec, box = self.q.get()
            if isinstance(spec, _Call):
                try:
                    box.result = spec.fn()
                except BaseException as e:  # noqa: BLE001
                    box.exc = e
                box.ev.set()
                continue
            try:
                box.result = _fork_a(spec)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box.exc = e
            box.ev.set()

    def call(self, fn):
        """Run ``fn()`` in the spawner thread (e.g. start the zygote: PDEATHSIG follows this thread)."""
        return self._hand_off(_Call(fn))

    def fork(self, spec) -> int:
        if threading.current_thread() is threading.main_thread():
            # the main OS thread lives until the interpreter exits, so PDEATHSIG tied to it is as
            # good as the spawner thread's, without a thread hand-off
            return _fork_a(spec)
        return self._hand_off(spec)

    def _hand_off(self, item):
        """Run ``item`` (a spec to fork, or a ``_Call``) in the spawner thread; return or raise its outcome."""
        box = _Box()
        self.q.put((item, box))
        box.ev.wait()
        if box.exc is not None:
            raise box.exc
        return box.result


_spawner: Spawner | None = None
_spawner_lock = threading.Lock()


def get() -> Spawner:
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner.pid != os.getpid() or not _spawner.thread.is_alive():
            _spawner = Spawner()
        return _spawner
