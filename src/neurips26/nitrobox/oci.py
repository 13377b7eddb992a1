"""Import ``docker save`` tarballs and OCI image layouts as NitroBox images (issue 28 item 4, in part).

1. Read the manifest: ``manifest.json`` (docker save) or ``index.json`` -> manifest blob (OCI layout,
   a directory or a tar of one); layers bottom to top, and the image config.
2. Each layer blob is extracted once into a content-addressed cache ``<state_root>/images/layers/
   <sha256 of the blob>`` shared by every image and sandbox: ``.wh.<name>`` becomes an overlay
   whiteout (char device 0/0), ``.wh..wh..opq`` the ``user.overlay.opaque`` xattr (the sandboxes mount
   with ``userxattr``); members that would leave the layer (``..``, absolute paths, paths through a
   symlink) are refused.
3. A reference ``<state_root>/images/refs/<name>.json`` (layers top to bottom, config Env /
   WorkingDir / User / Entrypoint / Cmd) makes ``Sandbox(image="name:tag")`` resolve it; the
   layers become one overlay lowerdir each, below the sandbox's own snapshot layers.
4. ``pull(ref)``: the OCI distribution API (manifest or index -> platform manifest, blobs checked
   against their digests, Bearer-token challenge), then the same import.
Applied from the image config: ``Env`` (under the user's env), ``WorkingDir`` (replaces the default
``/workspace``), ``User`` (the default user of execs; ``user="root"`` overrides), ``Entrypoint`` +
``Cmd`` (``image_command``: what ``containers.run(image)`` and ``nitrobox exec --image X`` run when
no command is given; a given command replaces ``Cmd`` and is appended to ``Entrypoint``, as
``docker run`` does). Layers: plain tar, gzip, and zstd (``+zstd`` media types; needs the
``zstandard`` package, else an ``ImageError`` naming it).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import uuid
from pathlib import Path
from typing import Any

from neurips26.nitrobox.errors import ImageError
from neurips26.nitrobox.image import Image

OPAQUE_XATTR = "user.overlay.opaque"


def _refs_dir(state_root: str | os.PathLike) -> Path:
    return Path(state_root) / "images" / "refs"


def _ref_file(state_root, name: str) -> Path:
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    safe = name.replace("%", "%25").replace("/", "%2F")
    if safe in (".", "..") or "\0" in safe:
        raise ValueError(f"name must be an image reference like 'repo:tag', got {name!r}")
    return _refs_dir(state_root) / (safe + ".json")


class _Source:
    """Files of a docker-save tar, an OCI layout tar or an OCI layout directory, by name."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.tar = None
        if self.path.is_dir():
            return
        if not self.path.is_file():
            raise ImageError(f"image source {str(self.path)!r} does not exist")
        try:
            self.tar = tarfile.open(self.path)
        except tarfile.TarError as e:
            raise ImageError(f"image source {str(self.path)!r} is not a tar archive: {e}") from None

    def read(self, name: str) -> bytes:
        name = name.lstrip("./")
        if self.tar is None:
            p = self.path / name
            if not p.is_file():
                raise ImageError(f"{name} missing in image layout {str(self.path)!r}")
            return p.read_bytes()
        try:
            f = self.tar.extractfile(name)
        except KeyError:
            f = None
        if f is None:
            raise ImageError(f"{name} missing in image archive {str(self.path)!r}")
        return f.read()

    def has(self, name: str) -> bool:
        try:
            self.read(name)
            return True
        except ImageError:
            return False


def _blob(digest: str) -> str:
    algo, _, hexd = digest.partition(":")
    return f"blobs/{algo}/{hexd}"


def _manifest(src: _Source) -> tuple[list[str], dict, list[str]]:
    """(layer file names bottom->top, image config, repo tags)."""
    if src.has("index.json"):  # OCI layout (docker >= 25 saves this too)
        index = json.loads(src.read("index.json"))
        mans = index.get("manifests") or []
        if not mans:
            raise ImageError("index.json lists no manifest")
        man = json.loads(src.read(_blob(mans[0]["digest"])))
        if "manifests" in man:  # an index of indexes (multi-platform): take the first
            man = json.loads(src.read(_blob(man["manifests"][0]["digest"])))
        config = json.loads(src.read(_blob(man["config"]["digest"])))
        tags = [m.get("annotations", {}).get("org.opencontainers.image.ref.name", "") for m in mans]
        return [_blob(layer["digest"]) for layer in man["layers"]], config, [t for t in tags if t]
    if src.has("manifest.json"):  # docker save (v1.2)
        man = json.loads(src.read("manifest.json"))[0]
        return list(man["Layers"]), json.loads(src.read(man["Config"])), list(man.get("RepoTags") or [])
    raise ImageError("neither index.json (OCI layout) nor manifest.json (docker save) found")


