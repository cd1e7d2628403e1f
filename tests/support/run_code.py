"""``python -m tests.support.run_code ARG... CODE``: runs CODE as ``__main__`` with ``sys.argv[1:]``
the ARGs - a small process for the suite's checks of how it starts processes."""

import sys

code = sys.argv.pop()
exec(compile(code, "<run_code>", "exec"), {"__name__": "__main__"})
