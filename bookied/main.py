"""``bookied``: run a bookie.

    bookied --conf /etc/bookkeeper/bk_server.conf [--bookie-port 3181 ...]

Every bk_server.conf key has a flag (``journalDirectories`` ->
``--journal-directories``) that overrides the file.  Exit statuses: see
:data:`EXIT_STATUSES` (bookied(8) and bookied.service use them).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from bkctl.wire.process.runtime import frozen_when_loaded, twisted_without_tls

from .config import OPTIONS, ConfigError, load_config
from .startup import configure_logging, main_reactor

log = logging.getLogger("bookied")

EXIT_OK = 0
EXIT_CANNOT_START = 1
EXIT_CONFIG = 2
EXIT_REFUSED = 3
EXIT_INDEX = 4
#: Every exit status: (code, in short for --help, in full for bookied(8)).
EXIT_STATUSES = (
    (EXIT_OK, "clean shutdown", "Clean shutdown."),
    (
        EXIT_CANNOT_START,
        "cannot start for now (ZooKeeper unreachable, port in use; or would have turned "
        "read-only with readOnlyModeEnabled=false)",
        "The bookie cannot start or register for now (ZooKeeper unreachable, bookiePort in use, an I/O "
        "error), or it stopped where it would have turned read-only while readOnlyModeEnabled=false; a "
        "restart may succeed.",
    ),
    (
        EXIT_CONFIG,
        "bad configuration",
        "Bad configuration or command line, including a directory that cannot be created; a restart cannot help.",
    ),
    (
        EXIT_REFUSED,
        "refused: cookie mismatch or decommissioned bookie",
        "The bookie refuses to start as the bookie its directories belong to: cookie mismatch, directories "
        "without a cookie or with an old layout, or a decommissioned bookie (cookie gone from ZooKeeper); "
        "a restart cannot help.",
    ),
    (
        EXIT_INDEX,
        "a ledger directory's index does not open: see --rebuild-index",
        "A ledger directory's index does not open (damaged), or is missing while the directory holds entry "
        "logs; a restart cannot help: `bookied --conf FILE --rebuild-index` rebuilds it from the entry logs, "
        "`bookied --conf FILE --salvage DIR` serves what the directories hold read-only meanwhile.",
    ),
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bkctl")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for, not at
    every start (importlib.metadata: ~12 ms of imports, once nothing else needs it,
    and the search for the distribution), and which C twins the daemon uses (a build older
    than its sources is not used, silently: :func:`bkctl.wire.fastpath.c_twins_report`)."""

    def __init__(
        self,
        option_strings,
        dest=argparse.SUPPRESS,
        default=argparse.SUPPRESS,
        help="show the version and which C twins are in use, and exit",
    ):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from bkctl.wire import fastpath

        print(f"bookied (bkctl) {_version()}")
        try:
            print(fastpath.report_line(fastpath.c_twins_report()))
        except ValueError as e:  # BKCTL_FASTPATHS is not a boolean
            print(f"C twins: {e}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bookied",
        description="A wire-compatible Apache BookKeeper bookie.",
        epilog="Every bk_server.conf key has a flag; see bookied.conf(5). Exit status: "
        + ", ".join(f"{code} {short}" for code, short, _ in EXIT_STATUSES)
        + " (see bookied(8)).",
    )
    parser.add_argument("-c", "--conf", metavar="FILE", help="bk_server.conf to read")
    parser.add_argument("-V", "--version", action=_VersionAction)
    parser.add_argument(
        "--salvage",
        metavar="DIR",
        action="append",
        help="serve a stopped bookie's directories (DIR: its journal, ledger or index directories, or one "
        "holding them; repeatable) read-only under that bookie's id, for re-replication to copy what only it "
        "held: Java's Interleaved and DbLedgerStorage and bookied's own; see bookied(8)",
    )
    parser.add_argument(
        "--rebuild-index",
        action="store_true",
        help="rebuild every ledger directory's index from its entry logs (Java's rebuild-db-ledger-locations-"
        "index), then exit; the bookie must be stopped (refused while it runs); see bookied(8)",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("BOOKIED_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log threshold (default INFO)",
    )
    keys = parser.add_argument_group("configuration keys (override the file)")
    for opt in OPTIONS:
        keys.add_argument(
            opt.flag, dest=opt.name, metavar=opt.metavar, default=None, help=opt.help_text().replace("%", "%%")
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level)
    overrides = {opt.name: getattr(args, opt.name) for opt in OPTIONS if getattr(args, opt.name) is not None}
    try:
        cfg = load_config(args.conf, overrides)
    except ConfigError as e:
        print(f"bookied: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except OSError as e:
        print(f"bookied: cannot read {args.conf}: {e.strerror}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        from bkctl.wire import fastpath

        fastpath.check()  # reads BKCTL_FASTPATHS once, refusing a bad word
    except ValueError as e:
        print(f"bookied: {e}", file=sys.stderr)
        return EXIT_CONFIG

    if args.rebuild_index:
        return _rebuild_index(cfg)

    with frozen_when_loaded():
        with twisted_without_tls(unless=bool(cfg.tls_provider_factory_class)):
            reactor = main_reactor()
        from twisted.internet.error import CannotListenError

        from bkctl.wire.bookie_disk.identity import IdentityError
        from bkctl.wire.bookie_disk.layout import LayoutError
        from bkctl.wire.errors import BKError

        from .service import BookieService
        from .storage.errors import IndexUnavailable

    try:
        from bkctl.wire.metadata import zksecurity

        # every ZooKeeper session of this process uses it (its autorecovery process, given the
        # same configuration, sets the same)
        zksecurity.set_default(cfg.zk_security())
        service: BookieService | SalvageService
        if args.salvage:
            from .salvage import SalvageService

            service = SalvageService(cfg, reactor, args.salvage, fastpath.selected())
        else:
            service = BookieService(cfg, reactor, fastpath.selected())
        service.start()
    except ConfigError as e:
        print(f"bookied: {e}", file=sys.stderr)
        _cleanup(locals().get("service"))
        return EXIT_CONFIG
    except IndexUnavailable as e:
        # one line (under systemd the unit fails with it: RestartPreventExitStatus holds the code)
        log.error("cannot start: %s; %s", e, REBUILD_HINT)
        _cleanup(locals().get("service"))
        return EXIT_INDEX
    except (IdentityError, LayoutError) as e:
        log.error("refusing to start: %s", e)
        _cleanup(locals().get("service"))
        return EXIT_REFUSED
    except (BKError, OSError, CannotListenError) as e:
        log.error("cannot start: %s", e)
        _cleanup(locals().get("service"))
        return EXIT_CANNOT_START
    reactor.run()
    from bkctl.wire.process.shutdown import ignore_late_signals

    ignore_late_signals()
    return service.exit_code


#: what to do about a ledger directory whose index does not open
REBUILD_HINT = (
    "rebuild it from the entry logs with `bookied --conf FILE --rebuild-index` (the bookie stopped), "
    "or serve what the directories hold read-only meanwhile with `bookied --conf FILE --salvage DIR`"
)


def _rebuild_index(cfg) -> int:
    """``--rebuild-index``: every ledger directory's index, one line each (see :mod:`.storage.rebuild`)."""
    from bkctl.wire import fastpath
    from bkctl.wire.errors import BKError

    from .storage.errors import DirectoryInUse
    from .storage.rebuild import rebuild_index

    zk = None
    if cfg.metadata_service_uri:
        from bkctl.wire.metadata.zk import ZKMetadataStore

        try:
            zk = ZKMetadataStore(cfg.metadata_service_uri, timeout=cfg.zk_timeout / 1000.0, twins=fastpath.selected())
            zk.start()
        except (BKError, OSError) as e:
            log.warning(
                "rebuild: the metadata store is unreachable (%s): a ledger found in the entry logs is kept "
                "even if deleted, until garbage collection's next pass",
                e,
            )
            zk = None
    try:
        for d in cfg.ledger_directories:
            report = rebuild_index(
                d,
                cfg.journal_directories,
                metadata_exists=zk.ledgers.exists if zk is not None else None,
            )
            print(f"bookied: rebuilt the index of {report.line()}")
    except DirectoryInUse as e:
        print(f"bookied: not rebuilding: {e}; stop it first", file=sys.stderr)
        return EXIT_CANNOT_START
    except OSError as e:
        print(f"bookied: cannot rebuild the index: {e}", file=sys.stderr)
        return EXIT_CANNOT_START
    finally:
        if zk is not None:
            zk.close()
    return EXIT_OK


def _cleanup(service) -> None:
    if service is None:
        return
    for j in service.journals:
        j.close()
    for s in service.stores:
        s.close()
    if service.zk is not None:
        service.zk.close()


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
