"""The committed *_pb2.py modules match their .proto files, and bookkeeper.proto
matches the fields of BookKeeper's bookkeeper-proto/src/main/proto/BookkeeperProtocol.proto."""

import pathlib
import subprocess
import sys

import pytest
from google.protobuf.descriptor import FieldDescriptor as FD

from bkctl.wire.proto import bookkeeper_pb2 as pb

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_generated_modules_are_fresh():
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "genproto.py"), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


REQ, OPT, REP = "required", "optional", "repeated"
I64, U64, U32, I32 = FD.TYPE_INT64, FD.TYPE_UINT64, FD.TYPE_UINT32, FD.TYPE_INT32
BYTES, STR, ENUM, MSG = FD.TYPE_BYTES, FD.TYPE_STRING, FD.TYPE_ENUM, FD.TYPE_MESSAGE

# message -> {field name: (number, type, label)}, transcribed from BookkeeperProtocol.proto (4.17.2)
SPEC = {
    "BKPacketHeader": {
        "version": (1, ENUM, REQ),
        "operation": (2, ENUM, REQ),
        "txnId": (3, U64, REQ),
        "priority": (4, U32, OPT),
    },
    "ContextPair": {"key": (1, STR, REQ), "value": (2, STR, REQ)},
    "Request": {
        "header": (1, MSG, REQ),
        "readRequest": (100, MSG, OPT),
        "addRequest": (101, MSG, OPT),
        "authRequest": (102, MSG, OPT),
        "writeLacRequest": (103, MSG, OPT),
        "readLacRequest": (104, MSG, OPT),
        "getBookieInfoRequest": (105, MSG, OPT),
        "startTLSRequest": (106, MSG, OPT),
        "forceLedgerRequest": (107, MSG, OPT),
        "getListOfEntriesOfLedgerRequest": (108, MSG, OPT),
        "requestContext": (200, MSG, REP),
    },
    "Response": {
        "header": (1, MSG, REQ),
        "status": (2, ENUM, REQ),
        "readResponse": (100, MSG, OPT),
        "addResponse": (101, MSG, OPT),
        "authResponse": (102, MSG, OPT),
        "writeLacResponse": (103, MSG, OPT),
        "readLacResponse": (104, MSG, OPT),
        "getBookieInfoResponse": (105, MSG, OPT),
        "startTLSResponse": (106, MSG, OPT),
        "forceLedgerResponse": (107, MSG, OPT),
        "getListOfEntriesOfLedgerResponse": (108, MSG, OPT),
    },
    "ReadRequest": {
        "flag": (100, ENUM, OPT),
        "ledgerId": (1, I64, REQ),
        "entryId": (2, I64, REQ),
        "masterKey": (3, BYTES, OPT),
        "previousLAC": (4, I64, OPT),
        "timeOut": (5, I64, OPT),
    },
    "AddRequest": {
        "flag": (100, ENUM, OPT),
        "ledgerId": (1, I64, REQ),
        "entryId": (2, I64, REQ),
        "masterKey": (3, BYTES, REQ),
        "body": (4, BYTES, REQ),
        "writeFlags": (5, I32, OPT),
    },
    "WriteLacRequest": {
        "ledgerId": (1, I64, REQ),
        "lac": (2, I64, REQ),
        "masterKey": (3, BYTES, REQ),
        "body": (4, BYTES, REQ),
    },
    "ReadLacRequest": {"ledgerId": (1, I64, REQ)},
    "GetBookieInfoRequest": {"requested": (1, I64, OPT)},
    "ForceLedgerRequest": {"ledgerId": (1, I64, REQ)},
    "GetListOfEntriesOfLedgerRequest": {"ledgerId": (1, I64, REQ)},
    "StartTLSRequest": {},
    "StartTLSResponse": {},
    "ReadResponse": {
        "status": (1, ENUM, REQ),
        "ledgerId": (2, I64, REQ),
        "entryId": (3, I64, REQ),
        "body": (4, BYTES, OPT),
        "maxLAC": (5, I64, OPT),
        "lacUpdateTimestamp": (6, I64, OPT),
    },
    "AddResponse": {"status": (1, ENUM, REQ), "ledgerId": (2, I64, REQ), "entryId": (3, I64, REQ)},
    "AuthMessage": {"authPluginName": (1, STR, REQ), "payload": (2, BYTES, REQ)},
    "WriteLacResponse": {"status": (1, ENUM, REQ), "ledgerId": (2, I64, REQ)},
    "ForceLedgerResponse": {"status": (1, ENUM, REQ), "ledgerId": (2, I64, REQ)},
    "ReadLacResponse": {
        "status": (1, ENUM, REQ),
        "ledgerId": (2, I64, REQ),
        "lacBody": (3, BYTES, OPT),
        "lastEntryBody": (4, BYTES, OPT),
    },
    "GetBookieInfoResponse": {
        "status": (1, ENUM, REQ),
        "totalDiskCapacity": (2, I64, OPT),
        "freeDiskSpace": (3, I64, OPT),
    },
    "GetListOfEntriesOfLedgerResponse": {
        "status": (1, ENUM, REQ),
        "ledgerId": (2, I64, REQ),
        "availabilityOfEntriesOfLedger": (3, BYTES, OPT),
    },
}


def label(fd):
    if fd.is_required:
        return REQ
    return REP if fd.is_repeated else OPT


def test_every_message_is_in_the_spec():
    assert set(pb.DESCRIPTOR.message_types_by_name) == set(SPEC)


@pytest.mark.parametrize("name", sorted(SPEC))
def test_message_fields_match_spec(name):
    desc = pb.DESCRIPTOR.message_types_by_name[name]
    got = {fd.name: (fd.number, fd.type, label(fd)) for fd in desc.fields}
    assert got == SPEC[name]


def test_enums_match_spec():
    from bkctl.wire.codecs.protocol import V3_STATUS, OperationType, ProtocolVersion

    def values(enum):
        return {v.name: v.number for v in enum.DESCRIPTOR.values}

    assert values(pb.ProtocolVersion) == {m.name: m.value for m in ProtocolVersion}
    assert values(pb.OperationType) == {m.name: m.value for m in OperationType}
    assert values(pb.StatusCode) == {rc.name: num for rc, num in V3_STATUS.items()}
    assert values(pb.ReadRequest.Flag) == {"FENCE_LEDGER": 1, "ENTRY_PIGGYBACK": 2}
    assert values(pb.AddRequest.Flag) == {"RECOVERY_ADD": 1}
    assert values(pb.GetBookieInfoRequest.Flags) == {"TOTAL_DISK_CAPACITY": 1, "FREE_DISK_SPACE": 2}
