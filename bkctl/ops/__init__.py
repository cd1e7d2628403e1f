"""bkctl's operations: plain functions over the wire library.

The click commands, the shell, cron jobs and tests all call these; they
return plain data (dicts, lists) and raise library exceptions, never print.
"""
