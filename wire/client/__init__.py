"""The BookKeeper client, over Twisted, one operation per module as Java's ``client/``:

* :mod:`.bookkeeper` -- :class:`~.bookkeeper.BookKeeperClient`: creating, opening,
  deleting ledgers; the append lock;
* :mod:`.read_handle` -- reading a ledger (entries, ranges, the LAC);
  :mod:`.range_reader` -- a range batch by batch;
* :mod:`.ledger_handle` -- writing a ledger (quorum adds, ensemble changes, close);
* :mod:`.ledger_recovery` -- finding an open ledger's tail: ledger recovery
  (fence and close) and resuming for appends;
* :mod:`.rereplication` -- re-replication: copying lost bookies' fragments;
* :mod:`.ledger_admin` -- credentials, fencing without closing, a bookie's own view;
* :mod:`.channel` -- what handles need from a connection;
  :mod:`.connection` -- the connection to one bookie, with its parts:
  :mod:`.client_protocol` (bytes to answers), :mod:`.requests` (matching
  answers to requests), :mod:`.deadlines` (timeouts), :mod:`.backoff`,
  :mod:`.start_tls`; :mod:`.pool` -- one connection per bookie;
* :mod:`.placement` -- choosing bookies; :mod:`.blocking` -- a blocking facade;
* :mod:`.errors` -- every error of the client.

Import the submodules directly; this package imports nothing (Twisted
included) so that ``bkctl.wire.client.errors`` stays cheap to import.
"""
