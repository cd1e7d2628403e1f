"""bkctl.ops.ledgers.tail_ledger over fake blocking handles: long polls over
v3 (what comes along is printed at once, an idle wait checks for a close),
LAC polling over v2."""

from types import SimpleNamespace

from bkctl.ops.ledgers import tail_ledger


class FakeReader:
    """A ledger being written: ``script`` says what each long poll sees."""

    def __init__(self, script, lac=-1):
        self.entries = {}
        self.lac = lac
        self.closed_at = None  # last entry once closed
        self.script = list(script)
        self.calls = []

    # the blocking handle's surface tail_ledger uses
    @property
    def is_closed(self):
        return self.closed_at is not None and self.metadata_closed

    metadata_closed = False

    @property
    def last_entry_id(self):
        return self.closed_at if self.is_closed else None

    @property
    def last_add_confirmed(self):
        return self.lac

    def read_range(self, first, last, batch=100):
        self.calls.append(("read", first, last))
        assert last <= (self.closed_at if self.is_closed else self.lac)  # never past the LAC
        yield [(i, self.entries[i]) for i in range(first, last + 1)]

    def wait_for_entry(self, entry_id, timeout_ms):
        self.calls.append(("poll", entry_id))
        step = self.script.pop(0)
        step(self)
        if self.lac >= entry_id and ("along", entry_id) in self.__dict__.get("along", set()):
            return self.lac, (entry_id, self.entries[entry_id])
        return self.lac, None

    def refresh_metadata(self):
        self.calls.append(("refresh",))
        self.metadata_closed = self.closed_at is not None

    def read_lac(self):
        self.calls.append(("read_lac",))
        step = self.script.pop(0)
        step(self)
        return self.lac


def add(n, along=True):
    """The writer adds entries up to ``n`` and they are confirmed; the poll
    gets the first of them along when ``along``."""

    def step(r):
        first = r.lac + 1
        for i in range(first, n + 1):
            r.entries[i] = b"e%d" % i
        r.lac = n
        if along:
            r.__dict__.setdefault("along", set()).add(("along", first))

    return step


def idle(r):
    pass


def close(last):
    def step(r):
        for i in range(r.lac + 1, last + 1):
            r.entries[i] = b"e%d" % i
        r.closed_at = last

    return step


def bk_for(reader, protocol="v3"):
    return SimpleNamespace(client=SimpleNamespace(protocol=protocol), open=lambda lid, pw: reader)


def test_v3_long_polls_print_what_comes_along_and_stop_once_closed():
    r = FakeReader([add(0), add(3), idle, close(4), idle], lac=-1)
    got = list(tail_ledger(bk_for(r), 7, first=0, sleep=lambda s: None))
    assert got == [(i, b"e%d" % i) for i in range(5)]
    # entry 0 came along; 1..3 were read once the LAC said so; an idle wait checked the metadata;
    # the close was noticed by the next idle wait and the rest read
    assert r.calls == [
        ("poll", 0),
        ("poll", 1),
        ("read", 2, 3),
        ("poll", 4),
        ("refresh",),
        ("poll", 4),
        ("refresh",),
        ("read", 4, 4),
    ]


def test_v2_polls_the_lac_every_interval():
    r = FakeReader([add(1), idle, close(2)], lac=-1)
    slept = []
    got = list(tail_ledger(bk_for(r, "v2"), 7, first=0, interval=0.25, sleep=slept.append))
    assert got == [(0, b"e0"), (1, b"e1"), (2, b"e2")]
    assert ("poll", 0) not in r.calls and slept == [0.25, 0.25, 0.25]  # one per round until closed
