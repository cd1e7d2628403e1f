"""The "Examples" of every command's --help and man page, in one place.

Keyed by the command's path; :func:`attach` puts them on the commands (an
``Examples:`` epilog for ``--help``, ``cmd.examples`` for tools/gen_docs.py).
A new command gets its examples by adding a key here (a unit test checks
that every command has some and that they parse).
"""

from __future__ import annotations

import click

EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "ledger list": [
        ("bkctl ledger list", "every ledger id"),
        ("bkctl ledger list --state open", "open ledgers, with their LAC"),
        ("bkctl ledger list --bookie 10.0.0.3:3181 --json", "ledgers on a bookie, as JSON lines"),
        (
            "bkctl ledger list --meta 'pulsar/managed-ledger=public/default/*' --totals",
            "a namespace's ledgers, with totals",
        ),
        ("bkctl ledger list --open-longer-than 1d", "ledgers left open"),
        ("bkctl ledger list --not-adhering --placement rack", "ledgers whose ensembles break rack spread"),
    ],
    "ledger show": [
        ("bkctl ledger show 42", "metadata, and the LAC if it is open"),
        ("bkctl ledger show 42 --json | jq .segments", "its ensembles"),
    ],
    "ledger delete": [
        ("bkctl ledger delete 42", "asks first on a terminal"),
        ("bkctl ledger delete 42 --force", "in a script"),
        ("bkctl ledger delete 100-199 --dry-run", "what would go, what Pulsar still uses"),
        ("bkctl pulsar orphans --json | bkctl ledger delete - --force", "clean up every orphan"),
    ],
    "ledger fsck": [
        ("bkctl ledger fsck", "every ledger against its bookies; exit 0 when clean"),
        ("bkctl --json ledger fsck | jq -c 'select(.kind == \"data_lost\")'", "what is lost, for a script"),
        ("bkctl ledger fsck 100-199 --all", "compare every entry's replicas"),
        ("bkctl ledger fsck --fix mark --fix ensemble --fix unmark --dry-run", "what the repairs would write"),
    ],
    "ledger create": [
        ("bkctl ledger create", "3/2/2, CRC32C, empty password; prints the id"),
        ("bkctl ledger create -e 5 -w 3 -a 2 --meta app=orders", "with custom metadata"),
    ],
    "ledger add": [
        ("bkctl ledger add 42 hello world", "two entries"),
        ("seq 1 1000 | bkctl ledger add 42 -", "one entry per line of stdin"),
        ("bkctl ledger add 42 -f image.png --binary", "a whole file as one entry"),
    ],
    "ledger read": [
        ("bkctl ledger read 42", "every confirmed entry"),
        ("bkctl ledger read 42 --from 100 --to 199 --format hex", "a range, in hex"),
        ("bkctl ledger read 42 --json | head -1", "the first entry as JSON"),
        ("bkctl ledger read 42 --bookie 10.0.0.3:3181", "one replica, straight from its bookie"),
    ],
    "ledger close": [("bkctl ledger close 42", "recover and close an open ledger")],
    "ledger fence": [("bkctl ledger fence 42", "stop its writer without closing it")],
    "ledger recover": [("bkctl ledger recover 42", "fence, write the tail back, close")],
    "ledger tail": [
        ("bkctl ledger tail 42", "follow new entries until Ctrl-C"),
        ("bkctl ledger tail 42 --from 0 --json", "from the start, as JSON lines"),
    ],
    "bookie list": [
        ("bkctl bookie list", "every bookie with its state"),
        ("bkctl bookie list --readonly --down", "only read-only and down bookies"),
        ("bkctl bookie list --disk", "free and used disk, with the cluster's total"),
    ],
    "bookie info": [("bkctl bookie info 10.0.0.3:3181", "registration, cookie, endpoints, disk")],
    "bookieformat": [
        ("bkctl bookieformat -c /etc/bookkeeper/bk_server.conf", "wipe a stopped bookie's data"),
        ("bkctl bookieformat -c bk_server.conf --force --delete-cookie", "and its cookie, no questions"),
    ],
    "upgrade": [
        ("bkctl upgrade -c /etc/bookkeeper/bk_server.conf --upgrade", "move old layouts into current/"),
        ("bkctl upgrade -c /etc/bookkeeper/bk_server.conf --finalize", "then drop the old files"),
    ],
    "cluster info": [
        ("bkctl cluster info", "the cluster in use"),
        ("bkctl --cluster prod cluster info --json", "a named cluster, as JSON"),
    ],
    "metaformat": [
        ("bkctl metaformat", "asks before wiping existing metadata"),
        ("bkctl metaformat --non-interactive --force", "in a script"),
    ],
    "autorecovery run": [
        ("bkctl autorecovery run --bookie-id 10.0.0.3:3181", "the daemon for that host's bookie"),
        ("bkctl autorecovery run -o replicationRateByBytes=10000000", "copying at most 10 MB/s"),
        (
            "bkctl autorecovery run -o lostBookieRecoveryDelay=60",
            "60 s only if the cluster has no delay yet (else it says the cluster's is used)",
        ),
    ],
    "autorecovery whoisauditor": [("bkctl autorecovery whoisauditor", "the elected auditor")],
    "autorecovery trigger-audit": [("bkctl autorecovery trigger-audit", "audit now")],
    "autorecovery force-audit": [
        ("bkctl autorecovery force-audit --all", "every periodic check at the next start"),
        ("bkctl autorecovery force-audit --replicas-check", "only the replicas check"),
    ],
    "autorecovery query-status": [("bkctl autorecovery query-status", "what each worker does with its ledgers")],
    "autorecovery status": [("bkctl autorecovery status", "switch, delay, marks, auditor")],
    "autorecovery enable": [("bkctl autorecovery enable", "after a rolling restart")],
    "autorecovery disable": [("bkctl autorecovery disable", "before a rolling restart")],
    "autorecovery lost-bookie-delay": [
        ("bkctl autorecovery lost-bookie-delay", "the current delay"),
        ("bkctl autorecovery lost-bookie-delay 15m", "wait 15 minutes"),
    ],
    "autorecovery underreplicated": [
        ("bkctl autorecovery underreplicated", "marked ledgers"),
        ("bkctl autorecovery underreplicated --count", "how many"),
    ],
    "recover": [
        ("bkctl recover 10.0.0.3:3181 --dry-run", "the plan, nothing changed"),
        ("bkctl recover 10.0.0.3:3181 --force", "copy a lost bookie's data, no questions"),
        ("bkctl recover 10.0.0.3:3181 --ledger 42 --rate 10000000", "one ledger, at most 10 MB/s"),
    ],
    "decommission": [
        ("bkctl decommission 10.0.0.3:3181", "retire a stopped bookie"),
        ("bkctl decommission 10.0.0.3:3181 --no-daemons --force", "copying from this process"),
    ],
    "rebalance": [
        ("bkctl rebalance --dry-run", "the moves that even out the bookies, nothing changed"),
        ("bkctl rebalance --force --max-rate 50M", "carry them out, at most 50 MiB/s"),
        ("bkctl rebalance --fix-placement --placement rack --dry-run", "ensembles that break rack spread"),
        ("bkctl --json rebalance --force --tolerance 0.05", "from cron: one event per line"),
    ],
    "drain": [
        ("bkctl drain 10.0.0.3:3181 --dry-run", "what would move off the bookie"),
        ("bkctl drain 10.0.0.3:3181 --force", "read-only, then every replica moved off"),
        ("bkctl drain 10.0.0.3:3181 --force --decommission", "and once stopped, its cookie deleted"),
    ],
    "simpletest": [
        ("bkctl simpletest", "100 entries on 3/2/2"),
        ("bkctl simpletest -e 2 -w 2 -a 2 -n 1000", "on two bookies"),
    ],
    "bench": [
        ("bkctl bench", "10,000 adds of 100 bytes"),
        ("bkctl bench --size 4096 --entries 50000 --inflight 512", "bigger entries, more in flight"),
    ],
    "export": [
        ("bkctl export --out /data/bk --ledgers 1,2,5-9", "some ledgers to Parquet"),
        ("bkctl export --out /data/bk --all --since 7d --append", "last week's ledgers, added"),
        (
            "bkctl export --out /data/orders --topic persistent://public/default/orders",
            "a Pulsar topic's messages, one row each",
        ),
        (
            "bkctl export --out /data/backlog --topic persistent://public/default/orders --subscription billing "
            "--unacked-only",
            "what a subscription has not acknowledged",
        ),
    ],
    "pulsar topic list": [
        ("bkctl pulsar topic list", "every topic with a managed ledger"),
        ("bkctl pulsar topic list --namespace public/default", "one namespace's"),
    ],
    "pulsar topic show": [
        (
            "bkctl pulsar topic show persistent://public/default/orders",
            "ledgers, bookies, cursors and backlog (every partition)",
        )
    ],
    "pulsar ledger-owner": [
        ("bkctl pulsar ledger-owner 1234", "topic, cursor, orphan or not-pulsar"),
        ("bkctl --json pulsar ledger-owner 1234 | jq -r .owner", "the owner alone"),
    ],
    "pulsar orphans": [
        ("bkctl pulsar orphans", "orphans created more than an hour ago, with a summary"),
        (
            "bkctl --json pulsar orphans --older-than 7d | jq -r .ledger_id",
            "the ids of week-old orphans, to look at one by one",
        ),
    ],
    "pulsar offload list": [
        ("bkctl pulsar offload list", "every offloaded ledger: where, how big, still in BookKeeper or not"),
        ("bkctl pulsar offload list persistent://public/default/orders --json", "one topic's, as JSON lines"),
    ],
    "pulsar offload verify": [
        ("bkctl pulsar offload verify", "every offloaded ledger read back and checked; exit 1 names each bad one"),
        (
            "bkctl pulsar offload verify orders --entries --s3-endpoint http://127.0.0.1:8333",
            "one topic, every entry decoded, through another endpoint",
        ),
    ],
    "pulsar offload orphans": [
        ("bkctl pulsar offload orphans --older-than 7d", "objects no managed ledger names, and abandoned uploads"),
        (
            "bkctl --json pulsar offload orphans --older-than 7d | jq -s 'map(.size) | add'",
            "the bytes deleting them would free",
        ),
    ],
    "pulsar schema list": [
        ("bkctl pulsar schema list", "every topic's schema versions: type, time, ledger"),
        (
            "bkctl --json pulsar schema list | jq -r 'select(.versions[].problem) | .topic'",
            "the topics with a version that cannot be read",
        ),
    ],
    "pulsar schema show": [
        ("bkctl pulsar schema show orders", "the newest version's definition"),
        ("bkctl --json pulsar schema show orders --version 0 | jq .definition", "version 0's definition, as JSON"),
    ],
    "pulsar schema check": [
        (
            "bkctl pulsar schema check",
            "what stops topics loading, leaked and at-risk schema ledgers; exit 1 when anything is found",
        ),
        (
            "bkctl --json pulsar schema check --older-than 1d | jq -r .ledger_id",
            "the ledgers of the findings, day-old orphans included",
        ),
    ],
    "disk": [
        ("bkctl disk", "where each bookie's space went, the one-line answer first"),
        ("bkctl disk --by namespace", "and the live data by Pulsar namespace"),
        ("bkctl --json disk 10.0.0.3:3181 | jq .summary", "one bookie's answer, for a script"),
    ],
    "top": [
        ("bkctl top", "the bookies live, full screen; ? for the keys"),
        ("bkctl top --sort add-latency --filter /rack1", "slowest adds first, one rack"),
        ("bkctl --json top --once | jq '.bookies[] | {bookie_id, state, add_rate}'", "one snapshot, for a script"),
    ],
    "sandbox up": [
        ("bkctl sandbox up --bookies 3", "start; prints the export line for the URI"),
        ("bkctl sandbox up --json | jq -r .uri", "the URI alone"),
    ],
    "sandbox status": [("bkctl sandbox status", "what is running")],
    "sandbox down": [
        ("bkctl sandbox down", "stop it, keep the data"),
        ("bkctl sandbox down --purge", "and delete the data"),
    ],
    "shell": [
        ("bkctl shell", "on the default cluster"),
        ("bkctl --cluster prod shell", "on the cluster named prod"),
        ("bkctl shell < commands.txt", "run a script, one command per line"),
    ],
    "completion show": [("bkctl completion show zsh", "print the zsh completion script")],
    "completion install": [("bkctl completion install bash", "install it for bash")],
    "cookie get": [
        ("bkctl cookie get 10.0.0.3:3181", "the cookie, decoded"),
        ("bkctl cookie get 10.0.0.3:3181 --raw", "the text exactly as stored"),
    ],
    "cookie create": [("bkctl cookie create 10.0.0.3:3181 --from-file cookie.txt", "put back a saved cookie")],
    "cookie update": [("bkctl cookie update 10.0.0.3:3181 --from-file cookie.txt", "replace it (compare-and-set)")],
    "cookie delete": [
        ("bkctl cookie delete 10.0.0.3:3181", "asks first on a terminal"),
        ("bkctl cookie delete 10.0.0.3:3181 --force", "in a script"),
    ],
    "cookie generate": [
        (
            "bkctl cookie generate 10.0.0.3:3181 -j /bk/journal -l /bk/l1,/bk/l2 -o cookie.txt",
            "a cookie for these directories",
        )
    ],
    "cookie admin": [
        ("bkctl cookie admin -c bk_server.conf --list", "a stopped bookie's cookies"),
        ("bkctl cookie admin -c bk_server.conf --from-id 10.0.0.3:3181", "after an address change"),
        ("bkctl cookie admin -c bk_server.conf --expand", "accept new empty ledger dirs"),
    ],
    "bookie replace-id": [
        ("bkctl bookie replace-id 10.0.0.3:3181 bk3.example.com:3181 --dry-run", "count only"),
        ("bkctl bookie replace-id 10.0.0.3:3181 bk3.example.com:3181 --force --rate 100", "rewrite, 100 ledgers/s"),
    ],
    "bookie readonly": [
        ("bkctl bookie readonly 10.0.0.3:3181 on", "stop new writes to it"),
        ("bkctl bookie readonly 10.0.0.3:3181 off", "writable again"),
    ],
    "bookie gc": [
        ("bkctl bookie gc 10.0.0.3:3181", "run its garbage collection now"),
        ("bkctl bookie gc 10.0.0.3:3181 --status", "whether it runs"),
    ],
    "bookie state": [("bkctl bookie state 10.0.0.3:3181", "its state from its HTTP admin")],
    "bookie check": [
        ("bkctl bookie check -c bk_server.conf", "every indexed entry readable and intact"),
        ("bkctl bookie check -c bk_server.conf --offline", "without ZooKeeper: ids only"),
    ],
    "bookie inspect journal": [
        ("bkctl bookie inspect journal -c bk_server.conf --ledger 42", "its journal records"),
        ("bkctl bookie inspect journal -c bk_server.conf --digest crc32c", "payloads as text"),
    ],
    "bookie inspect entrylog": [
        ("bkctl bookie inspect entrylog -c bk_server.conf --ledger 42 --entry 0", "one entry in the entry logs")
    ],
    "bookie inspect index": [("bkctl bookie inspect index -c bk_server.conf --ledger 42", "where its entries are")],
    "bookie inspect lastmark": [("bkctl bookie inspect lastmark -c bk_server.conf", "the journal's checkpoint")],
    "bookie inspect files": [("bkctl bookie inspect files -c bk_server.conf", "journal, log and index files")],
    "ledger metadata dump": [("bkctl ledger metadata dump 42 ledger-42.meta", "back up its metadata")],
    "ledger metadata restore": [
        ("bkctl ledger metadata restore ledger-42.meta", "recreate ledger 42"),
        ("bkctl ledger metadata restore saved.meta -l 42 --force", "replace it"),
    ],
    "bookie rack set": [
        ("bkctl bookie rack set 10.0.0.3:3181 --rack /eu-west-1a/rack1", "place a bookie"),
        (
            "bkctl bookie rack set 10.0.0.3:3181 --rack /r2 --hostname bk3.example.com",
            "with its host name, as pulsar-admin does",
        ),
    ],
    "bookie rack get": [("bkctl bookie rack get 10.0.0.3:3181", "its rack, group and host name")],
    "bookie rack delete": [("bkctl bookie rack delete 10.0.0.3:3181", "back to /default-rack")],
    "bookie rack list": [
        ("bkctl bookie rack list", "racks and their bookies"),
        ("bkctl bookie rack list --json", "one JSON line per bookie"),
    ],
    "cluster nuke": [
        ("bkctl cluster nuke --instance-id 6f1c...", "delete the cluster's metadata, checked"),
        ("bkctl cluster nuke --force", "no questions, no check"),
    ],
    "backup": [
        ("bkctl backup --to /backups/bk", "the whole cluster: ledgers and Pulsar topics"),
        ("bkctl backup --to s3://bk-backups/prod --s3-endpoint http://10.0.0.9:8333", "into an S3 bucket"),
        ("bkctl backup --to /backups/bk --namespace public/default --json", "one namespace, totals as JSON"),
        ("bkctl backup --to /backups/bk --topic persistent://public/default/orders", "one topic"),
        ("bkctl backup list /backups/bk", "the backups an archive holds"),
        ("bkctl backup show /backups/bk --json", "what the newest holds"),
        ("bkctl backup verify /backups/bk", "re-read everything, check every hash"),
    ],
    "restore": [
        ("bkctl restore --from /backups/bk", "the newest backup, same ledger ids; asks first"),
        ("bkctl restore --from /backups/bk --remap --remap-table ids.json --force", "new ids, no questions"),
        ("bkctl restore --from s3://bk-backups/prod --backup 20261127T191500123Z-1a2b3c --force", "one backup"),
    ],
    "cluster backup": [
        ("bkctl cluster backup cluster.backup", "every ledger's metadata, cookies, INSTANCEID..."),
        ("bkctl cluster backup cluster.backup --force --json", "replace last night's, say what"),
    ],
    "cluster restore": [
        ("bkctl cluster restore cluster.backup", "after a nuke: the cluster made again"),
        ("bkctl cluster restore cluster.backup --force", "over existing ledgers, no questions"),
    ],
}


def attach(command: click.Command, path: tuple[str, ...] = ()) -> None:
    """Give every command under ``command`` (itself, if not a group), whose path is ``path``,
    its examples (``--help`` epilog and ``cmd.examples``)."""
    for cmd_path, cmd in walk(command, path):
        examples = EXAMPLES.get(" ".join(cmd_path))
        if not examples:
            continue
        cmd.examples = examples
        width = max(len(line) for line, _ in examples)
        text = "\n".join(f"  {line.ljust(width)}  # {what}" for line, what in examples)
        cmd.epilog = "\b\nExamples:\n" + text + (f"\n\n{cmd.epilog}" if cmd.epilog else "")


def walk(command: click.Command, path: tuple[str, ...] = ()):
    """``(path, command)`` of every command (not group) under ``command`` (itself, if not a group)."""
    if not isinstance(command, click.Group):
        yield path, command
        return
    for name, cmd in sorted(command.commands.items()):
        yield from walk(cmd, path + (name,))
