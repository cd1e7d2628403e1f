"""A bookie's directories on disk, as BookKeeper lays them out and bookied stamps them: the
``current/`` layout, each directory's ``VERSION`` cookie and bookied's layout stamp
(:mod:`.layout`), and the start-up check of those cookies against ZooKeeper's (:mod:`.identity`).

bookied reads and writes them at start-up; ``bkctl bookie format``, ``bkctl upgrade`` and
``bkctl cookie admin`` read and rewrite the same files, offline: both import them from here.
"""
