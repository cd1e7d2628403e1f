/*
 * What bkctl.wire.codecs._plain's two files share (_plain.c: a request's parsers and its
 * answers; _plain_runs.c: a run of ADDs or READs taken apart at once): the plain requests'
 * layouts, their fields taken apart, and an ADD_ENTRY answer's layout.
 */
#ifndef BKCTL_PLAIN_H
#define BKCTL_PLAIN_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_twins.h"

/* The bytes of a BKPacketHeader up to its txnId varint: version 3, the
 * operation (ADD_ENTRY 2, READ_ENTRY 1), the txnId tag. */
static const uint8_t ADD_HEADER_START[5] = {0x08, 0x03, 0x10, 0x02, 0x18};
/* Request.addRequest (field 101), length-delimited; Response.addResponse the same. */
static const uint8_t ADD_FIELD[2] = {0xaa, 0x06};
/* The bytes of a BKPacketHeader up to its txnId varint of a READ_ENTRY. */
static const uint8_t READ_HEADER_START[5] = {0x08, 0x03, 0x10, 0x01, 0x18};
/* Request.readRequest (100), length-delimited; Response.readResponse the same. */
static const uint8_t READ_FIELD[2] = {0xa2, 0x06};

#define MASTER_KEY_LENGTH 20
/* version 2, ADD_ENTRY, in a v2 header's top 16 bits */
#define V2_ADD_TOP 0x0201

/* The varint at b[*pos] into *out, *pos moved past it; 0 when the Python
 * twin's decode fails or its caller refuses the value: past the end, more than
 * ten bytes, or a value of 2^64 or more (every caller refuses those: ids and
 * txnIds must be uint64, and a length that large never matches the bytes left). */
static inline int varint(const uint8_t *b, Py_ssize_t n, Py_ssize_t *pos, uint64_t *out)
{
    return bk_varint(b, n, pos, out) == 1;
}

/* The header field of an ADD/READ request: b[0] is its tag, b[1] its
 * one-byte length, b[2..7) ``start``, then the txnId (and, where allowed, a
 * priority).  Returns the position after the header, or -1.  ``priority`` NULL:
 * none allowed. */
static inline Py_ssize_t header_at(const uint8_t *b, Py_ssize_t n, const uint8_t start[5], uint64_t *txn,
                            uint64_t *priority)
{
    if (n < 7 || b[0] != 0x0a || memcmp(b + 2, start, 5) != 0 || b[1] >= 0x80)
        return -1;
    Py_ssize_t end = 2 + b[1], pos = 7;
    if (!varint(b, n, &pos, txn))
        return -1;
    if (priority != NULL) {
        *priority = 0;
        if (pos < end) {
            if (pos >= n || b[pos] != 0x20)
                return -1;
            pos++;
            if (!varint(b, n, &pos, priority) || *priority >= ((uint64_t)1 << 32))
                return -1;
        }
    }
    return pos == end ? pos : -1;
}

/* The operation message at b[pos] (tag ``field``), running to the end of b,
 * starting with ledgerId (1) and entryId (2): the ids, and the position
 * after them; -1 otherwise. */
static inline Py_ssize_t ids_at(const uint8_t *b, Py_ssize_t n, Py_ssize_t pos, const uint8_t field[2],
                         int64_t *ledger_id, int64_t *entry_id)
{
    uint64_t size, ledger, entry;
    if (pos + 2 > n || b[pos] != field[0] || b[pos + 1] != field[1])
        return -1;
    pos += 2;
    if (!varint(b, n, &pos, &size) || size != (uint64_t)(n - pos) || pos >= n || b[pos] != 0x08)
        return -1;
    pos++;
    if (!varint(b, n, &pos, &ledger) || pos >= n || b[pos] != 0x10)
        return -1;
    pos++;
    if (!varint(b, n, &pos, &entry))
        return -1;
    *ledger_id = (int64_t)ledger; /* int64 fields: two's complement */
    *entry_id = (int64_t)entry;
    return pos;
}

/* b[0..n) as plain_read_request takes it apart: 1 with its ids and the length of its header
 * field (at most 129: a one-byte length), or 0 for None. */
static inline int read_fields(const uint8_t *b, Py_ssize_t n, int64_t *ledger_id, int64_t *entry_id,
                              Py_ssize_t *header_len)
{
    uint64_t txn;
    Py_ssize_t header_end = header_at(b, n, READ_HEADER_START, &txn, NULL);
    if (header_end < 0 || ids_at(b, n, header_end, READ_FIELD, ledger_id, entry_id) != n)
        return 0;
    *header_len = header_end;
    return 1;
}

static inline int need_bytes(PyObject *arg)
{
    if (PyBytes_CheckExact(arg))
        return 1;
    PyErr_Format(PyExc_TypeError, "want bytes, not %.100s", Py_TYPE(arg)->tp_name);
    return 0;
}

/* obj as an int64 into *out; 0 with an exception set when it is not one. */
static inline int i64_of(PyObject *obj, long long *out)
{
    *out = PyLong_AsLongLong(obj);
    return !(*out == -1 && PyErr_Occurred());
}

/* A plain v3 ADD_ENTRY taken apart: where its key and body lie in its bytes. */
typedef struct {
    uint64_t txn;
    int64_t ledger_id, entry_id;
    Py_ssize_t key_at, key_len, body_at, body_len;
    int high_priority, recovery;
} add_fields_t;

