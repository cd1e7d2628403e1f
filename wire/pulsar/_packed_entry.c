/*
 * bkctl.wire.pulsar._packed, its reader of whole stored entries: the framing
 * (the broker's entry metadata, the CRC32C and its magic, the metadata's size),
 * the producer's MessageMetadata walked by hand, and the payload -- for an entry
 * of a plain message or a plain batch only, the rule of the Python twin's
 * bkctl.wire.pulsar.rows.plain_entry: no marker, no transaction, no chunk, no
 * encryption, no compression.  Anything else, and anything protobuf or
 * decode_entry would read otherwise (a wrong wire type, text that is not
 * UTF-8, a number no column holds, a bad checksum), is refused: the Python
 * twin then decodes the entry and says what is wrong.  Also add_entries' limits
 * (rows.PlainLimits) read from Python: which entries' rows are wanted.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <limits.h>

#include "_packed_single.h"
#include "../codecs/_crc32c.h"

#define MAGIC_CRC32C 0x0E01
#define MAGIC_BROKER_ENTRY_METADATA 0x0E02
#define MS_MAX ((uint64_t)(INT64_MAX / 1000))

void plain_entry_init(void)
{
    (void)hardware_crc32c; /* the header's switch for tests: _fastcodec's to use */
    bk_crc_init();
}

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static unsigned be16(const unsigned char *p) { return ((unsigned)p[0] << 8) | (unsigned)p[1]; }

/* Reads a field's tag: 0, or -1 for a field number protobuf refuses. */
static int read_tag(Reader *r, unsigned *field, unsigned *wt)
{
    uint64_t tag;
    if (read_varint(r, &tag) < 0 || (tag >> 3) > 0x1FFFFFFF || (tag >> 3) == 0)
        return -1;
    *field = (unsigned)(tag >> 3);
    *wt = (unsigned)(tag & 7);
    return 0;
}

/* BrokerEntryMetadata {optional uint64 broker_timestamp = 1; optional uint64 index = 2;} */
static int parse_broker(const unsigned char *p, Py_ssize_t n, PlainEntry *e)
{
    Reader r = {p, p + n};
    while (r.p < r.end) {
        unsigned field, wt;
        uint64_t v;
        if (read_tag(&r, &field, &wt) < 0)
            return -1;
        if (field == 1 || field == 2) {
            if (wt != 0 || read_varint(&r, &v) < 0)
                return -1;
            if (field == 1) {
                e->has_broker_timestamp = 1;
                e->broker_timestamp = v;
            } else {
                e->has_index = 1;
                e->index = v;
            }
        } else if (skip_field(&r, wt) < 0)
            return -1;
    }
    if ((e->has_broker_timestamp && e->broker_timestamp > MS_MAX) || (e->has_index && e->index > (uint64_t)INT64_MAX))
        return -1;
    return 0;
}

/* The wire type of each MessageMetadata field the row reads or the rule looks at;
 * -1: a field whose presence makes the entry not plain (markers, transactions,
 * chunks, encryption, compacted batches); 9: skipped whatever its type (unknown). */
static int metadata_wire_type(unsigned field)
{
    switch (field) {
    case 1: case 4: case 5: case 6: case 7: case 16: case 18: case 32:
        return 2;
    case 2: case 3: case 8: case 9: case 11: case 12: case 17: case 19: case 24: case 25: case 30:
        return 0;
    case 13: case 14: case 15: case 20: case 22: case 23: case 26: case 27: case 28: case 29: case 31:
        return -1;
    default:
        return 9;
    }
}

