"""Codec throughput: v2 ADD and v3 ADD_ENTRY frames encoded + decoded per second.

Each iteration packages a 100-byte payload with a CRC32C digest, encodes the
request frame, decodes it (framing + message), and encodes + decodes the
response, i.e. what a client and a bookie together do per add.  Prints
figures; asserts nothing.

    python bench/bench_codecs.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import time

from bkctl.wire.codecs import v2, v3
from bkctl.wire.codecs.digest import DigestManager, DigestType, master_key
from bkctl.wire.codecs.framing import FrameDecoder, frame
from bkctl.wire.codecs.protocol import RC

PAYLOAD = b"x" * 100


def bench(name: str, fn, seconds: float) -> None:
    n = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        for _ in range(1000):
            fn(n)
            n += 1
    elapsed = time.perf_counter() - start
    print(f"{name:48s} {n / elapsed:>12,.0f} /s   ({elapsed / n * 1e6:.2f} us each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    seconds = parser.parse_args().seconds
    dm = DigestManager(1, DigestType.CRC32C, b"password")
    key = master_key(b"password")
    decoder = FrameDecoder()

    def v2_round(i: int) -> None:
        body = dm.package(i, i - 1, 100 * (i + 1), PAYLOAD)
        [payload] = decoder.feed(frame(v2.AddRequest(2, 0, key, body, 1, i).encode()))
        req = v2.decode_request(payload)
        [payload] = decoder.feed(frame(v2.add_response_for(req, RC.EOK)))
        v2.decode_response(payload)

    def v3_round(i: int) -> None:
        body = dm.package(i, i - 1, 100 * (i + 1), PAYLOAD)
        [payload] = decoder.feed(frame(v3.serialize(v3.add_request(i, 1, i, key, body))))
        req = v3.parse_request(payload)
        [payload] = decoder.feed(frame(v3.serialize(v3.add_response(req, RC.EOK))))
        v3.parse_response(payload)

    def v2_request_only(i: int) -> None:
        body = dm.package(i, i - 1, 100 * (i + 1), PAYLOAD)
        [payload] = decoder.feed(frame(v2.AddRequest(2, 0, key, body, 1, i).encode()))
        v2.decode_request(payload)

    def v3_request_only(i: int) -> None:
        body = dm.package(i, i - 1, 100 * (i + 1), PAYLOAD)
        [payload] = decoder.feed(frame(v3.serialize(v3.add_request(i, 1, i, key, body))))
        v3.parse_request(payload)

    bench("v2 ADD request: package+encode+frame+decode", v2_request_only, seconds)
    bench("v3 ADD_ENTRY request: package+encode+frame+decode", v3_request_only, seconds)
    bench("v2 ADD request+response round trip", v2_round, seconds)
    bench("v3 ADD_ENTRY request+response round trip", v3_round, seconds)


if __name__ == "__main__":
    main()