def _inside(root: str, rel: str) -> str:
    """``root/rel`` after refusing absolute paths, ``..`` and paths through symlinks in the layer."""
    rel = rel.lstrip("./") if rel.startswith("./") else rel
    if rel.startswith("/") or any(p == ".." for p in rel.split("/")):
        raise ImageError(f"layer member {rel!r} leaves the layer")
    cur = root
    parts = [p for p in rel.split("/") if p]
    for p in parts[:-1]:
        cur = os.path.join(cur, p)
        if os.path.islink(cur):
            raise ImageError(f"layer member {rel!r} goes through a symlink")
    return os.path.join(root, *parts) if parts else root


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _decompress(data: bytes) -> bytes:
    """A layer blob as a plain tar: gzip and zstd are recognised by their magic bytes (media types
    lie in the wild: docker save writes ``.tar`` names for any compression)."""
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data)
    if data[:4] == _ZSTD_MAGIC:
        try:
            import zstandard
        except ImportError:
            raise ImageError("a zstd-compressed layer needs the 'zstandard' package (pip install zstandard)") from None
        out = io.BytesIO()
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as r:  # frames without a size
            shutil.copyfileobj(r, out)
        return out.getvalue()
    return data


def _extract_layer(data: bytes, dest: str) -> None:
    """Apply one layer tar into the empty directory ``dest`` (overlay whiteouts and opaque dirs)."""
    data = _decompress(data)
    root_owned = os.geteuid() == 0
    dirs = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar:
            name = m.name[2:] if m.name.startswith("./") else m.name
            if not name or name == ".":
                continue
            base = os.path.basename(name.rstrip("/"))
            parent = os.path.dirname(name.rstrip("/"))
            if base == ".wh..wh..opq":
                d = _inside(dest, parent) if parent else dest
                os.makedirs(d, exist_ok=True)
                os.setxattr(d, OPAQUE_XATTR, b"y")
                continue
            if base.startswith(".wh."):
                target = _inside(dest, os.path.join(parent, base[4:]))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.mknod(target, stat.S_IFCHR | 0o000, 0)
                continue
            path = _inside(dest, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if m.isdir():
                os.makedirs(path, exist_ok=True)
                dirs.append((path, m))
            elif m.isfile():
                with open(path, "wb") as f:
                    shutil.copyfileobj(tar.extractfile(m), f)
            elif m.issym():
                os.symlink(m.linkname, path)
            elif m.islnk():
                os.link(_inside(dest, m.linkname), path)
            else:
                continue  # devices/FIFOs in an image layer are not needed to run code
            if not m.issym():
                os.chmod(path, m.mode & 0o7777)
                os.utime(path, (m.mtime, m.mtime))
            if root_owned:
                os.chown(path, m.uid, m.gid, follow_symlinks=False)
    for path, m in reversed(dirs):
        os.chmod(path, m.mode & 0o7777)
        os.utime(path, (m.mtime, m.mtime))


def import_image(source: str | os.PathLike, name: str | None = None,
                 state_root: str | os.PathLike | None = None) -> Image:
    """Import a ``docker save`` tar or an OCI layout (dir or tar) as ``name`` (default: its tag)."""
    from neurips26.nitrobox import runtime

    root = runtime.ensure_state_root(str(state_root or runtime.default_state_root()))
    src = _Source(source)
    layers, config, tags = _manifest(src)
    name = name or (tags[0] if tags else None)
    if not name:
        raise ValueError("the archive has no tag: pass name='repo:tag'")
    cache = root / "images" / "layers"
    cache.mkdir(parents=True, exist_ok=True)
    dirs = []
    for lay in layers:
        data = src.read(lay)
        digest = hashlib.sha256(data).hexdigest()
        d = cache / digest
        if not d.is_dir():
            tmp = cache / f".tmp-{uuid.uuid4().hex}"
            tmp.mkdir()
            try:
                _extract_layer(data, str(tmp))
                os.rename(tmp, d)
            except FileExistsError:
                shutil.rmtree(tmp, ignore_errors=True)  # imported meanwhile by someone else
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        dirs.append(str(d))
    cfg = config.get("config") or config.get("Config") or {}
    ref = {"name": name, "layers": dirs[::-1],  # top first, as overlay's lowerdir lists them
           "config": {k: cfg.get(k) for k in ("Env", "WorkingDir", "User", "Entrypoint", "Cmd")}}
    refs = _refs_dir(root)
    refs.mkdir(parents=True, exist_ok=True)
    tmp = refs / f".tmp-{uuid.uuid4().hex}"
    tmp.write_text(json.dumps(ref, indent=1))
    os.replace(tmp, _ref_file(root, name))
    return _image_of(ref)


def _image_of(ref: dict) -> Image:
    layers = ref["layers"]
    if not layers:
        raise ImageError(f"image {ref['name']!r} has no layers")
    return Image(layers[0], False, ref["name"], tuple(layers[1:]), ref.get("config") or {})


def find_image(name: str, state_root: str | os.PathLike) -> Image | None:
    """The imported image ``name`` under ``state_root``, or ``None``."""
    try:
        p = _ref_file(state_root, name)
    except ValueError:
        return None
    if not p.is_file():
        return None
    ref = json.loads(p.read_text())
    for d in ref["layers"]:
        if not os.path.isdir(d):
            raise ImageError(f"layer {d} of image {name!r} is missing: re-import it")
    return _image_of(ref)


def image_env(image: Image) -> dict[str, str]:
    """The image config's ``Env`` as a dict (``KEY=VALUE`` entries)."""
    out: dict[str, Any] = {}
    for e in (image.config or {}).get("Env") or []:
        k, _, v = e.partition("=")
        if k:
            out[k] = v
    return out


def image_command(image: Image, command: Any = None, entrypoint: Any = None) -> list[str] | None:
    """The argv ``docker run IMAGE [COMMAND]`` runs: ``Entrypoint + (command or Cmd)``.

    ``command``/``entrypoint`` (a list, or a str split like a shell would) override the image's
    ``Cmd``/``Entrypoint``; ``entrypoint=""`` or ``[]`` clears it. ``None`` when there is nothing to run.
    """
    import shlex

    def argv(x: Any, what: str) -> list[str] | None:
        if x is None:
            return None
        if isinstance(x, str):
            return shlex.split(x)
        if isinstance(x, (list, tuple)) and all(isinstance(a, str) for a in x):
            return list(x)
        raise TypeError(f"{what} must be a str or a list of str, got {x!r}")

    cfg = (image.config if image is not None else None) or {}
    ep = argv(entrypoint, "entrypoint")
    if ep is None:
        ep = argv(cfg.get("Entrypoint"), "image Entrypoint") or []
    cmd = argv(command, "command")
    if cmd is None:
        # docker: an overridden entrypoint drops the image's Cmd
        cmd = [] if entrypoint is not None else (argv(cfg.get("Cmd"), "image Cmd") or [])
    out = ep + cmd
    return out or None


# ------------------------------------------------------------------------- registry pull (OCI API)
_ACCEPT = ", ".join(("application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
                     "application/vnd.docker.distribution.manifest.v2+json",
                     "application/vnd.docker.distribution.manifest.list.v2+json"))


def _split_ref(ref: str) -> tuple[str, str, str]:
    """``host[:port]/repo[:tag|@digest]`` -> (registry, repository, tag or digest)."""
    if "/" not in ref:
        raise ValueError(f"reference must name a registry, like 'localhost:5000/repo:tag', got {ref!r}")
    host, _, rest = ref.partition("/")
    if "@" in rest:
        repo, _, tag = rest.partition("@")
    elif ":" in rest.rsplit("/", 1)[-1]:
        repo, _, tag = rest.rpartition(":")
    else:
        repo, tag = rest, "latest"
    return host, repo, tag


class _Registry:
    """The few OCI distribution API calls a pull needs, with Bearer token auth (RFC 6750 challenge)."""

    def __init__(self, host: str, insecure: bool | None = None, timeout: float = 60.0,
                 auth: tuple[str, str] | None = None):
        local = host.split(":")[0] in ("localhost", "127.0.0.1", "::1")
        self.base = f"{'http' if (insecure if insecure is not None else local) else 'https'}://{host}"
        self.timeout = timeout
        self.auth = auth
        self.token: str | None = None

    def get(self, path: str, accept: str | None = None) -> tuple[bytes, dict]:
        import urllib.error
        import urllib.request

        for attempt in (0, 1):
            req = urllib.request.Request(self.base + path)
            if accept:
                req.add_header("Accept", accept)
            if self.token:
                req.add_header("Authorization", f"Bearer {self.token}")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return r.read(), dict(r.headers)
            except urllib.error.HTTPError as e:
                if e.code == 401 and attempt == 0 and self._login(e.headers.get("WWW-Authenticate", "")):
                    continue
                raise ImageError(f"registry {self.base}: GET {path}: HTTP {e.code} {e.reason}") from None
            except urllib.error.URLError as e:
                raise ImageError(f"registry {self.base} unreachable: {e.reason}") from None
        raise ImageError(f"registry {self.base}: GET {path}: unauthorized")

    def _login(self, challenge: str) -> bool:
        """The distribution token flow: the 401's ``WWW-Authenticate: Bearer realm=..,service=..,
        scope=..`` -> GET realm?service=..&scope=.. (HTTP Basic with ``auth`` if given, else anonymous)
        -> ``{"token"|"access_token": ...}``, sent as ``Authorization: Bearer`` on the retry."""
        import base64
        import re
        import urllib.error
        import urllib.parse
        import urllib.request

        if not challenge.lower().startswith("bearer "):
            return False
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm", None)
        if not realm:
            return False
        url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(params)
        req = urllib.request.Request(url)
        if self.auth is not None:
            user, password = self.auth
            req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise ImageError(f"registry {self.base}: token endpoint {realm}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, ValueError) as e:
            raise ImageError(f"registry {self.base}: token endpoint {realm}: {e}") from None
        self.token = body.get("token") or body.get("access_token")
        return bool(self.token)


def pull(reference: str, name: str | None = None, state_root: str | os.PathLike | None = None,
         insecure: bool | None = None, platform: str = "linux/amd64",
         auth: tuple[str, str] | None = None) -> Image:
    """Pull ``host/repo:tag`` from an OCI registry (plain HTTP for localhost unless ``insecure=False``)
    into the layer cache and import it as ``name`` (default: the reference). Digests are verified.
    ``auth=(user, password)``: credentials for the registry's token endpoint (anonymous otherwise)."""
    import tempfile

    if auth is not None and not (isinstance(auth, tuple) and len(auth) == 2 and all(isinstance(a, str) for a in auth)):
        raise ValueError(f"auth must be a (user, password) tuple of str, got {type(auth).__name__}")
    host, repo, tag = _split_ref(reference)
    reg = _Registry(host, insecure, auth=auth)
    body, headers = reg.get(f"/v2/{repo}/manifests/{tag}", _ACCEPT)
    man = json.loads(body)
    if "manifests" in man:  # an index: the entry for our platform
        os_, _, arch = platform.partition("/")
        pick = next((m for m in man["manifests"] if m.get("platform", {}).get("os") == os_
                     and m.get("platform", {}).get("architecture") == arch), None)
        if pick is None:
            raise ImageError(f"{reference}: no manifest for {platform}")
        body, _ = reg.get(f"/v2/{repo}/manifests/{pick['digest']}", _ACCEPT)
        man = json.loads(body)
    with tempfile.TemporaryDirectory(prefix="nbx-pull-") as tmp:
        blobs = Path(tmp) / "blobs" / "sha256"
        blobs.mkdir(parents=True)
        for desc in [man["config"]] + list(man["layers"]):
            data, _ = reg.get(f"/v2/{repo}/blobs/{desc['digest']}")
            algo, _, hexd = desc["digest"].partition(":")
            if algo != "sha256" or hashlib.sha256(data).hexdigest() != hexd:
                raise ImageError(f"{reference}: blob {desc['digest']} does not match its digest")
            (blobs / hexd).write_bytes(data)
        mdig = hashlib.sha256(body).hexdigest()
        (blobs / mdig).write_bytes(body)
        (Path(tmp) / "index.json").write_text(json.dumps(
            {"schemaVersion": 2, "manifests": [{"digest": "sha256:" + mdig, "size": len(body)}]}))
        return import_image(tmp, name or reference, state_root)
