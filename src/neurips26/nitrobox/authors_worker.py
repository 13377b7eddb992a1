"""Worker process for the authors' ``nitrobox`` 0.1.0 (PyPI, CPython 3.12 only) as a bench anchor.

Run by ``backends.AuthorsNitroboxBackend`` as ``<python3.12> authors_worker.py`` (it imports nothing
from ``neurips26``: our package needs Python 3.11's venv). One JSON request per stdin line, one JSON
reply per stdout line. Each reply carries ``t``, the seconds the operation took *inside* this
process, so the bench compares operation times without our pipe round trip.

Requests: ``create`` {image, workdir} -> {h}; ``exec`` {h, cmd} -> {code, out}; ``write`` {h, path,
b64}; ``read`` {h, path} -> {b64}; ``reset`` {h}; ``delete`` {h}; ``lifecycles`` {image, workdir, c,
total, execs} -> {per_s}; ``quit``.
"""

import base64
import importlib
import itertools
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def main() -> None:
    nbx = importlib.import_module("nitrobox")  # the authors' package, in this interpreter's venv
    # Its create asks an image registry for the image config even when the image is a rootfs
    # directory; offline that is a DNS timeout (~37 s per create here). For a directory there is no
    # registry config to find, so the lookup is skipped (a fairness fix, not a speed-up of theirs).
    rootfs = importlib.import_module("nitrobox.rootfs")
    lookup = rootfs.get_image_config
    rootfs.get_image_config = lambda image, *a, **k: None if os.path.isdir(str(image)) else lookup(image, *a, **k)
    env_dir = os.environ.get("NBX_AUTHORS_ENV", f"/dev/shm/nbx-authors-{os.getpid()}")
    boxes = {}
    ids = itertools.count()

    def make(req):
        cfg = nbx.SandboxConfig(image=req["image"], working_dir=req["workdir"], volumes=["/usr:/usr:ro"],
                                net_isolate=True, env_base_dir=env_dir)
        return nbx.Sandbox(cfg, name=f"anchor-{os.getpid()}-{next(ids)}")

    def lifecycle(req):
        sb = make(req)
        for _ in range(req["execs"]):
            sb.run("echo x")
        sb.reset()
        sb.run("echo y")
        sb.delete()

    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        rep = {}
        t = time.perf_counter()
        try:
            if op == "create":
                h = str(next(ids))
                boxes[h] = make(req)
                rep["h"] = h
            elif op == "exec":
                out, code = boxes[req["h"]].run(req["cmd"])
                rep.update(code=code, out=out)
            elif op == "write":
                boxes[req["h"]].write_file(req["path"], base64.b64decode(req["b64"]))
            elif op == "read":
                data = boxes[req["h"]].read_file(req["path"])
                rep["b64"] = base64.b64encode(data.encode() if isinstance(data, str) else data).decode()
            elif op == "reset":
                boxes[req["h"]].reset()
            elif op == "delete":
                boxes.pop(req["h"]).delete()
            elif op == "lifecycles":
                with ThreadPoolExecutor(max_workers=req["c"]) as pool:
                    list(pool.map(lambda _: lifecycle(req), range(req["total"])))
                rep["per_s"] = req["total"] / (time.perf_counter() - t)
            elif op == "version":
                rep["version"] = getattr(nbx, "__version__", "?")
            elif op == "quit":
                for sb in boxes.values():
                    sb.delete()
                print(json.dumps({"ok": True}), flush=True)
                return
            else:
                raise ValueError(f"unknown op {op!r}")
            rep["ok"] = True
        except Exception as e:  # noqa: BLE001 - reported to the parent
            rep = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        rep["t"] = time.perf_counter() - t
        print(json.dumps(rep), flush=True)


if __name__ == "__main__":
    main()
