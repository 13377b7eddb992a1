"""``SandboxConfig``: one plain dataclass, validated at the API boundary before anything is created."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from neurips26.harness.validation import check_choice, check_scalar

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(value: Any, name: str) -> int | None:
    """``"128m"``/``"1g"``/``"64MiB"``/int bytes -> bytes; ``None`` stays ``None``.

    Raises ``ValueError`` naming ``name`` for anything else (``"12q"``, negative, bool).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a size like '128m' or an int of bytes, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{name} must be >= 0 bytes, got {value}")
        return value
    if isinstance(value, str):
        m = _SIZE_RE.match(value)
        if not m:
            raise ValueError(f"{name} must be a size like '128m', '1g' or an int of bytes, got {value!r}")
        return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    raise ValueError(f"{name} must be a size like '128m' or an int of bytes, got {type(value).__name__}")


@dataclass
class SandboxConfig:
    """Everything a sandbox is created from.

    image:        ``"host"`` (skeleton lower + the host's ``/usr`` bind-mounted read-only; needs no
                  download), a rootfs directory, or a ``Snapshot`` (used as an image).
    working_dir:  absolute path inside the sandbox; created in the upper layer, owned by the caller.
    env:          extra environment of the shell (keys without ``=``/NUL).
    network:      ``"none"`` (own netns with only ``lo``), ``"host"``, or ``"nat"`` (own netns with a
                  user-mode NAT'd interface ``tap0`` 10.0.2.100/24, gateway 10.0.2.2, DNS at 10.0.2.3:
                  outbound access through pasta, or slirp4netns where pasta is not installed).
    nat_backend:  ``"auto"`` (pasta if installed, else slirp4netns), ``"pasta"`` or ``"slirp4netns"``.
    ports:        ``nat`` only: ``{host_port: sandbox_port}`` TCP forwards on the host's 127.0.0.1.
    nat_host_loopback: ``nat`` only: let the sandbox reach the host's 127.0.0.1 as 10.0.2.2.
    mounts:       host paths into the sandbox: ``"src:dst[:ro|rw|cow]"`` or ``(src, dst, mode)``; ``ro``
                  (default) read-only bind, ``rw`` read-write bind (writes reach the host), ``cow`` an
                  overlay over the host path whose writes stay in the sandbox (reset drops them).
    devices:      host device nodes bound at the same path, e.g. ``["/dev/kvm"]`` or ``["kvm"]``.
    memory/pids/cpu/disk_limit: limits; ``None`` = unlimited. ``strict_limits=True`` raises
                  ``LimitsUnavailableError`` if the active backend cannot enforce one.
    exec_timeout: default per-exec timeout (s), ``None`` = none.
    max_output_bytes / max_file_bytes: caps on one exec's captured output (head + tail kept) and on
                  one file read by the files API.
    max_lifetime: watchdog (s) that deletes the sandbox after this wall time, ``None`` = none.
    state_root:   where state dirs live (default ``$NEURIPS26_NBX_STATE`` or
                  ``/dev/shm/neurips26-nbx-<uid>``).
    spawn_mode:   ``"auto"`` (zygote from 256 MiB client RSS; as root from 32 MiB once a second
                  sandbox is created and the zygote, started then in the background, has booted),
                  ``"direct"`` or ``"zygote"``.
    subuid:       rootless only: map 65536 ids with ``newuidmap`` instead of one.
    criu:         prepare the tree for CRIU (no PDEATHSIG on the sandbox init).
    standby:      keep one pre-spawned standby tree (fresh namespaces over a fresh empty upper) so
                  ``reset`` swaps to it and respawns the next one in the background. Used only
                  where a second tree shares nothing with the first: no resource limits (memory,
                  pids, cpu, ``disk_limit``), no NAT/ports, no ``cow`` mounts, no CRIU (else reset respawns).
                  It costs one idle tree (A + agent, counted in the bench's memory row).
    """

    image: Any = "host"
    working_dir: str = "/workspace"
    env: dict = field(default_factory=dict)
    hostname: str = "sandbox"
    name: str | None = None
    network: str = "none"
    ports: dict = field(default_factory=dict)
    mounts: list = field(default_factory=list)
    devices: list = field(default_factory=list)
    nat_host_loopback: bool = False
    nat_backend: str = "auto"
    memory: Any = None
    pids: int | None = None
    cpu: float | None = None
    disk_limit: Any = None
    shm_size: Any = "64m"
    strict_limits: bool = False
    exec_timeout: float | None = None
    max_lifetime: float | None = None
    max_output_bytes: int = 1 << 20
    max_file_bytes: int = 256 << 20
    start_timeout: float = 10.0
    stateful: bool = False
    state_root: str | None = None
    spawn_mode: str = "auto"
    subuid: bool = False
    criu: bool = False
    max_layers: int = 32
    standby: bool = True

    # ------------------------------------------------------------------ construction helpers
    @classmethod
    def from_any(cls, config: "SandboxConfig | Mapping[str, Any] | None" = None,
                 **overrides: Any) -> "SandboxConfig":
        """A validated copy from a config, a dict, or nothing, plus keyword overrides."""
        if config is None:
            base: dict[str, Any] = {}
        elif isinstance(config, SandboxConfig):
            base = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)}
        elif isinstance(config, Mapping):
            base = dict(config)
        else:
            raise TypeError(f"config must be a SandboxConfig, a dict or None, got {type(config).__name__}")
        base.update(overrides)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; known keys: {sorted(known)}")
        cfg = cls(**base)
        cfg.env = dict(cfg.env or {})
        cfg.ports = dict(cfg.ports or {})
        cfg.validate()
        return cfg

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ``ValueError``/``TypeError`` naming the field; never touches the filesystem."""
        if not isinstance(self.working_dir, str) or not self.working_dir.startswith("/"):
            raise ValueError(f"working_dir must be an absolute path, got {self.working_dir!r}")
        check_path_text(self.working_dir, "working_dir")
        if not isinstance(self.env, Mapping):
            raise TypeError(f"env must be a dict of str to str, got {type(self.env).__name__}")
        check_env(self.env, "env")
        if not isinstance(self.hostname, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}",
                                                                  self.hostname):
            raise ValueError(f"hostname must be 1-63 chars of [A-Za-z0-9.-], got {self.hostname!r}")
        if self.name is not None:
            if (not isinstance(self.name, str) or not self.name or "/" in self.name or ".." in self.name
                    or "\0" in self.name or len(self.name) > 64):
                raise ValueError(f"name must be 1-64 chars without '/', '..' or NUL, got {self.name!r}")
        if self.network not in ("none", "host", "nat"):
            raise ValueError(f"network must be 'none', 'host' or 'nat', got {self.network!r}")
        if not isinstance(self.ports, Mapping):
            raise TypeError(f"ports must be a dict of host port to sandbox port, got {type(self.ports).__name__}")
        for hp, sp in self.ports.items():
            for v, what in ((hp, "host port"), (sp, "sandbox port")):
                check_scalar(v, f"ports: {what}", int, min=1, max=65535)
        self.mounts = [parse_mount(x) for x in self.mounts]
        self.devices = [parse_device(x) for x in self.devices]
        check_choice(self.nat_backend, "nat_backend", ("auto", "pasta", "slirp4netns"))
        if self.ports and self.network != "nat":
            raise ValueError(f"ports needs network='nat', got network={self.network!r}")
        mem = parse_size(self.memory, "memory")
        if mem is not None and mem < 4 << 20:
            raise ValueError(f"memory must be >= 4 MiB, got {self.memory!r}")
        if self.pids is not None:
            check_scalar(self.pids, "pids", int, min=8)
        if self.cpu is not None:
            check_scalar(self.cpu, "cpu", float, min=0, inclusive="neither")
        disk = parse_size(self.disk_limit, "disk_limit")
        if disk is not None and disk < 1 << 20:
            raise ValueError(f"disk_limit must be >= 1 MiB, got {self.disk_limit!r}")
        shm = parse_size(self.shm_size, "shm_size")
        if shm is None or shm < 4096:
            raise ValueError(f"shm_size must be a size >= 4k, got {self.shm_size!r}")
        check_timeout(self.exec_timeout, "exec_timeout", allow_none=True)
        check_timeout(self.max_lifetime, "max_lifetime", allow_none=True)
        check_timeout(self.start_timeout, "start_timeout")
        check_scalar(self.max_output_bytes, "max_output_bytes", int, min=64)
        check_scalar(self.max_file_bytes, "max_file_bytes", int, min=1)
        check_choice(self.spawn_mode, "spawn_mode", ("auto", "direct", "zygote"))
        for flag in ("strict_limits", "stateful", "subuid", "criu", "nat_host_loopback", "standby"):
            check_scalar(getattr(self, flag), flag, bool)
        check_scalar(self.max_layers, "max_layers", int, min=1, max=400)
        if self.state_root is not None:
            if not isinstance(self.state_root, (str, os.PathLike)) or not os.path.isabs(str(self.state_root)):
                raise ValueError(f"state_root must be an absolute path, got {self.state_root!r}")
            check_path_text(str(self.state_root), "state_root")
            if any(c in str(self.state_root) for c in ",:"):
                raise ValueError(f"state_root must not contain ',' or ':' (overlay options), "
                                 f"got {self.state_root!r}")

    @property
    def memory_bytes(self) -> int | None:
        return parse_size(self.memory, "memory")

    @property
    def disk_bytes(self) -> int | None:
        return parse_size(self.disk_limit, "disk_limit")

    @property
    def shm_bytes(self) -> int:
        return parse_size(self.shm_size, "shm_size") or (64 << 20)

    def requested_limits(self) -> dict[str, Any]:
        """The limits the user asked for (name -> value)."""
        out: dict[str, Any] = {}
        if self.memory is not None:
            out["memory"] = self.memory_bytes
        if self.pids is not None:
            out["pids"] = self.pids
        if self.cpu is not None:
            out["cpu"] = self.cpu
        if self.disk_limit is not None:
            out["disk"] = self.disk_bytes
        if self.max_lifetime is not None:
            out["wall"] = self.max_lifetime
        return out


def parse_mount(spec: Any) -> tuple[str, str, str]:
    """``"src:dst[:mode]"`` or ``(src, dst[, mode])`` -> (abs host src, abs sandbox dst, mode)."""
    if isinstance(spec, str):
        parts = spec.split(":")
    elif isinstance(spec, (list, tuple)):
        parts = list(spec)
    else:
        raise TypeError(f"mounts entries must be 'src:dst[:mode]' or (src, dst, mode), got {spec!r}")
    if len(parts) == 2:
        parts.append("ro")
    if len(parts) != 3 or not all(isinstance(p, str) for p in parts):
        raise ValueError(f"mounts entry must be 'src:dst[:ro|rw|cow]', got {spec!r}")
    src, dst, mode = parts
    if mode not in ("ro", "rw", "cow"):
        raise ValueError(f"mounts mode must be 'ro', 'rw' or 'cow', got {mode!r} in {spec!r}")
    if not os.path.isabs(src) or not os.path.exists(src):
        raise ValueError(f"mounts source must be an existing absolute host path, got {src!r}")
    if not dst.startswith("/") or any(p == ".." for p in dst.split("/")) or dst.rstrip("/") in ("", "/proc", "/dev",
                                                                                             "/sys"):
        raise ValueError(f"mounts target must be an absolute sandbox path without '..', got {dst!r}")
    if any(c in src for c in ",:\0") or "\0" in dst:
        raise ValueError(f"mounts paths must not contain ',', ':' or NUL, got {spec!r}")
    if mode == "cow" and not os.path.isdir(src):
        raise ValueError(f"mounts mode 'cow' needs a directory, got {src!r}")
    return os.path.realpath(src), dst.rstrip("/") or "/", mode


def parse_device(dev: Any) -> str:
    """``"kvm"`` or ``"/dev/kvm"`` -> ``"/dev/kvm"`` (must be a character or block device)."""
    import stat as _stat

    if not isinstance(dev, str) or not dev:
        raise TypeError(f"devices entries must be device names or /dev paths, got {dev!r}")
    path = dev if dev.startswith("/dev/") else "/dev/" + dev
    try:
        st = os.stat(path)
    except OSError:
        raise ValueError(f"device {path!r} does not exist on the host") from None
    if not (_stat.S_ISCHR(st.st_mode) or _stat.S_ISBLK(st.st_mode)):
        raise ValueError(f"device {path!r} is not a character or block device")
    return path


def check_path_text(path: str, name: str) -> None:
    if not isinstance(path, str):
        raise TypeError(f"{name} must be a str path, got {type(path).__name__}")
    if "\0" in path:
        raise ValueError(f"{name} must not contain NUL bytes, got {path!r}")


def check_env(env: Mapping[str, Any], name: str = "env") -> dict[str, str]:
    out = {}
    for k, v in env.items():
        if not isinstance(k, str) or not k or "=" in k or "\0" in k:
            raise ValueError(f"{name} key must be a non-empty str without '=' or NUL, got {k!r}")
        if not isinstance(v, str) or "\0" in v:
            raise ValueError(f"{name}[{k!r}] must be a str without NUL, got {v!r}")
        out[k] = v
    return out


def check_timeout(t: Any, name: str, allow_none: bool = False) -> float | None:
    if t is None and allow_none:
        return None
    return check_scalar(t, name, float, min=0, inclusive="neither")
