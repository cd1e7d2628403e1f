"""Local throw-away BookKeeper clusters: a real ZooKeeper plus bookied processes."""
