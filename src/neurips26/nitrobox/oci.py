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
Handled: plain and gzip layers. Not implemented: registry pull, zstd layers, the config's
WorkingDir/User/Entrypoint/Cmd (stored in the reference, not applied yet; Env is applied).
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


def _extract_layer(data: bytes, dest: str) -> None:
    """Apply one layer tar into the empty directory ``dest`` (overlay whiteouts and opaque dirs)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
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
