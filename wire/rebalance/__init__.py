"""Moving replicas between live bookies with never a copy fewer: ``bkctl rebalance``
(even out the bookies' live bytes, or with ``--fix-placement`` bring ensembles back
within the placement policy) and ``bkctl drain`` (empty one bookie while it still serves).

* :mod:`.survey` reads the cluster in one walk of the ledger metadata: each bookie's live
  bytes and the replicas that could move (:class:`~.survey.ClusterSurvey`);
* :mod:`.plan` decides the moves from that alone (pure: no I/O);
* :mod:`.mover` carries a move out: the replica's entries copied from live copies to the
  target (digests verified), then the bookie replaced in the ledger's ensemble by one
  version-checked metadata write, all under the ledger's replication lock.  Until that
  write the ledger is as it was; after it, the source's copy is garbage its bookie
  collects (over-replicated ledgers).
"""
