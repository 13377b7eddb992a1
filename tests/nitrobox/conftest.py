"""Shared fixtures for the NitroBox tests: a dedicated state root per test, leak scanners."""

from __future__ import annotations

import itertools
import os
import shutil
import time

import pytest

_counter = itertools.count()


def pytest_configure(config):
    config.addinivalue_line("markers", "criu: needs a working CRIU (criu check passes)")
    config.addinivalue_line("markers", "anchor: compares against an external sandbox tool")


@pytest.fixture
def state_root():
    """A dedicated state root outside pytest's 0700 tmp tree, removed afterwards."""
    root = f"/dev/shm/neurips26-nbx-test-{os.getpid()}-{next(_counter)}"
    yield root
    from neurips26.nitrobox import reaper

    deadline = time.monotonic() + 10
    while reaper.get().pending and time.monotonic() < deadline:
        time.sleep(0.01)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def sb(state_root):
    from neurips26.nitrobox import Sandbox

    s = Sandbox(state_root=state_root)
    yield s
    s.delete(wait=True)


