"""The one thing pyproject.toml cannot say: the optional C extension.

``bkctl.wire.pulsar._packed`` is the fast path of ``bkctl export --topic``
(a batch's messages straight into Arrow buffers).  It is optional: where no
C compiler is found the install goes on without it, and the export takes the
general path (slower, same rows).  ``bkctl.wire.codecs._plain`` is the bookie's
parser of plain ADD/READ requests and its ADD answer (``_plain.c``), optional
the same way: without it the bookie takes apart requests in Python.
"""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("bkctl.wire.pulsar._packed", ["wire/pulsar/_packed.c"], optional=True,
              extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
    Extension("bkctl.wire.codecs._plain", ["wire/codecs/_plain.c"], optional=True,
              extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
])
