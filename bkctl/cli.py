"""The bkctl command tree.

Command groups live in :mod:`bkctl.commands`; each click callback is a thin
layer over a library function so the shell, cron jobs and tests run the
same code.  A command's module is imported when the command is used
(:class:`LazyCommands`), and heavy modules (kazoo, twisted, pyspark) inside
the commands, keeping every bkctl process's start cheap.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import MutableMapping

import click

from . import __version__, exitcodes
from .app import App, color_wanted
from .completers import complete_cluster
from .runner import ReaderGone, run_line
from .runner import state as _state

EXIT_CODES_HELP = "\b\nExit codes:\n" + "\n".join(f"  {code}  {text}" for code, text in exitcodes.DESCRIPTIONS.items())

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


#: the names of bkctl's commands (each loaded by :func:`load_command` when first used)
COMMANDS = (
    "ledger",
    "bookie",
    "bookieformat",
    "upgrade",
    "cluster",
    "metaformat",
    "autorecovery",
    "recover",
    "decommission",
    "rebalance",
    "drain",
    "simpletest",
    "bench",
    "export",
    "backup",
    "restore",
    "pulsar",
    "disk",
    "top",
    "sandbox",
    "shell",
    "completion",
    "cookie",
)


def load_command(name: str) -> click.Command:
    """bkctl's command ``name``, its module imported now, with the subcommands other modules
    hold (import statements, not names in a table: the import graph check reads them)."""
    match name:
        case "ledger":
            from .commands import ledger, ledger_client, ledger_fsck, ledger_metadata

            for command in (
                ledger_client.ledger_create,
                ledger_client.ledger_add,
                ledger_client.ledger_read,
                ledger_client.ledger_close,
                ledger_client.ledger_fence,
                ledger_client.ledger_recover,
                ledger_client.ledger_tail,
                ledger_metadata.metadata,
                ledger_fsck.fsck,
            ):
                ledger.ledger.add_command(command)
            return ledger.ledger
        case "bookie":
            from .commands import bookie, bookie_admin, rack

            for command in (
                bookie_admin.replace_id,
                bookie_admin.state,
                bookie_admin.readonly,
                bookie_admin.gc,
                bookie_admin.inspect,
                bookie_admin.check,
                rack.rack,
            ):
                bookie.bookie.add_command(command)
            return bookie.bookie
        case "cluster":
            from .commands import cluster, cluster_admin

            for command in (cluster_admin.nuke, cluster_admin.backup, cluster_admin.restore):
                cluster.cluster.add_command(command)
            return cluster.cluster
        case "bookieformat" | "upgrade":
            from .commands import bookie

            return getattr(bookie, name)
        case "metaformat" | "autorecovery":
            from .commands import cluster

            return getattr(cluster, name)
        case "recover" | "decommission":
            from .commands import recovery

            return getattr(recovery, name)
        case "rebalance" | "drain":
            from .commands import rebalance

            return getattr(rebalance, name)
        case "simpletest" | "bench":
            from .commands import workload

            return getattr(workload, name)
        case "export":
            from .commands import export

            return getattr(export, name)
        case "backup" | "restore":
            from .commands import backup

            return getattr(backup, name)
        case "pulsar":
            from .commands import pulsar

            return getattr(pulsar, name)
        case "disk":
            from .commands import disk

            return getattr(disk, name)
        case "top":
            from .commands import top

            return getattr(top, name)
        case "sandbox":
            from .commands import sandbox

            return getattr(sandbox, name)
        case "shell":
            from .commands import shell

            return getattr(shell, name)
        case "completion":
            from .commands import completion

            return getattr(completion, name)
        case "cookie":
            from .commands import cookie

            return getattr(cookie, name)
        case _:
            raise KeyError(name)


class LazyCommands(MutableMapping):
    """A group's ``commands`` whose entries are loaded when first looked up.

    ``bkctl ledger list`` then imports the ledger commands only, not every
    command module and what those import; the tree is still one tree: a
    lookup (``get_command``, ``commands[name]``, ``.items()``) gives the
    command object itself, with its examples attached, so --help, the shell,
    completion and tools/gen_docs.py see the same commands as before.
    Names (``in``, iteration, ``list_commands``) import nothing.  A command is
    loaded once, also when two threads ask (the shell completes in its own).
    """

    def __init__(self, names, load):
        self._entries: dict = dict.fromkeys(names)  # name -> its click.Command, None until loaded
        self._load = load
        self._loading = threading.Lock()

    def __getitem__(self, name: str) -> click.Command:
        entry = self._entries[name]
        if entry is None:
            with self._loading:
                entry = self._entries[name]
                if entry is None:
                    from .examples import attach

                    entry = self._load(name)
                    attach(entry, (name,))
                    self._entries[name] = entry
        return entry

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._entries[name] = command

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class _Root(click.Group):
    def _main_shell_completion(self, ctx_args, prog_name, complete_var=None):
        from .completion_scripts import register_global_option_completion

        register_global_option_completion(self)
        return super()._main_shell_completion(ctx_args, prog_name, complete_var)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # before click's main() makes it an exit 1
            raise ReaderGone() from None


@click.group(
    cls=_Root, commands=LazyCommands(COMMANDS, load_command), context_settings=CONTEXT_SETTINGS, epilog=EXIT_CODES_HELP
)
@click.option(
    "-m",
    "--metadata-uri",
    metavar="URI",
    help="Metadata service URI, e.g. zk+hierarchical://127.0.0.1:2181/ledgers "
    "(beats $BKCTL_METADATA_URI, which beats the config's default cluster).",
)
@click.option(
    "--cluster",
    metavar="NAME",
    shell_complete=complete_cluster,
    help="A cluster named in ~/.config/bkctl/config.toml (as explicit as -m; both: exit 2 unless they agree).",
)
@click.option(
    "--protocol",
    type=click.Choice(["v3", "v2"]),
    envvar="BKCTL_PROTOCOL",
    help="Bookie wire protocol (default v3) [env: BKCTL_PROTOCOL]. Over v2, ledgers whose "
    "ensemble size equals their write quorum (Pulsar's default) are read with batch reads.",
)
@click.option(
    "--timeout",
    "zk_timeout",
    type=click.FloatRange(0.1),
    metavar="SECONDS",
    help="How long to wait for ZooKeeper to answer the first time (default 10); later, a call "
    "ZooKeeper leaves unanswered for twice as long fails (exit 5).",
)
@click.option(
    "--placement",
    type=click.Choice(["random", "rack", "region"]),
    envvar="BKCTL_PLACEMENT",
    help="How new ensembles and replacements are chosen (default: rack when ZooKeeper's /bookies "
    "rack map names the cluster's bookies, else random; the profile's 'placement') "
    "[env: BKCTL_PLACEMENT].",
)
@click.option(
    "--zk-digest",
    metavar="USER:PASSWORD",
    envvar="BKCTL_ZK_DIGEST",
    help="Authenticate to ZooKeeper with the digest scheme (profile: zk_digest) [env: BKCTL_ZK_DIGEST]. "
    "SASL: the profile's zk_sasl_mechanism, zk_sasl_username, zk_sasl_password "
    "[env: BKCTL_ZK_SASL_MECHANISM, BKCTL_ZK_SASL_USERNAME, BKCTL_ZK_SASL_PASSWORD].",
)
@click.option(
    "--zk-tls-ca",
    metavar="FILE",
    envvar="BKCTL_ZK_TLS_CA",
    help="Talk TLS to ZooKeeper, trusting this PEM CA bundle (profile: zk_tls_ca; zk_tls = true for "
    "the system's CAs) [env: BKCTL_ZK_TLS_CA].",
)
@click.option(
    "--zk-tls-cert",
    metavar="FILE",
    envvar="BKCTL_ZK_TLS_CERT",
    help="PEM client certificate for ZooKeeper TLS (profile: zk_tls_cert) [env: BKCTL_ZK_TLS_CERT].",
)
@click.option(
    "--zk-tls-key",
    metavar="FILE",
    envvar="BKCTL_ZK_TLS_KEY",
    help="PEM key of --zk-tls-cert (profile: zk_tls_key) [env: BKCTL_ZK_TLS_KEY]. Znodes bkctl creates "
    "get the creator-all ACL with the profile's zk_enable_security = true "
    "[env: BKCTL_ZK_ENABLE_SECURITY=true].",
)
@click.option(
    "--tls-ca",
    metavar="FILE",
    envvar="BKCTL_TLS_CA",
    help="Talk TLS to the bookies (v3 START_TLS), trusting this PEM CA bundle (profile: tls_ca) [env: BKCTL_TLS_CA].",
)
@click.option(
    "--tls-cert",
    metavar="FILE",
    envvar="BKCTL_TLS_CERT",
    help="PEM client certificate for bookies with tlsClientAuthentication=true (profile: tls_cert) "
    "[env: BKCTL_TLS_CERT].",
)
@click.option(
    "--tls-key",
    metavar="FILE",
    envvar="BKCTL_TLS_KEY",
    help="PEM key of --tls-cert (profile: tls_key) [env: BKCTL_TLS_KEY].",
)
@click.option("--json", "json_output", is_flag=True, help="Print one JSON document (JSON lines for lists and streams).")
@click.option("--no-color", is_flag=True, help="No colors (also when NO_COLOR is set).")
@click.option("-v", "--verbose", count=True, help="More detail; tracebacks on errors.")
@click.option("-q", "--quiet", is_flag=True, help="Only results and errors.")
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, value: _print_version(ctx, value),
    help="Show the version and which C twins are in use, and exit.",
)
@click.pass_context
def cli(
    ctx: click.Context,
    metadata_uri,
    cluster,
    protocol,
    zk_timeout,
    placement,
    zk_digest,
    zk_tls_ca,
    zk_tls_cert,
    zk_tls_key,
    tls_ca,
    tls_cert,
    tls_key,
    json_output,
    no_color,
    verbose,
    quiet,
):
    """Administer Apache BookKeeper clusters: ledgers, bookies, autorecovery, exports.

    Global options (those above) may be given anywhere on the line:
    `bkctl ledger show 7 --json` is `bkctl --json ledger show 7`.
    """
    from .clusters import bookie_tls, cluster_profile, resolve_cluster, zk_security
    from .exitcodes import USAGE, CommandError

    try:
        from bkctl.wire import fastpath

        fastpath.check()  # reads BKCTL_FASTPATHS once, refusing a bad word
    except ValueError as e:
        raise CommandError(str(e), USAGE) from None

    app = ctx.obj if isinstance(ctx.obj, App) else None
    if app is None:
        app = App(one_shot=bool(_state.get("one_shot")))
        ctx.obj = app
        ctx.call_on_close(app.close)
    if app.twins is None:  # the process's record, for every App a command runs on (the shell's too)
        app.twins = fastpath.selected()
    # An explicit -m/--cluster overrides the (shell's) session cluster; the
    # environment and the config's default only fill in a session without one.
    if metadata_uri or cluster or app.metadata_uri is None:
        uri, name = resolve_cluster(metadata_uri, cluster)
        if uri and uri != app.metadata_uri:
            app.close()  # connections to the previous cluster must not be reused
            app.metadata_uri = uri
        if uri:
            app.cluster_name = name
            app.profile = cluster_profile(name)
    if protocol:
        app.use_protocol(protocol)
    if zk_timeout:
        app.zk_timeout = zk_timeout
    if placement and placement != app.placement:
        app.use_placement(placement)
    if app.bookie_tls is None or any((tls_ca, tls_cert, tls_key)):
        app.use_bookie_tls(bookie_tls(app.profile, tls_ca, tls_cert, tls_key))
    if app.zk_security is None or any((zk_digest, zk_tls_ca, zk_tls_cert, zk_tls_key)):
        app.use_zk_security(zk_security(app.profile, zk_digest, zk_tls_ca, zk_tls_cert, zk_tls_key))
    app.json = json_output or app.json
    app.color = color_wanted(no_color) and app.color
    app.verbose = max(verbose, app.verbose)
    app.quiet = quiet or app.quiet
    _state["verbose"] = app.verbose
    _configure_logging(app.verbose)


def _print_version(ctx: click.Context, value: bool) -> None:
    """``--version``: the version, and which C twins this process uses -- a build older than its
    sources is not used, and nothing else would say so (:func:`bkctl.wire.fastpath.c_twins_report`)."""
    if not value or ctx.resilient_parsing:
        return
    from bkctl.wire import fastpath

    click.echo(f"bkctl, version {__version__}")
    try:
        click.echo(fastpath.report_line(fastpath.c_twins_report()))
    except ValueError as e:  # BKCTL_FASTPATHS is not a boolean
        click.echo(f"C twins: {e}")
    ctx.exit()


def _configure_logging(verbose: int) -> None:
    """Library chatter (kazoo's reconnect attempts...) only with -v; errors reach the user as one line."""
    import logging

    if _state.get("logging") == verbose:
        return
    _state["logging"] = verbose
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG if verbose > 1 else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
        )
    else:
        logging.getLogger().addHandler(logging.NullHandler())
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        # a durability the file system cannot give is said without -v too: a directory whose
        # fsync answers EINVAL (fsync_dir: an export's, a backup archive's folders), once each
        layout_log = logging.getLogger("bkctl.wire.bookie_disk.layout")
        if not any(getattr(h, "warning_lines", False) for h in layout_log.handlers):

            class WarningLines(logging.Handler):
                """A record as a ``warning: MESSAGE`` line on the stderr of the moment (click's)."""

                warning_lines = True

                def emit(self, record: logging.LogRecord) -> None:
                    try:
                        click.echo(f"warning: {record.getMessage()}", err=True)
                    except Exception:  # noqa: BLE001 - logging's own way: a handler never raises
                        self.handleError(record)

            layout_log.addHandler(WarningLines(logging.WARNING))


def run(args: list[str] | None = None, obj: App | None = None) -> int:
    """Run one bkctl command line (default: this process's arguments) and return its exit
    code; errors become one line on stderr (:func:`bkctl.runner.run_line`)."""
    return run_line(cli, sys.argv[1:] if args is None else list(args), obj)


def main() -> None:
    _state["one_shot"] = True  # the process ends with this line (see App.one_shot)
    code = run()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _state["broken_pipe"] = True
    if _state.get("broken_pipe"):
        # nothing more can reach the reader; keep the interpreter's last flush quiet
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)
