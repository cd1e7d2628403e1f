"""``bkctl bookie rack ...``: the rack map Pulsar brokers and bkctl's placement read."""

from __future__ import annotations

import click

from ..app import App
from ..completers import complete_bookie_id
from ..render import emit, emit_rows, fields, table
from . import pass_app

_BOOKIE = click.argument("bookie_id", metavar="BOOKIE", shell_complete=complete_bookie_id)


@click.group()
def rack():
    """Bookies' racks in ZooKeeper's /bookies node (Pulsar's rack map, as pulsar-admin bookies edits it).

    Racks are paths: /rack, or /region/rack for region-aware placement.
    When the map names the cluster's bookies, bkctl places ensembles
    rack-aware (see --placement).
    """


@rack.command("set")
@_BOOKIE
@click.option("--rack", "rack_name", required=True, metavar="RACK", help="The rack path, e.g. /rack1 or /eu/rack1.")
@click.option("--group", default="default", show_default=True, help="The rack map group (Pulsar's bookie group).")
@click.option("--hostname", metavar="HOST", help="The bookie's host name, stored with its rack.")
@click.option(
    "--allow-unknown-id",
    "allow_unknown",
    is_flag=True,
    help="Accept a BOOKIE that is not registered and has no cookie (a bookie not started yet).",
)
@pass_app
def rack_set(app: App, bookie_id: str, rack_name: str, group: str, hostname: str | None, allow_unknown: bool):
    """Put BOOKIE in a rack (moving it out of any other group).

    BOOKIE must be registered or have a cookie (exit 3 otherwise: a typo
    would put no bookie in the rack) unless --allow-unknown-id.
    """
    from ..ops.racks import set_rack

    doc = set_rack(app.store, bookie_id, rack_name, group, hostname, allow_unknown=allow_unknown)
    emit(app, doc, lambda: app.console.print(f"bookie {bookie_id}: rack {doc.rack} (group {group})"))


@rack.command("get")
@_BOOKIE
@pass_app
def rack_get(app: App, bookie_id: str):
    """BOOKIE's rack, group and host name (not in the map: exit 3)."""
    from ..ops.racks import get_rack

    doc = get_rack(app.store, bookie_id)
    emit(
        app,
        doc,
        lambda: fields(
            app,
            [
                ("bookie", bookie_id),
                ("rack", doc.rack),
                ("group", doc.group),
                ("hostname", doc.hostname),
            ],
        ),
    )


@rack.command("delete")
@_BOOKIE
@pass_app
def rack_delete(app: App, bookie_id: str):
    """Take BOOKIE out of the rack map (it is then in /default-rack; not in the map: exit 3)."""
    from ..ops.racks import delete_rack

    doc = delete_rack(app.store, bookie_id)
    emit(app, doc, lambda: app.console.print(f"bookie {bookie_id} removed from rack {doc.rack}"))


@rack.command("list")
@pass_app
def rack_list(app: App):
    """Racks and their bookies.  --json: JSON lines {group, rack, bookie_id, hostname, state}."""
    from ..ops.racks import list_racks

    rows = list_racks(app.store)
    emit_rows(
        app,
        rows,
        lambda rows: table(
            app,
            ["rack", "bookie", "state", "group", "hostname"],
            ((r.rack, r.bookie_id, r.state.value, r.group, r.hostname) for r in rows),
        ),
    )
