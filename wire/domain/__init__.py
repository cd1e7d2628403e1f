"""The domain rules every command shares about a cluster's ledgers and Pulsar's topics.

The codecs (:mod:`bkctl.wire.codecs`, :mod:`bkctl.wire.pulsar`) say what the bytes mean; this
package says what they add up to, read through the metadata store and the client: what a
topic holds and what its cursors have not acknowledged (:mod:`.topic_state`), who owns a
ledger (:mod:`.ownership`), which Pulsar ledgers nothing lists (:mod:`.orphans`), which
entries of a topic a window of publish times and the offload read priority select
(:mod:`.topic_window`), which owner each byte on a bookie belongs to
(:mod:`.disk_attribution`), and which entries of which ledgers an export reads and how they are
cut into tasks (:mod:`.ledger_plan`).  Commands (``bkctl pulsar``,
``bkctl disk``, ``bkctl ledger delete``, ``bkctl export --topic``, backup, rebalance...) call
these and render their typed results; none of it knows of click or rich.
"""
