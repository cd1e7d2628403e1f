"""The BookKeeper client, over Twisted, one operation per module as Java's ``client/``:

* :mod:`.bookkeeper` -- :class:`~.bookkeeper.BookKeeperClient`: creating, opening,
  deleting ledgers; the append lock;
* :mod:`.read_handle` -- reading a ledger, with one module per read
  operation, as Java's: :mod:`.entry_reads` (entries with failover,
  PendingReadOp), :mod:`.batch_reads` (BATCH_READ_ENTRY, BatchedReadOp),
  :mod:`.read_lac_quorum` (the LAC, ReadLastConfirmedOp),
  :mod:`.long_poll_read` (the next entry, ReadLastConfirmedAndEntryOp),
  :mod:`.range_reader` (a range batch by batch); what they need of the
  handle is declared in :mod:`.readable_ledger`;
* :mod:`.ledger_handle` -- writing a ledger (quorum adds, ensemble changes, close);
* :mod:`.ledger_recovery` -- finding an open ledger's tail: ledger recovery
  (fence and close) and resuming for appends;
* :mod:`.rereplication` -- re-replication: copying lost bookies' fragments
  (:mod:`.fragments`: which, worked out from the metadata);
* :mod:`.ledger_admin` -- fencing without closing, a bookie's own view;
  :mod:`.credentials` -- the one rule for a ledger's password and digest type;
* :mod:`.quorum` -- the quorum schedule (write sets, ack quorum, coverage);
* :mod:`.channel` -- what handles need from a connection;
  :mod:`.connection` -- the connection to one bookie, with its parts:
  :mod:`.client_protocol` (bytes to answers; what it may call on its
  connection is declared there, ``ConnectionOwner``), :mod:`.requests`
  (matching answers to requests), :mod:`.entry_requests` (building ADD and
  READ requests, general and fast), :mod:`.dialer` (connection attempts,
  with :mod:`.start_tls`), :mod:`.deadlines`
  (timeouts), :mod:`.backoff`, :mod:`.cork` (writes held during a burst);
  :mod:`.pool` -- one connection per bookie;
* :mod:`.placement` -- choosing bookies; :mod:`.blocking` -- a blocking facade;
* :mod:`.errors` -- every error of the client; :mod:`.helpers` -- small shared helpers.

Import the submodules directly; this package imports nothing (Twisted
included) so that ``bkctl.wire.client.errors`` stays cheap to import.
"""
