"""``neurips26 nitrobox ...``: ``shell`` into a fresh sandbox, ``exec`` one command, ``features``,
``cleanup`` of leaked state dirs. User errors: one line on stderr, exit code 2."""

from __future__ import annotations

import argparse
import json
import sys

from neurips26.harness.cliutil import OneLineParser, run_main


def _sandbox_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", default="host", help="'host' (default), an imported image name:tag, or a rootfs directory")
    p.add_argument("--memory", help="memory limit, e.g. 512m")
    p.add_argument("--pids", type=int, help="max processes")
    p.add_argument("--disk-limit", help="size of the per-sandbox tmpfs upper, e.g. 1g")
    p.add_argument("--network", choices=("none", "host"), default="none")
    p.add_argument("--state-root", help="state directory (default /dev/shm/neurips26-nbx-<uid>)")
    p.add_argument("--workdir", default="/workspace", help="working directory inside")


def _config(a) -> dict:
    cfg = {"image": a.image, "network": a.network, "working_dir": a.workdir}
    for k in ("memory", "pids", "disk_limit", "state_root"):
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    return cfg


def main(argv: list[str] | None = None) -> int:
    return run_main("neurips26 nitrobox", _main, argv)


def _main(argv: list[str]) -> int:
    parser = OneLineParser(prog="neurips26 nitrobox",
                     description="Daemon-less copy-on-write sandboxes (NitroBox).")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=OneLineParser)
    sh = sub.add_parser("shell", help="a stateful shell in a fresh sandbox (deleted on exit)")
    _sandbox_args(sh)
    sh.add_argument("-c", dest="command", help="run this command and exit with its code")
    ex = sub.add_parser("exec", help="run one command in a fresh sandbox and delete it")
    _sandbox_args(ex)
    ex.add_argument("--timeout", type=float, help="seconds")
    ex.add_argument("command", nargs=argparse.REMAINDER, help="command (after --)")
    ft = sub.add_parser("features", help="print what this machine enforces (JSON)")
    _sandbox_args(ft)
    cl = sub.add_parser("cleanup", help="remove state dirs whose owner process is dead")
    cl.add_argument("--state-root", help="state directory (default /dev/shm/neurips26-nbx-<uid>)")
    cl.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    if args.cmd is None:
        parser.print_help()
        return 2

    from neurips26.nitrobox import Sandbox, SandboxError, maintenance

    if args.cmd == "cleanup":
        removed = maintenance.cleanup(args.state_root, dry_run=args.dry_run)
        for r in removed:
            print(("would remove " if args.dry_run else "removed ") + r)
        return 0
    try:
        sb = Sandbox(_config(args))
    except (ValueError, TypeError, SandboxError) as e:
        print(f"neurips26 nitrobox: error: {e}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "features":
            print(json.dumps(sb.features, indent=2))
            return 0
        if args.cmd == "exec":
            cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
            if not cmd:  # like `docker run IMAGE`: the imported image's Entrypoint + Cmd
                from neurips26.nitrobox.oci import image_command

                cmd = image_command(sb.image) or []
            if not cmd:
                print("neurips26 nitrobox: error: exec needs a command (after --), or an image with "
                      "an Entrypoint/Cmd", file=sys.stderr)
                return 2
            try:
                r = sb.exec(cmd if len(cmd) > 1 else cmd[0], timeout=args.timeout, merge_stderr=False,
                            on_output=_relay)
            except ValueError as e:
                print(f"neurips26 nitrobox: error: {e}", file=sys.stderr)
                return 2
            return r.exit_code
        # shell
        if args.command is not None:
            r = sb.exec(args.command, stateful=True, merge_stderr=False, on_output=_relay)
            return r.exit_code
        interactive = sys.stdin.isatty()
        code = 0
        if interactive:
            print(f"sandbox {sb.id} (exit or Ctrl-D to delete it)", file=sys.stderr)
        while True:
            if interactive:
                print("nbx$ ", end="", file=sys.stderr, flush=True)
            line = sys.stdin.readline()
            if not line or line.strip() in ("exit", "logout"):
                break
            if not line.strip():
                continue
            r = sb.exec(line.rstrip("\n"), stateful=True, merge_stderr=False, on_output=_relay)
            code = r.exit_code
        return code
    finally:
        sb.delete()


def _relay(stream: str, chunk: bytes) -> None:
    """Stream a command's stdout/stderr to ours as it arrives."""
    out = sys.stdout if stream == "stdout" else sys.stderr
    out.buffer.write(chunk)
    out.flush()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