static int parse_metadata(const unsigned char *p, Py_ssize_t n, PlainEntry *e)
{
    Reader r = {p, p + n};
    Single *m = &e->message;
    int has_producer = 0, has_sequence = 0, has_publish = 0;
    while (r.p < r.end) {
        unsigned field, wt;
        uint64_t v;
        if (read_tag(&r, &field, &wt) < 0)
            return -1;
        int want = metadata_wire_type(field);
        if (want < 0)
            return -1;
        if (want == 9) {
            if (skip_field(&r, wt) < 0)
                return -1;
            continue;
        }
        if ((int)wt != want)
            return -1; /* protobuf keeps such a field as unknown: let it judge */
        if (wt == 0) {
            if (read_varint(&r, &v) < 0)
                return -1;
            switch (field) {
            case 2: e->sequence_id = v; has_sequence = 1; break;
            case 3: e->publish_time = v; has_publish = 1; break;
            case 8: if (v != 0) return -1; break; /* compressed (or a codec this proto does not know) */
            case 11: e->is_batch = 1; e->count = (int32_t)(uint32_t)v; break;
            case 12: m->event_time = v; break;
            case 17: m->key_b64 = v != 0; break;
            case 19: e->has_deliver_at_time = 1; e->deliver_at_time = (int64_t)v; break;
            case 25: m->null_value = v != 0; break;
            case 30: m->null_key = v != 0; break;
            default: break; /* uncompressed_size, highest_sequence_id */
            }
            continue;
        }
        const unsigned char *q;
        Py_ssize_t qn;
        if (read_bytes(&r, &q, &qn) < 0)
            return -1;
        switch (field) {
        case 1:
            e->producer_name = (Slice){q, qn};
            has_producer = 1;
            break;
        case 4:
            if (m->nprops == MAX_PROPERTIES || parse_property(q, qn, &m->props_key[m->nprops], &m->props_value[m->nprops]) < 0)
                return -1;
            m->nprops++;
            break;
        case 5:
            e->has_replicated_from = 1;
            e->replicated_from = (Slice){q, qn};
            break;
        case 6:
            m->has_key = 1;
            m->key = (Slice){q, qn};
            break;
        case 16:
            e->has_schema_version = 1;
            e->schema_version = (Slice){q, qn};
            break;
        case 18:
            m->has_ordering_key = 1;
            m->ordering_key = (Slice){q, qn};
            break;
        default:
            break; /* replicate_to, schema_id: not in the row */
        }
    }
    if (!has_producer || !has_sequence || !has_publish)
        return -1; /* required fields missing: the Python twin names them */
    if (!utf8_valid(e->producer_name.p, e->producer_name.n) || (m->has_key && !utf8_valid(m->key.p, m->key.n)) ||
        (e->has_replicated_from && !utf8_valid(e->replicated_from.p, e->replicated_from.n)))
        return -1;
    if (e->publish_time > MS_MAX || m->event_time > MS_MAX || e->sequence_id > (uint64_t)INT64_MAX ||
        (e->has_deliver_at_time && (e->deliver_at_time > (int64_t)MS_MAX || e->deliver_at_time < -(int64_t)MS_MAX)))
        return -1;
    m->has_sequence_id = 1;
    m->sequence_id = e->sequence_id;
    return 0;
}

int parse_plain_entry(const unsigned char *p, Py_ssize_t n, int verify, PlainEntry *e)
{
    memset(e, 0, offsetof(PlainEntry, message));
    memset(&e->message, 0, offsetof(Single, props_key));
    Py_ssize_t off = 0;
    if (n >= 2 && be16(p) == MAGIC_BROKER_ENTRY_METADATA) {
        if (n < 6)
            return -1;
        uint32_t size = be32(p + 2);
        if ((Py_ssize_t)size > n - 6 || parse_broker(p + 6, (Py_ssize_t)size, e) < 0)
            return -1;
        off = 6 + (Py_ssize_t)size;
    }
    if (n - off >= 2 && be16(p + off) == MAGIC_CRC32C) {
        if (n - off < 10)
            return -1;
        uint32_t stored = be32(p + off + 2);
        off += 6;
        if (verify && crc32c_two(p + off, (size_t)(n - off), p, 0) != stored)
            return -1;
    }
    if (n - off < 4)
        return -1;
    uint32_t size = be32(p + off);
    off += 4;
    if (size == 0 || (Py_ssize_t)size > n - off || parse_metadata(p + off, (Py_ssize_t)size, e) < 0)
        return -1;
    e->payload = p + off + size;
    e->payload_n = n - off - (Py_ssize_t)size;
    if (e->payload_n > INT32_MAX)
        return -1;
    e->message.has_payload_size = 1;
    e->message.payload_size = (uint64_t)e->payload_n;
    return 0;
}

/* An optional time; one past what an int64 holds stands for its side's end (as Python compares). */
static int optional_ms(PyObject *obj, int *has, long long *out)
{
    int overflow = 0;
    *has = obj != Py_None;
    if (!*has)
        return 0;
    *out = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (*out == -1 && PyErr_Occurred())
        return -1;
    if (overflow)
        *out = overflow > 0 ? LLONG_MAX : LLONG_MIN;
    return 0;
}

int limits_of(PyObject *t, Limits *l)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) {
        PyErr_SetString(PyExc_TypeError, "limits must be a rows.PlainLimits");
        return -1;
    }
    l->verify = PyObject_IsTrue(PyTuple_GET_ITEM(t, 0));
    if (l->verify < 0 || optional_ms(PyTuple_GET_ITEM(t, 1), &l->has_from, &l->from_ms) < 0 ||
        optional_ms(PyTuple_GET_ITEM(t, 2), &l->has_to, &l->to_ms) < 0)
        return -1;
    l->rows = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 3));
    l->payload_bytes = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 4));
    return PyErr_Occurred() ? -1 : 0;
}
