"""The one thing pyproject.toml cannot say: the optional C extensions.

``bkctl.wire.pulsar._packed`` is the fast path of ``bkctl export --topic``
(a batch's messages, and whole stored entries of plain messages, straight into Arrow
buffers, ``_packed_arrow.c``'s; its reader of a message's metadata in ``_packed_single.c``, of a stored entry in
``_packed_entry.c``, with the CRC32C of ``wire/codecs/_crc32c.h``); ``bkctl.wire.codecs._fastcodec``
that of the client's per-entry codecs (CRC32C digests, plain v3 READ and ADD
requests and READ answers, its answer loop); ``bkctl.wire.codecs._records`` the
bookie's journal and entry log records (CRC32C of both: ``wire/codecs/_crc32c.h``);
``bkctl.wire.codecs._plain`` the bookie's parser of
plain ADD/READ requests and its ADD and READ answers, and of a run of ADDs and its answers
or a run of READs in ``_plain_runs.c`` (what its two files share: ``_plain.h``; what the codecs share, their
argument checks and varints: ``wire/codecs/_twins.h``); ``bkctl.wire.metadata._ledgerpb``
the decoding and checking of ledger metadata (a walk over every ledger);
``bkctl.wire.client._addpath`` a connection's copies of a writer's ADDs (built, registered and
answered), ``bkctl.wire.client._addentries`` a writer's entries, their addressing and their
acknowledgements;
``bkctl.wire.backup._archive`` a backup's data objects (a batch's heads and payloads written, a
buffer's run of entries decoded);
``bkctl.wire.pulsar._avrocols`` a typed topic export's AVRO values (Avro binary
straight into Arrow buffers, by a plan built in ``_avrocols_plan.c``).  All are optional: where no C
compiler is found the install goes on without them, and the export, the client
and the bookie take their Python paths (slower, same bytes and rows).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "bkctl.wire.pulsar._packed",
            [
                "wire/pulsar/_packed.c",
                "wire/pulsar/_packed_arrow.c",
                "wire/pulsar/_packed_single.c",
                "wire/pulsar/_packed_entry.c",
            ],
            depends=["wire/pulsar/_packed_arrow.h", "wire/pulsar/_packed_single.h", "wire/codecs/_crc32c.h"],
            optional=True,
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "bkctl.wire.codecs._fastcodec",
            ["wire/codecs/_fastcodec.c"],
            depends=["wire/codecs/_twins.h", "wire/codecs/_crc32c.h"],
            optional=True,
            extra_compile_args=["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "bkctl.wire.codecs._records",
            ["wire/codecs/_records.c"],
            depends=["wire/codecs/_twins.h", "wire/codecs/_crc32c.h"],
            optional=True,
            extra_compile_args=["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "bkctl.wire.backup._archive",
            ["wire/backup/_archive.c"],
            depends=["wire/codecs/_twins.h", "wire/codecs/_crc32c.h"],
            optional=True,
            extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "bkctl.wire.pulsar._avrocols",
            ["wire/pulsar/_avrocols.c", "wire/pulsar/_avrocols_plan.c"],
            depends=["wire/pulsar/_avrocols.h"],
            optional=True,
            extra_compile_args=["-std=c11", "-O3", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "bkctl.wire.metadata._ledgerpb",
            ["wire/metadata/_ledgerpb.c"],
            optional=True,
            extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "bkctl.wire.client._addpath",
            ["wire/client/_addpath.c"],
            depends=["wire/codecs/_twins.h"],
            optional=True,
            extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "bkctl.wire.client._addentries",
            ["wire/client/_addentries.c"],
            depends=["wire/codecs/_twins.h"],
            optional=True,
            extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
        Extension(
            "bkctl.wire.codecs._plain",
            ["wire/codecs/_plain.c", "wire/codecs/_plain_runs.c"],
            depends=["wire/codecs/_plain.h", "wire/codecs/_twins.h"],
            optional=True,
            extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        ),
    ]
)
