"""Ledger fsck: where the metadata and the bookies disagree (``bkctl ledger fsck``).

:mod:`.findings` names what can be wrong with a ledger (one cause each, ranked),
:mod:`.check` asks a ledger's bookies what they hold and finds that cause,
:mod:`.bookie_only` finds the ledgers bookies hold that no metadata names,
:mod:`.fixes` writes the guarded metadata repairs.
"""
