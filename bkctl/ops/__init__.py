"""bkctl's operations: plain functions over the wire library.

The click commands, the shell, cron jobs and tests all call these; they
return plain data (dicts, lists) and raise library exceptions, never print.
"""


def parse_input_file(path: str, parse, what: str):
    """``(bytes, parse(bytes))`` of a file an operator gave; unreadable, or not ``what``
    (``parse`` raised CodecError): a usage error, exit 2."""
    from bkctl.wire.errors import CodecError

    from ..exitcodes import USAGE, CommandError

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}", USAGE) from None
    try:
        return data, parse(data)
    except CodecError as e:
        raise CommandError(f"{path} is not {what}: {e}", USAGE) from None
