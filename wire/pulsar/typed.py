"""A message's value decoded by its topic's schema: Pulsar SQL's typed rows, without a broker.

:class:`TypedView` is what a topic export needs: the stored versions of the
topic's schema (:class:`~.schema.StoredSchema` by version, or why one cannot
be read), the version read as -- the *reader*, by default the newest readable
one -- and from them the value's Arrow type (:attr:`TypedView.arrow_type`)
and :meth:`TypedView.decode`, which turns a message's payload (and, for a
SEPARATED key/value schema, its key) into Python values of that type or
raises :class:`DecodeError` saying why.  It pickles as its stored schemas
(decoders are made again where it is used).

How each schema type is read, as the Java client's schemas write:

* AVRO: Avro binary, read with fastavro; a message of another version is
  read by Avro's resolution rules with the reader's schema (added fields take
  their defaults, removed ones are dropped, promotions apply); a version
  that cannot be resolved is an error naming both versions;
* JSON: a JSON document, shaped by the version's Avro-style definition
  (fields the reader has and the message lacks take their defaults);
* PROTOBUF_NATIVE: protobuf binary, read with the version's
  ``FileDescriptorSet`` (``rootMessageTypeName``): messages as structs (an
  unset one null), repeated fields as arrays, maps as maps, enums by name,
  scalars with their proto3 defaults, uint64/fixed64 as decimal(20,0);
* KEY_VALUE: ``INLINE`` ``[int32 keyLen][key][int32 valueLen][value]`` (-1:
  null) or ``SEPARATED`` (the key base64 in the partition key), each side
  by its own type; a struct ``{key, value}``;
* STRING (UTF-8), BOOLEAN, INT8-64, FLOAT, DOUBLE big-endian; DATE and
  TIMESTAMP (8-byte epoch ms) as timestamps; TIME as its 8-byte ms (long);
  INSTANT (8-byte seconds, 4-byte nanos) as a timestamp; LOCAL_DATE
  (8-byte epoch day) as a date; LOCAL_TIME (8-byte nano of day) as a long;
  LOCAL_DATE_TIME (8-byte epoch day, 8-byte nano of day) as a timestamp
  without time zone; BYTES and NONE: the payload.
* PROTOBUF (the older one: an Avro schema derived from the message, which
  does not say the field numbers): by the ``__PARSING_INFO__`` property the
  Java client adds (the top-level fields' numbers, protobuf types and
  labels), a struct of those fields: scalars typed as PROTOBUF_NATIVE's, an
  enum field its number, a message field its encoded bytes (the numbers of
  enum symbols and of nested fields are not stored); without the property
  not typed (:class:`Untyped`, saying so).

The Arrow types of Avro and JSON values are :mod:`.avro_types`'s, of protobuf
messages :mod:`.protobuf_values`'s.
"""

from __future__ import annotations

import base64
import datetime as _dt
import io
import json
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from .avro_types import Fix, as_numbers, avro_arrow, avro_incompatible, json_shaper
from .errors import DecodeError, PulsarFormatError, Untyped
from .protobuf_values import message_reading, native_descriptor, parsing_info_descriptor
from .schema import StoredSchema, key_value_schema, split_key_value, version_of

if TYPE_CHECKING:
    from .avro_columns import AvrocolsModule, AvroDecoder

