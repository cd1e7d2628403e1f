"""The one thing pyproject.toml cannot say: the optional C extension.

``bkctl.wire.pulsar._packed`` is the fast path of ``bkctl export --topic``
(a batch's messages straight into Arrow buffers).  It is optional: where no
C compiler is found the install goes on without it, and the export takes the
general path (slower, same rows).
"""
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("bkctl.wire.pulsar._packed", ["wire/pulsar/_packed.c"], optional=True,
              extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
])
