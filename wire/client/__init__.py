"""Bookie client: per-bookie connections (:mod:`wire.client.connection`),
the pool that shares them (:mod:`wire.client.pool`) and the errors they
report (:mod:`wire.client.errors`).

Import the submodules directly; this package imports nothing (Twisted
included) so that ``wire.client.errors`` stays cheap to import.
"""
