"""Regenerate wire/proto/*_pb2.py (and their type stubs, *_pb2.pyi) from the .proto files beside them.

    python tools/genproto.py          # rewrite the generated modules
    python tools/genproto.py --check  # exit 1 if a generated module is stale

The generated modules are committed so that bookie hosts need no protoc, and their stubs
so that the type checker (``./dev lint``) knows the messages' fields; tests/repo/test_generated.py
runs --check.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

PROTO_DIR = pathlib.Path(__file__).resolve().parent.parent / "wire" / "proto"


def generate(out_dir: pathlib.Path) -> list[pathlib.Path]:
    from grpc_tools import protoc  # test/dev dependency only

    outputs = []
    for proto in sorted(PROTO_DIR.glob("*.proto")):
        rc = protoc.main(["protoc", f"-I{PROTO_DIR}", f"--python_out={out_dir}", f"--pyi_out={out_dir}", str(proto)])
        if rc != 0:
            raise SystemExit(f"protoc failed on {proto.name}")
        outputs += [out_dir / (proto.stem + "_pb2.py"), out_dir / (proto.stem + "_pb2.pyi")]
    return outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale modules, write nothing")
    args = parser.parse_args(argv)
    if not args.check:
        for path in generate(PROTO_DIR):
            print(f"wrote {path.relative_to(PROTO_DIR.parent.parent)}")
        return 0
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        for fresh in generate(pathlib.Path(tmp)):
            committed = PROTO_DIR / fresh.name
            if not committed.exists() or committed.read_bytes() != fresh.read_bytes():
                stale.append(fresh.name)
    for name in stale:
        print(f"stale: wire/proto/{name} (run python tools/genproto.py)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
