"""Replay every request the Java client sent to the three Java bookies, in capture order,
to three bookieds standing in for them; each must answer as the Java bookie answered."""

from collections import defaultdict

from bkctl.wire.codecs import v2, v3
from tests.support.bookieproc import BookieProcess, WireClient
from tests.support.golden import frames


def key_of(proto: str, msg) -> tuple:
    """How a client matches a response to its request."""
    if proto == "v3":
        return (msg.header.operation, msg.header.txnId)
    if isinstance(msg, (v2.BatchReadRequest, v2.BatchReadResponse)):
        return ("batch", msg.request_id)
    kind = "add" if isinstance(msg, (v2.AddRequest, v2.AddResponse)) else "read"
    return (kind, msg.ledger_id, msg.entry_id)


def decode(f):
    payload = f["raw"][4:]
    if f["proto"] == "v3":
        return (v3.parse_request if f["kind"] == "request" else v3.parse_response)(payload)
    return (v2.decode_request if f["kind"] == "request" else v2.decode_response)(payload)


def outcome(proto: str, msg) -> dict:
    """What must agree: the status and every entry byte returned."""
    if proto == "v2":
        out = {"rc": msg.rc}
        if isinstance(msg, v2.ReadResponse):
            out["body"] = msg.body
        if isinstance(msg, v2.BatchReadResponse):
            out["entries"] = list(msg.entries)
        return out
    out = {"status": msg.status}
    if msg.HasField("readResponse"):
        r = msg.readResponse
        out.update(
            inner=r.status,
            entry=r.entryId,
            body=r.body if r.HasField("body") else None,
            max_lac=r.maxLAC if r.HasField("maxLAC") else None,
        )
    if msg.HasField("readLacResponse"):
        r = msg.readLacResponse
        out.update(
            inner=r.status,
            lac=r.lacBody if r.HasField("lacBody") else None,
            last=r.lastEntryBody if r.HasField("lastEntryBody") else None,
        )
    for field in ("addResponse", "writeLacResponse", "forceLedgerResponse"):
        if msg.HasField(field):
            out["inner"] = getattr(msg, field).status
    return out


def test_bookieds_answer_the_java_clients_requests_as_java_bookies_did(tmp_path, metadata_uri):
    captured = sorted(frames(), key=lambda f: f["t"])
    ports = sorted({f["bookiePort"] for f in captured})
    stand_ins = {p: BookieProcess(tmp_path / f"bk{p}", metadata_uri).start() for p in ports}
    conns: dict[str, WireClient] = {}
    unmatched: dict[str, dict] = defaultdict(dict)
    compared = 0
    try:
        for f in captured:
            client_port = f["conn"].replace("<-", "->").split("->")[0]
            conn_key = f"{client_port}:{f['bookiePort']}"
            if f["kind"] == "request":
                if conn_key not in conns:
                    conns[conn_key] = WireClient(stand_ins[f["bookiePort"]].port, timeout=10)
                conns[conn_key].sock.sendall(f["raw"])  # the Java client's exact bytes
                continue
            expected = decode(f)
            want = key_of(f["proto"], expected)
            client = conns[conn_key]
            pending = unmatched[conn_key]
            while want not in pending:
                payload = client.recv()
                msg = v3.parse_response(payload) if f["proto"] == "v3" else v2.decode_response(payload)
                pending.setdefault(key_of(f["proto"], msg), []).append(msg)
            got = pending[want].pop(0)
            if not pending[want]:
                del pending[want]
            assert outcome(f["proto"], got) == outcome(f["proto"], expected), (
                f"{f['flow']} #{f['index']} ({f['type']}, phase {f['phase']!r})"
            )
            compared += 1
    finally:
        for c in conns.values():
            c.close()
        for b in stand_ins.values():
            b.kill()
    assert compared == sum(1 for f in captured if f["kind"] == "response")
    assert not any(unmatched.values()), f"answers the Java bookies never gave: {dict(unmatched)}"