/* b[0..n) as plain_add_request takes it apart into *a: 1, or 0 for None. */
static inline int add_fields(const uint8_t *b, Py_ssize_t n, add_fields_t *a)
{
    uint64_t priority, body_len;
    Py_ssize_t pos = header_at(b, n, ADD_HEADER_START, &a->txn, &priority);
    if (pos < 0)
        return 0;
    pos = ids_at(b, n, pos, ADD_FIELD, &a->ledger_id, &a->entry_id);
    if (pos < 0 || pos + 2 > n || b[pos] != 0x1a)
        return 0;
    Py_ssize_t key_len = b[pos + 1];
    Py_ssize_t key_at = pos + 2;
    if (key_len >= 0x80 || key_at + key_len >= n || b[key_at + key_len] != 0x22)
        return 0;
    pos = key_at + key_len + 1;
    if (!varint(b, n, &pos, &body_len) || body_len > (uint64_t)(n - pos))
        return 0;
    /* the body runs to the end, or is followed by exactly AddRequest.flag (100) = RECOVERY_ADD */
    Py_ssize_t end = pos + (Py_ssize_t)body_len;
    a->recovery = 0;
    if (end != n) {
        if (end + 3 != n || b[end] != 0xa0 || b[end + 1] != 0x06 || b[end + 2] != 0x01)
            return 0;
        a->recovery = 1;
    }
    a->key_at = key_at;
    a->key_len = key_len;
    a->body_at = pos;
    a->body_len = end - pos;
    a->high_priority = priority > 0;
    return 1;
}

/* A version-2 ADD's fixed fields: the header's flags, ledgerId, entryId; its key at b + 4 and
 * its body after it.  0 for a payload v2_add_request returns None for. */
static inline int v2_add_fields(const uint8_t *b, Py_ssize_t n, int *flags, int64_t *ledger_id, int64_t *entry_id)
{
    if (n < 4 + MASTER_KEY_LENGTH + 16 || ((b[0] << 8) | b[1]) != V2_ADD_TOP)
        return 0;
    *flags = (b[2] << 8) | b[3];
    *ledger_id = (int64_t)get_be64(b + 4 + MASTER_KEY_LENGTH);
    *entry_id = (int64_t)get_be64(b + 4 + MASTER_KEY_LENGTH + 8);
    return 1;
}

/* obj as a v3 StatusCode number (an int32) into *out; 0 with an exception set when it is not one. */
static inline int status_of(PyObject *obj, long *out)
{
    *out = PyLong_AsLong(obj);
    if (*out == -1 && PyErr_Occurred())
        return 0;
    if (*out < INT32_MIN || *out > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "status out of the int32 range");
        return 0;
    }
    return 1;
}

/* A field's tag byte, then its ``n`` bytes (a varint already encoded): past them. */
static inline uint8_t *put_tagged(uint8_t *o, uint8_t tag, const uint8_t *v, size_t n)
{
    *o++ = tag;
    memcpy(o, v, n);
    return o + n;
}

/* The varints of ADD_ENTRY answers that one status and ledger share, encoded once. */
typedef struct {
    uint8_t status_v[10], ledger_v[10];
    size_t ns, nl;
} add_answers_t;

static inline void plan_add_answers(add_answers_t *r, long status, long long ledger)
{
    /* enums and int64s as protobuf writes them: a negative value sign-extended to 64 bits */
    r->ns = bk_put_varint(r->status_v, (uint64_t)(int64_t)status) - r->status_v;
    r->nl = bk_put_varint(r->ledger_v, (uint64_t)ledger) - r->ledger_v;
}

/* The bytes of the framed answer to the ADD_ENTRY of ``txn`` and ``entry`` (an int64 in two's
 * complement): its length's four, then frame(AddResponseEncoder().encode(...))'s payload. */
static inline size_t add_answer_size(const add_answers_t *r, uint64_t txn, uint64_t entry)
{
    size_t header = 5 + bk_varint_len(txn), inner = 1 + r->ns + 1 + r->nl + 1 + bk_varint_len(entry);
    return 4 + 2 + header + 1 + r->ns + 2 + 1 + inner;
}

/* That answer written at o: past it. */
static inline uint8_t *put_add_answer(uint8_t *o, const add_answers_t *r, uint64_t txn, uint64_t entry)
{
    uint8_t txn_v[10], entry_v[10];
    size_t nt = bk_put_varint(txn_v, txn) - txn_v, ne = bk_put_varint(entry_v, entry) - entry_v;
    size_t header = 5 + nt, inner = 1 + r->ns + 1 + r->nl + 1 + ne; /* both < 0x80: one-byte lengths */
    size_t payload = 2 + header + 1 + r->ns + 2 + 1 + inner;
    *o++ = (uint8_t)(payload >> 24);
    *o++ = (uint8_t)(payload >> 16);
    *o++ = (uint8_t)(payload >> 8);
    *o++ = (uint8_t)payload;
    *o++ = 0x0a; /* header (1) */
    *o++ = (uint8_t)header;
    memcpy(o, ADD_HEADER_START, 5);
    o += 5;
    memcpy(o, txn_v, nt);
    o = put_tagged(o + nt, 0x10, r->status_v, r->ns); /* status (2) */
    *o++ = ADD_FIELD[0]; /* addResponse (101) */
    *o++ = ADD_FIELD[1];
    *o++ = (uint8_t)inner;
    o = put_tagged(o, 0x08, r->status_v, r->ns); /* status (1) */
    o = put_tagged(o, 0x10, r->ledger_v, r->nl); /* ledgerId (2) */
    return put_tagged(o, 0x18, entry_v, ne); /* entryId (3) */
}

/* _plain_runs.c's functions (add_run, v2_add_run, add_answers, v2_add_answers) and its AddRun
 * type added to the module ``m``: 0, or -1 with an exception set. */
int bk_plain_add_runs(PyObject *m);

#endif
