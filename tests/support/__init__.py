"""What the tests share (as kazoo keeps its in ``kazoo.testing``): :mod:`.fake_store`, the in-memory metadata store; :mod:`.threads`, a reactor clock whose thread pool the test drives."""
