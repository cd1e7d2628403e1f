"""What the tests share (as kazoo keeps its in ``kazoo.testing``): :mod:`.fake_store`, the in-memory metadata store."""
