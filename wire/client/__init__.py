"""Bookie client: per-bookie connections (:mod:`bkctl.wire.client.connection`),
the pool that shares them (:mod:`bkctl.wire.client.pool`) and the errors they
report (:mod:`bkctl.wire.client.errors`).

Import the submodules directly; this package imports nothing (Twisted
included) so that ``bkctl.wire.client.errors`` stays cheap to import.
"""
