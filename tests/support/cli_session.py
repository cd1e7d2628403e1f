"""A writer that lives across commands, like ``bkctl shell``: an interactive App running one bkctl
command line per stdin line (a JSON array), answering each with one JSON line ``{"rc", "out"}``.
Run as ``python -m tests.support.cli_session`` (tests/integration/test_cli_ledger.py's ``Session``,
forked from the worker's zygote where it can be: :func:`tests.support.cli.start`)."""

from __future__ import annotations

import contextlib
import io
import json
import sys


def main() -> None:
    from bkctl import cli as c
    from bkctl.app import App

    app = App(interactive=True)
    for line in sys.stdin:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = c.run(json.loads(line), obj=app)
        app.json = False
        sys.__stdout__.write(json.dumps({"rc": rc, "out": out.getvalue()}) + "\n")
        sys.__stdout__.flush()
    app.close()


if __name__ == "__main__":
    main()