__all__ = ["TypedView"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_DAY0 = _dt.date(1970, 1, 1)


# ---------------------------------------------------------------- one schema -> (arrow type, decode)


class _Side(NamedTuple):
    """One schema's reading: its Arrow type and ``decode(bytes) -> value``."""

    arrow_type: Any
    decode: Callable[[bytes], Any]
    #: AVRO/JSON: the parsed Avro schema (for resolution); else None
    avro: Any = None
    kind: str = ""


def _primitive(kind: str) -> _Side:
    import pyarrow as pa

    def fixed(fmt: str, convert: Callable[..., Any] | None = None) -> Callable[[bytes], Any]:
        s = struct.Struct(fmt)

        def decode(data: bytes) -> Any:
            if len(data) != s.size:
                raise DecodeError(f"{kind} is {s.size} bytes, not {len(data)}")
            value = s.unpack(data)
            return convert(*value) if convert else value[0]

        return decode

    def text(data: bytes) -> str:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"STRING is not UTF-8: {exc}") from None

    table = {
        "STRING": (pa.string(), text),
        "BOOLEAN": (pa.bool_(), fixed(">B", lambda b: b != 0)),
        "INT8": (pa.int8(), fixed(">b")),
        "INT16": (pa.int16(), fixed(">h")),
        "INT32": (pa.int32(), fixed(">i")),
        "INT64": (pa.int64(), fixed(">q")),
        "FLOAT": (pa.float32(), fixed(">f")),
        "DOUBLE": (pa.float64(), fixed(">d")),
        "DATE": (pa.timestamp("ms", tz="UTC"), fixed(">q")),
        "TIMESTAMP": (pa.timestamp("ms", tz="UTC"), fixed(">q")),
        "TIME": (pa.int64(), fixed(">q")),
        "INSTANT": (
            pa.timestamp("us", tz="UTC"),
            fixed(">qi", lambda s, n: _EPOCH + _dt.timedelta(seconds=s, microseconds=n // 1000)),
        ),
        "LOCAL_DATE": (pa.date32(), fixed(">q", lambda d: _DAY0 + _dt.timedelta(days=d))),
        "LOCAL_TIME": (pa.int64(), fixed(">q")),
        "LOCAL_DATE_TIME": (
            pa.timestamp("us"),
            fixed(">qq", lambda d, n: _EPOCH_NAIVE + _dt.timedelta(days=d, microseconds=n // 1000)),
        ),
        "BYTES": (pa.binary(), bytes),
        "NONE": (pa.binary(), bytes),
    }
    arrow, decode = table[kind]
    return _Side(arrow, decode, kind=kind)


def _avro_schema(schema: StoredSchema) -> tuple[Any, Any]:
    """The version's Avro schema parsed: as defined (for its Arrow type) and as
    read (the integer-backed logical types as numbers)."""
    try:
        import fastavro
    except ImportError:
        raise Untyped("fastavro is not installed (pip install 'bkctl[spark]')") from None

    try:
        doc = json.loads(schema.data)
    except ValueError as exc:
        raise Untyped(f"{schema.type} definition is not JSON: {exc}") from None
    try:
        return fastavro.parse_schema(doc), fastavro.parse_schema(as_numbers(doc))
    except Exception as exc:  # noqa: BLE001 - fastavro's SchemaParseException and friends
        raise Untyped(f"{schema.type} definition is not an Avro schema: {exc}") from None


def _avro_side(schema: StoredSchema) -> _Side:
    defined, parsed = _avro_schema(schema)  # Untyped without fastavro
    from fastavro import schemaless_reader

    arrow, fix = avro_arrow(defined)

    def decode_avro(data: bytes, _read: Callable[..., Any] = schemaless_reader, _fix: Fix | None = fix) -> Any:
        value = _read(io.BytesIO(data), parsed, None)
        return value if _fix is None else _fix(value)

    def decode_json(data: bytes, _fix: Fix | None = fix) -> Any:
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise DecodeError(f"not a JSON document: {exc}") from None
        value = shape(doc)
        return value if _fix is None else _fix(value)

    if schema.type == "AVRO":
        return _Side(arrow, decode_avro, parsed, schema.type)
    shape = json_shaper(defined)  # JSON
    return _Side(arrow, decode_json, parsed, schema.type)


def _message_side(descriptor: Any, kind: str) -> _Side:
    reading = message_reading(descriptor)
    return _Side(reading.arrow_type, reading.decode, kind=kind)


def _side(schema: StoredSchema) -> _Side:
    kind = schema.type
    if kind in ("AVRO", "JSON"):
        return _avro_side(schema)
    if kind == "PROTOBUF_NATIVE":
        return _message_side(native_descriptor(schema.data), kind)
    if kind == "KEY_VALUE":
        return _key_value_side(schema)
    if kind == "PROTOBUF":
        return _message_side(parsing_info_descriptor(schema.data, schema.properties), kind)
    try:
        return _primitive(kind)
    except KeyError:
        raise Untyped(f"schema type {kind} is not known") from None


# ---------------------------------------------------------------- key/value


def _key_value_side(schema: StoredSchema) -> _Side:
    import pyarrow as pa

    kv = key_value_schema(schema)
    key, value = _side(kv.key), _side(kv.value)
    arrow = pa.struct([pa.field("key", key.arrow_type), pa.field("value", value.arrow_type)])

    def decode(data: bytes) -> dict[str, Any]:
        try:
            k, v = split_key_value(data)
        except PulsarFormatError as exc:
            raise DecodeError(str(exc)) from None
        return {"key": None if k is None else key.decode(k), "value": None if v is None else value.decode(v)}

    return _Side(arrow, decode, kind="KEY_VALUE")


# ---------------------------------------------------------------- a batch's values as a column


class ValueBatch(NamedTuple):
    """The columns of a batch of messages a typed export decodes: each row's version bytes
    (as stamped; None: the reader's), the payloads (an Arrow binary array), ``skip[i]`` true:
    not a message to decode (value null; None: none skipped), and for a SEPARATED key/value
    schema the keys and their base64 flags (else None)."""

    versions: list[bytes | None]
    payloads: Any
    skip: list[Any] | None = None
    keys: list[str | None] | None = None
    key_b64: list[bool] | None = None


class ValueColumn(NamedTuple):
    """A batch's values as an Arrow array of the view's type, and ``{row: why}`` for the rows
    whose value is null because it does not decode or does not fit the type."""

    column: Any
    failures: dict[int, str]


class NativeDecoder(NamedTuple):
    """A view's C decoder of AVRO values (:meth:`TypedView.native_decoder`): the
    ``_avrocols.Decoder``, the column tree it fills (:func:`.avro_columns.columns_of`) and
    the decoder's slot of each version's bytes."""

    decoder: AvroDecoder
    root: Any
    slots_by: dict[bytes | None, int]


def value_array(values: list[Any], arrow_type: Any) -> tuple[Any, dict[int, str]]:
    """``values`` as an Arrow array; a value that does not fit the type
    (a JSON number too big for its field, ...) is null, with why."""
    import pyarrow as pa

    try:
        return pa.array(values, arrow_type), {}
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        pass
    fitted: list[Any] = []
    unfit: dict[int, str] = {}
    for i, v in enumerate(values):
        try:
            pa.array([v], arrow_type)
            fitted.append(v)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
            fitted.append(None)
            unfit[i] = f"its value does not fit the column's type: {exc}"
    return pa.array(fitted, arrow_type), unfit


# ---------------------------------------------------------------- the topic's view


class TypedView:
    """A topic's schema versions and the reading of its messages (see the
    module documentation).  ``versions``: version -> :class:`StoredSchema`;
    ``unreadable``: version -> why it cannot be read (its ledger gone, ...);
    ``reader``: the version read as (None: the newest readable one)."""

    def __init__(
        self, versions: dict[int, StoredSchema], unreadable: dict[int, str] | None = None, reader: int | None = None
    ):
        self.versions = dict(sorted(versions.items()))
        self.unreadable = dict(unreadable or {})
        if reader is None:
            usable = [v for v, s in self.versions.items() if not s.deleted]
            if not usable:
                raise Untyped("no readable schema version")
            reader = usable[-1]
        if reader not in self.versions:
            why = self.unreadable.get(reader, "no such version")
            raise Untyped(f"schema version {reader} cannot be read: {why}")
        self.reader = reader
        self._sides: dict[int, _Side] = {}
        self._resolved: dict[int, Callable[[bytes], Any] | str] = {}
        self._kv = None
        #: the C twin's decoder of this view's AVRO values (:meth:`native_decoder`): None
        #: not made yet, False unusable
        self._native: NativeDecoder | bool | None = None
        main = self.versions[reader]
        if main.type in ("NONE", "BYTES") or main.deleted:
            raise Untyped(
                f"schema version {reader} is {'deleted' if main.deleted else main.type}: the payload is the value"
            )
        self._reader_side = self._side_of(reader)
        if main.type == "KEY_VALUE":
            self._kv = key_value_schema(main)

    def __getstate__(self) -> dict[str, Any]:
        return {"versions": self.versions, "unreadable": self.unreadable, "reader": self.reader}

    def __setstate__(self, state: dict[str, Any]) -> None:
        TypedView.__init__(self, state["versions"], state["unreadable"], state["reader"])

    @property
    def arrow_type(self) -> Any:
        return self._reader_side.arrow_type

    @property
    def type(self) -> str:
        return self.versions[self.reader].type

    @property
    def separated(self) -> bool:
        """A SEPARATED key/value schema: the key is the message's partition key."""
        return self._kv is not None and self._kv.encoding == "SEPARATED"

    def _side_of(self, version: int) -> _Side:
        if version not in self._sides:
            self._sides[version] = _side(self.versions[version])
        return self._sides[version]

    def _reading(self, version: int | None) -> Callable[[bytes], Any] | str:
        """How a message of ``version`` is read as the reader (cached); a
        string: why it cannot be."""
        key = self.reader if version is None else version
        if key in self._resolved:
            return self._resolved[key]
        out: Callable[[bytes], Any] | str
        if key == self.reader:
            out = self._reader_side.decode
        elif key in self.unreadable:
            out = f"schema version {key} cannot be read: {self.unreadable[key]}"
        elif key not in self.versions:
            out = f"schema version {key} is not in the topic's schema registry"
        else:
            out = self._resolve(key)
        self._resolved[key] = out
        return out

    def _resolve(self, version: int) -> Callable[[bytes], Any] | str:
        """A reading of ``version``'s messages as the reader's type."""
        writer, reader = self.versions[version], self.versions[self.reader]
        if writer.deleted:
            return f"schema version {version} is a deletion marker"
        if writer.type != reader.type:
            return f"schema version {version} ({writer.type}) cannot be read as version {self.reader} ({reader.type})"
        try:
            if writer.type == "AVRO":
                return self._avro_resolved(version)
            if writer.type == "JSON":
                shape = json_shaper(self._reader_side.avro)
                fix = avro_arrow(self._reader_side.avro)[1]

                def decode_json(data: bytes) -> Any:
                    doc = json.loads(data)
                    value = shape(doc)
                    return value if fix is None else fix(value)

                return decode_json
            if writer.type == "KEY_VALUE":
                return self._key_value_resolved(version)
        except Untyped as exc:
            return f"schema version {version} cannot be read: {exc}"
        if writer.data == reader.data:
            return self._reader_side.decode
        return self._side_of(version).decode  # primitives, PROTOBUF_NATIVE: by their own definition

    def _avro_resolved(self, version: int) -> Callable[[bytes], Any] | str:
        from fastavro import schemaless_reader

        writer = self._side_of(version).avro
        reader = self._reader_side.avro
        fix = avro_arrow(reader)[1]
        problem = avro_incompatible(writer, reader)
        if problem:
            return f"schema version {version} cannot be read as version {self.reader}: {problem}"

        def decode(data: bytes) -> Any:
            try:
                value = schemaless_reader(io.BytesIO(data), writer, reader)
            except DecodeError:
                raise
            except Exception as exc:  # noqa: BLE001 - fastavro's resolution errors
                raise DecodeError(f"version {version} read as version {self.reader}: {exc}") from None
            return value if fix is None else fix(value)

        return decode

    def _key_value_resolved(self, version: int) -> Callable[[bytes], Any] | str:
        kv_w, kv_r = key_value_schema(self.versions[version]), self._kv
        assert kv_r is not None  # the reader is KEY_VALUE too (_resolve)
        sides = []
        for w, r in ((kv_w.key, kv_r.key), (kv_w.value, kv_r.value)):
            view = TypedView({0: w, 1: r}, reader=1) if r.type not in ("NONE", "BYTES") else None
            sides.append(view)

        def side(view: TypedView | None, data: bytes | None) -> Any:
            if data is None:
                return None
            if view is None:
                return data
            return view.decode_version(0, data)

        def decode(data: bytes) -> dict[str, Any]:
            try:
                k, v = split_key_value(data)
            except PulsarFormatError as exc:
                raise DecodeError(str(exc)) from None
            return {"key": side(sides[0], k), "value": side(sides[1], v)}

        return decode

    def decode_version(self, version: int | None, payload: bytes) -> Any:
        """``payload`` of a message of ``version`` as the reader's type; :class:`DecodeError`."""
        reading = self._reading(version)
        if isinstance(reading, str):
            raise DecodeError(reading)
        try:
            return reading(payload)
        except DecodeError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the payload made a decoder raise
            raise DecodeError(f"{type(exc).__name__}: {exc}") from None

    def decode(
        self, schema_version: bytes | None, payload: bytes | None, key: str | None = None, key_b64: bool = False
    ) -> Any:
        """A message's value (None for a null value): ``schema_version`` as
        stamped (none: the reader's), the payload, and for a SEPARATED
        key/value schema the message's key (base64 when ``key_b64``)."""
        try:
            version = version_of(schema_version)
        except PulsarFormatError as exc:
            raise DecodeError(str(exc)) from None
        if self._kv is not None and self._kv.encoding == "SEPARATED":
            return self._separated(version, payload, key, key_b64)
        if payload is None:
            return None
        return self.decode_version(version, payload)

    def _separated(self, version: int | None, payload: bytes | None, key: str | None, key_b64: bool) -> Any:
        if version is not None and version != self.reader and version not in self.versions:
            raise DecodeError(self._reading(version))
        key_bytes = None
        if key is not None:
            key_bytes = base64.b64decode(key) if key_b64 else key.encode("utf-8")
        inline = bytearray()
        for part in (key_bytes, payload):
            inline += struct.pack(">i", -1) if part is None else struct.pack(">i", len(part)) + part
        return self.decode_version(version, bytes(inline))

    def decode_many(
        self,
        versions: list[bytes | None],
        payloads: list[bytes | None],
        keys: list[str | None] | None = None,
        key_b64: list[bool] | None = None,
        skip: list[Any] | None = None,
    ) -> tuple[list[Any], dict[int, str]]:
        """The values of many messages (columns of a batch: version bytes,
        payloads, keys and their base64 flags for a SEPARATED key/value
        schema; ``skip[i]`` true: not a message to decode, value None) and
        ``{row: why}`` for those that do not decode (value None)."""
        values: list[Any] = []
        failures: dict[int, str] = {}
        n = len(payloads)
        keys = keys if keys is not None else [None] * n
        key_b64 = key_b64 if key_b64 is not None else [False] * n
        skip = skip if skip is not None else [None] * n
        separated = self.separated
        readings: dict[bytes | None, Callable[[bytes], Any] | str] = {}
        append = values.append
        for i, (raw, payload, key, b64, no) in enumerate(zip(versions, payloads, keys, key_b64, skip)):
            if no or (payload is None and not separated):
                append(None)
                continue
            try:
                if separated:
                    append(self.decode(raw, payload, key, bool(b64)))
                    continue
                reading = readings.get(raw)
                if reading is None:
                    try:
                        reading = readings[raw] = self._reading(version_of(raw))
                    except PulsarFormatError as exc:
                        reading = readings[raw] = str(exc)
                if isinstance(reading, str):
                    raise DecodeError(reading)
                assert payload is not None  # a null one was skipped above
                append(reading(payload))
            except DecodeError as exc:
                append(None)
                failures[i] = str(exc)
            except Exception as exc:  # noqa: BLE001 - whatever the payload made a decoder raise
                append(None)
                failures[i] = f"{type(exc).__name__}: {exc}"
        return values, failures

    def value_column(self, batch: ValueBatch) -> ValueColumn:
        """The values of a batch's messages as an Arrow array of :attr:`arrow_type` and
        ``{row: why}`` for those that do not decode or do not fit the type (value null):
        the general path (fastavro or the type's decoder, :meth:`decode_many`, then pyarrow,
        :func:`value_array`), the Python twin of ``Twins.avro_columns``
        (:mod:`bkctl.wire.fastpath`, :mod:`.value_columns`)."""
        values, failures = self.decode_many(
            batch.versions, batch.payloads.to_pylist(), batch.keys, batch.key_b64, batch.skip
        )
        column, unfit = value_array(values, self.arrow_type)
        failures.update(unfit)
        return ValueColumn(column, failures)

    def native_decoder(self, c: AvrocolsModule) -> NativeDecoder | None:
        """The decoder of this view's AVRO values made of the C module ``c``'s ``Decoder``
        (``_avrocols``, planned by :mod:`.avro_columns`; the C twin of :mod:`.value_columns`
        asks for it), made once; None where it reads none of this
        view's versions (not AVRO, a reading it does not make)."""
        if self._native is None:
            self._native = self._make_native(c)
        return self._native if isinstance(self._native, NativeDecoder) else None

    def _make_native(self, c: AvrocolsModule) -> NativeDecoder | bool:
        """:meth:`native_decoder`'s, or False."""
        from .avro_columns import Unsupported, columns_of, plan
        from .schema import version_bytes

        if self.type != "AVRO":
            return False
        try:
            root, table = columns_of(self.arrow_type)
        except Unsupported:
            return False
        plans: list[Any] = []
        slots_by: dict[bytes | None, int] = {}
        reader = self._reader_side.avro
        for version, stored in self.versions.items():
            if len(plans) >= 255 or stored.type != "AVRO" or stored.deleted or isinstance(self._reading(version), str):
                continue
            try:
                made = plan(self._side_of(version).avro, reader, root, decimals=bool(c.DECIMALS))
            except (Unsupported, Untyped):
                continue
            slots_by[version_bytes(version)] = len(plans)
            if version == self.reader:
                slots_by[None] = slots_by[b""] = len(plans)
            plans.append(made)
        if not plans:
            return False
        return NativeDecoder(c.Decoder(table, tuple(plans)), root, slots_by)

    def describe(self) -> dict[str, Any]:
        """For a manifest: the reader version, its type and the versions."""
        return {
            "reader_version": self.reader,
            "type": self.type,
            "versions": sorted(self.versions),
            "unreadable": {str(v): why for v, why in sorted(self.unreadable.items())},
        }
