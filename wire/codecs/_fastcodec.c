/*
 * bkctl.wire.codecs._fastcodec: the C twins of the client's per-entry codecs.
 *
 * A client moving 100-byte entries spends its CPU on a few small functions
 * called once per entry or per copy of an entry: packaging an entry with its
 * CRC32C digest, checking the digest of one read back, writing a plain v3
 * READ request, taking the body out of its EOK answer, writing the shared
 * part of an ADD and each copy's header.  In Python each is a dozen slices,
 * joins and varint calls; here each is one allocation and a pass over the
 * bytes.  One more serves the bookie: the record loop of its checkpoint's
 * entry log appends, whose checksums and copies are made without the GIL.
 *
 * The Python functions are the reference (bkctl.wire.codecs.v3,
 * bkctl.wire.codecs.digest): every function here gives the same bytes, or
 * returns None for anything it does not cover, and the caller then takes the
 * Python path (which also says what is wrong with bad input).  Used only
 * with fast paths on (bkctl.wire.fastpath); tests/unit/test_fastcodec.py
 * checks each one against its Python twin (log_records:
 * tests/unit/test_entry_log_records.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_twins.h"

/* ------------------------------------------------------------ CRC32C */

static uint32_t crc_table[8][256];

static void crc_init_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* crc is the running register (already inverted); slicing by eight */
static uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF]
            ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF]
            ^ crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

static int use_hw_crc = 0;

/* CRC32C of a then b, as crc32c(b, crc32c(a)) */
static uint32_t crc32c_two(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
    uint32_t crc = 0xFFFFFFFFu;
#ifdef HAVE_HW_CRC
    if (use_hw_crc) {
        crc = crc_hw(crc, a, na);
        crc = crc_hw(crc, b, nb);
        return crc ^ 0xFFFFFFFFu;
    }
#endif
    crc = crc_soft(crc, a, na);
    crc = crc_soft(crc, b, nb);
    return crc ^ 0xFFFFFFFFu;
}

/* ------------------------------------------------------------ helpers */

#define HEADER_LEN 32 /* ledgerId | entryId | lac | length, 4 x i64 BE */
#define CRC32C_LEN 4

static void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

static uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* a Python int (exactly int) as a signed 64-bit value; 0 when it is not one */
static int as_i64(PyObject *o, long long *out)
{
    if (!PyLong_CheckExact(o))
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

/* a Python int (exactly int) in 0 .. 2**64-1; 0 when it is not one */
static int as_u64(PyObject *o, unsigned long long *out)
{
    if (!PyLong_CheckExact(o))
        return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

/* the varint at b[*pos] (end: len): 0 past the end or beyond ten bytes; a
 * value past 64 bits is reported as UINT64_MAX (it matches no length here) */
static int get_varint(const unsigned char *b, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    int got = bk_varint(b, end, pos, out);
    if (got < 0)
        *out = UINT64_MAX;
    return got != 0;
}

/* v3._skip_varint: the position after the varint at b[pos], -1 past the end or beyond ten bytes */
static Py_ssize_t skip_varint(const unsigned char *b, Py_ssize_t end, Py_ssize_t pos)
{
    Py_ssize_t start = pos;
    for (;;) {
        if (pos >= end)
            return -1;
        if (b[pos] < 0x80)
            break;
        pos++;
    }
    if (pos - start > 9)
        return -1;
    return pos + 1;
}

/* (a, b), stealing both references; NULL (and nothing leaked) when either is NULL */
static PyObject *pair(PyObject *a, PyObject *b)
{
    PyObject *out = (a != NULL && b != NULL) ? PyTuple_New(2) : NULL;
    if (out == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, a);
    PyTuple_SET_ITEM(out, 1, b);
    return out;
}

/* ------------------------------------------------------------ digests */

PyDoc_STRVAR(crc32c_package_doc,
"crc32c_package(ledger_id, entry_id, lac, length, payload) -> bytes | None\n\n"
"DigestManager.package for a CRC32C ledger: the 32-byte header, its digest\n"
"and the payload in one allocation.  None for what it does not cover (ids\n"
"that are not 64-bit ints, a payload that is not bytes).");

static PyObject *crc32c_package(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("crc32c_package", nargs, 5))
        return NULL;
    long long v[4];
    for (int i = 0; i < 4; i++)
        if (!as_i64(args[i], &v[i]))
            Py_RETURN_NONE;
    PyObject *payload = args[4];
    if (!PyBytes_CheckExact(payload))
        Py_RETURN_NONE;
    Py_ssize_t n = PyBytes_GET_SIZE(payload);
    PyObject *out = PyBytes_FromStringAndSize(NULL, HEADER_LEN + CRC32C_LEN + n);
    if (out == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    for (int i = 0; i < 4; i++)
        put_be64(p + 8 * i, (uint64_t)v[i]);
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(payload);
    put_be32(p + HEADER_LEN, crc32c_two(p, HEADER_LEN, data, (size_t)n));
    memcpy(p + HEADER_LEN + CRC32C_LEN, data, (size_t)n);
    return out;
}

/* Crc32cChecker(ledger_id, slow): the reader's check of one CRC32C entry */
typedef struct {
    PyObject_HEAD
    long long ledger_id;
    PyObject *slow;
    vectorcallfunc vectorcall;
} Checker;

static PyObject *checker_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Checker *self = (Checker *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "a checker takes (entry, entry_id)");
        return NULL;
    }
    PyObject *entry = args[0];
    long long entry_id;
    if (PyBytes_CheckExact(entry) && PyBytes_GET_SIZE(entry) >= HEADER_LEN + CRC32C_LEN
            && as_i64(args[1], &entry_id)) {
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(entry);
        Py_ssize_t n = PyBytes_GET_SIZE(entry);
        uint32_t stored = get_be32(b + HEADER_LEN);
        if ((long long)get_be64(b) == self->ledger_id && (long long)get_be64(b + 8) == entry_id
                && stored == crc32c_two(b, HEADER_LEN, b + HEADER_LEN + CRC32C_LEN,
                                        (size_t)(n - HEADER_LEN - CRC32C_LEN)))
            return PyBytes_FromStringAndSize((const char *)b + HEADER_LEN + CRC32C_LEN,
                                             n - HEADER_LEN - CRC32C_LEN);
    }
    /* anything else: the Python check says what is wrong (or accepts it) */
    return PyObject_Vectorcall(self->slow, args, nargs, NULL);
}

static PyObject *checker_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *ledger, *slow;
    if (!PyArg_ParseTuple(args, "OO:Crc32cChecker", &ledger, &slow))
        return NULL;
    long long ledger_id;
    if (!as_i64(ledger, &ledger_id)) {
        PyErr_SetString(PyExc_ValueError, "ledger_id must be a 64-bit int");
        return NULL;
    }
    Checker *self = (Checker *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->ledger_id = ledger_id;
    Py_INCREF(slow);
    self->slow = slow;
    self->vectorcall = checker_vectorcall;
    return (PyObject *)self;
}

static int checker_traverse(Checker *self, visitproc visit, void *arg)
{
    Py_VISIT(self->slow);
    return 0;
}

static int checker_clear(Checker *self)
{
    Py_CLEAR(self->slow);
    return 0;
}

static void checker_dealloc(Checker *self)
{
    PyObject_GC_UnTrack(self);
    checker_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject CheckerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bkctl.wire.codecs._fastcodec.Crc32cChecker",
    .tp_doc = PyDoc_STR("Crc32cChecker(ledger_id, slow): called with (entry, entry_id), the payload of a\n"
                        "CRC32C entry of that ledger whose digest and ids check; anything else is handed\n"
                        "to slow(entry, entry_id) (DigestManager.payload: its result or its error)."),
    .tp_basicsize = sizeof(Checker),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = checker_new,
    .tp_dealloc = (destructor)checker_dealloc,
    .tp_traverse = (traverseproc)checker_traverse,
    .tp_clear = (inquiry)checker_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Checker, vectorcall),
};

/* ------------------------------------------------------------ v3 requests and answers */

/* BKPacketHeader{version 3, operation, txnId} as field 1 of a Request: 0a len 08 03 10 op 18 txn */
#define V3 3
#define OP_READ 1
#define OP_ADD 2

static unsigned char *put_header_field(unsigned char *p, int op, uint64_t txn, size_t txn_len)
{
    *p++ = 0x0a;
    *p++ = (unsigned char)(5 + txn_len);
    *p++ = 0x08;
    *p++ = V3;
    *p++ = 0x10;
    *p++ = (unsigned char)op;
    *p++ = 0x18;
    return bk_put_varint(p, txn);
}

PyDoc_STRVAR(read_frame_doc,
"read_frame(txn_id, ledger_id, entry_id) -> (frame, header_field) | None\n\n"
"RequestEncoder.read_frame for ids it writes by hand (a txnId that is a\n"
"uint64, non-negative int64 ids); None otherwise.");

static PyObject *read_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("read_frame", nargs, 3))
        return NULL;
    unsigned long long txn;
    long long ledger, entry;
    if (!as_u64(args[0], &txn) || !as_i64(args[1], &ledger) || !as_i64(args[2], &entry) || ledger < 0 || entry < 0)
        Py_RETURN_NONE;
    size_t tl = bk_varint_len(txn), ll = bk_varint_len((uint64_t)ledger), el = bk_varint_len((uint64_t)entry);
    size_t head = 7 + tl, inner = 2 + ll + el;
    size_t payload = head + 3 + inner;
    unsigned char buf[64];
    unsigned char *p = buf;
    put_be32(p, (uint32_t)payload);
    p += 4;
    p = put_header_field(p, OP_READ, txn, tl);
    *p++ = 0xa2; /* readRequest (100) */
    *p++ = 0x06;
    *p++ = (unsigned char)inner;
    *p++ = 0x08;
    p = bk_put_varint(p, (uint64_t)ledger);
    *p++ = 0x10;
    p = bk_put_varint(p, (uint64_t)entry);
    return pair(PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)(4 + payload)),
                PyBytes_FromStringAndSize((const char *)buf + 4, (Py_ssize_t)head));
}

PyDoc_STRVAR(plain_read_body_doc,
"plain_read_body(payload, pos) -> bytes | None\n\n"
"v3.plain_read_body: the body of an EOK READ answer whose header field ends\n"
"at pos, or None (then the answer is parsed).");

/* Where the body of an EOK READ answer whose header field ends at pos lies
 * (v3.plain_read_body's shape): 1 with *body and *size set, else 0. */
static int read_body_span(const unsigned char *b, Py_ssize_t end, Py_ssize_t pos, Py_ssize_t *body,
                          Py_ssize_t *size_out)
{
    uint64_t size;
    if (pos > end || end - pos < 5 || memcmp(b + pos, "\x10\x00\xa2\x06", 4) != 0)
        return 0;
    pos += 4;
    if (!get_varint(b, end, &pos, &size) || size != (uint64_t)(end - pos))
        return 0;
    if (end - pos < 3 || memcmp(b + pos, "\x08\x00\x10", 3) != 0)
        return 0;
    pos = skip_varint(b, end, pos + 3); /* ledgerId */
    if (pos < 0 || pos >= end || b[pos] != 0x18) /* entryId (3) */
        return 0;
    pos = skip_varint(b, end, pos + 1);
    if (pos < 0 || pos >= end || b[pos] != 0x22) /* body (4) */
        return 0;
    pos += 1;
    if (!get_varint(b, end, &pos, &size) || size > (uint64_t)(end - pos))
        return 0;
    Py_ssize_t stop = pos + (Py_ssize_t)size;
    if (stop < end && b[stop] == 0x28) { /* maxLAC (5) */
        stop = skip_varint(b, end, stop + 1);
        if (stop >= 0 && stop < end && b[stop] == 0x30) /* lacUpdateTimestamp (6) */
            stop = skip_varint(b, end, stop + 1);
    } else if (stop < end && b[stop] == 0x30) {
        stop = skip_varint(b, end, stop + 1);
    }
    if (stop != end)
        return 0;
    *body = pos;
    *size_out = (Py_ssize_t)size;
    return 1;
}

static PyObject *plain_read_body(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("plain_read_body", nargs, 2))
        return NULL;
    PyObject *payload = args[0];
    long long start;
    if (!PyBytes_CheckExact(payload) || !as_i64(args[1], &start) || start < 0)
        Py_RETURN_NONE;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(payload);
    Py_ssize_t body, size;
    if (!read_body_span(b, PyBytes_GET_SIZE(payload), (Py_ssize_t)start, &body, &size))
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)b + body, size);
}

PyDoc_STRVAR(add_part_doc,
"add_part(ledger_id, entry_id, master_key, body, recovery) -> (part, reply) | None\n\n"
"RequestEncoder.add_part for what it writes by hand (non-negative int64 ids,\n"
"bytes key of under 128 bytes and body); None otherwise.");

static PyObject *add_part(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("add_part", nargs, 5))
        return NULL;
    long long ledger, entry;
    PyObject *key = args[2], *body = args[3];
    if (!as_i64(args[0], &ledger) || !as_i64(args[1], &entry) || ledger < 0 || entry < 0
            || !PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) >= 0x80 || !PyBytes_CheckExact(body))
        Py_RETURN_NONE;
    int recovery = PyObject_IsTrue(args[4]);
    if (recovery < 0)
        return NULL;
    size_t ll = bk_varint_len((uint64_t)ledger), el = bk_varint_len((uint64_t)entry);
    size_t kl = (size_t)PyBytes_GET_SIZE(key), bl = (size_t)PyBytes_GET_SIZE(body);
    size_t ids = ll + 1 + el, body_len = bk_varint_len(bl), flag = recovery ? 3 : 0;
    size_t size = 4 + ids + kl + body_len + bl + flag;
    PyObject *part = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(2 + bk_varint_len(size) + size));
    if (part == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(part);
    *p++ = 0xaa; /* addRequest (101) */
    *p++ = 0x06;
    p = bk_put_varint(p, size);
    *p++ = 0x08;
    p = bk_put_varint(p, (uint64_t)ledger);
    *p++ = 0x10;
    p = bk_put_varint(p, (uint64_t)entry);
    *p++ = 0x1a;
    *p++ = (unsigned char)kl;
    memcpy(p, PyBytes_AS_STRING(key), kl);
    p += kl;
    *p++ = 0x22;
    p = bk_put_varint(p, bl);
    memcpy(p, PyBytes_AS_STRING(body), bl);
    p += bl;
    if (recovery) { /* flag (100): RECOVERY_ADD */
        *p++ = 0xa0;
        *p++ = 0x06;
        *p++ = 0x01;
    }
    /* the EOK answer after its header: status EOK (2), addResponse (101) {status EOK, ids} */
    unsigned char rbuf[48];
    unsigned char *r = rbuf;
    size_t answer = 3 + ll + 1 + el;
    *r++ = 0x10;
    *r++ = 0x00;
    *r++ = 0xaa;
    *r++ = 0x06;
    *r++ = (unsigned char)answer;
    *r++ = 0x08;
    *r++ = 0x00;
    *r++ = 0x10;
    r = bk_put_varint(r, (uint64_t)ledger);
    *r++ = 0x18;
    r = bk_put_varint(r, (uint64_t)entry);
    return pair(part, PyBytes_FromStringAndSize((const char *)rbuf, r - rbuf));
}

PyDoc_STRVAR(add_frame_doc,
"add_frame(txn_id, part) -> (frame, header_field) | None\n\n"
"One copy of an ADD encoded once for its write set (normal priority): the\n"
"frame of its header field (txn_id) followed by part (add_part's), and that\n"
"header field, which the bookie's answer starts with.  None for a txnId that\n"
"is not a uint64 or a part that is not bytes.");

static PyObject *add_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("add_frame", nargs, 2))
        return NULL;
    unsigned long long txn;
    PyObject *part = args[1];
    if (!as_u64(args[0], &txn) || !PyBytes_CheckExact(part))
        Py_RETURN_NONE;
    size_t tl = bk_varint_len(txn), head = 7 + tl, pl = (size_t)PyBytes_GET_SIZE(part);
    if (head + pl > 0x7FFFFFFF)
        Py_RETURN_NONE;
    PyObject *frame = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 + head + pl));
    if (frame == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(frame);
    put_be32(p, (uint32_t)(head + pl));
    put_header_field(p + 4, OP_ADD, txn, tl);
    memcpy(p + 4 + head, PyBytes_AS_STRING(part), pl);
    return pair(frame, PyBytes_FromStringAndSize((const char *)p + 4, (Py_ssize_t)head));
}

/* ------------------------------------------------------------ entry log records */

/* below this many bytes of records the GIL is kept: handing it over costs more than the work */
#define RECORDS_RELEASE_GIL 65536

PyDoc_STRVAR(log_records_doc,
"log_records(ledger_id, pairs, start, log_id, pos, limit, budget) -> (chunk, rows) | None\n\n"
"The records LogWriter.append writes for pairs[start:] (one ledger's\n"
"(entry_id, data) pairs) into log log_id from offset pos: chunk is their bytes\n"
"(encode_log_record's, one after the other), rows their index rows\n"
"(key, location), one per record.  It stops before a record that would end\n"
"past limit (but always takes the first, which the caller placed), after the\n"
"record that makes chunk at least budget bytes, and before a pair it does not\n"
"cover (not a tuple of an int64 id and bytes, a row's field past 32 bits):\n"
"None when pairs[start] is one (or there is none), and the caller takes its\n"
"Python path.\n"
"The checksums and the copies of the data are made without the GIL (for a\n"
"chunk of 64 KiB or more), so that the thread that flushes leaves the others\n"
"their cores.");

typedef struct {
    PyObject *data;
    long long entry;
} RecordSource;

/* The records of src[0..k) (``total`` bytes) one after the other at p, each: the CRC32C
 * of what follows up to its data's end (4 bytes), its head (the length of what follows
 * the length, as u32; a type byte unless ``type`` is negative; ledger and entry as i64;
 * big-endian), then its data.  The entry logs' records have no type byte, the journal's
 * have one.  Without the GIL for RECORDS_RELEASE_GIL bytes and more: p must not be
 * shared yet and each data must be held. */
static void write_records(unsigned char *p, const RecordSource *src, Py_ssize_t k, long long ledger, int type,
                          size_t total)
{
    size_t head = type < 0 ? 20 : 21;
    PyThreadState *saved = total >= RECORDS_RELEASE_GIL ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t i = 0; i < k; i++) {
        const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(src[i].data);
        size_t dn = (size_t)PyBytes_GET_SIZE(src[i].data);
        unsigned char *ids = p + 8;
        put_be32(p + 4, (uint32_t)(dn + head - 4));
        if (type >= 0)
            *ids++ = (unsigned char)type;
        put_be64(ids, (uint64_t)ledger);
        put_be64(ids + 8, (uint64_t)src[i].entry);
        put_be32(p, crc32c_two(p + 4, head, data, dn));
        memcpy(p + 4 + head, data, dn);
        p += 4 + head + dn;
    }
    if (saved != NULL)
        PyEval_RestoreThread(saved);
}

static PyObject *log_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("log_records", nargs, 7))
        return NULL;
    long long ledger = 0, start, pos0, limit, budget;
    unsigned long long log_id;
    PyObject *pairs = args[1];
    if (!PyList_CheckExact(pairs))
        return PyErr_Format(PyExc_TypeError, "log_records: pairs must be a list");
    if (!as_i64(args[2], &start) || !as_u64(args[3], &log_id) || !as_i64(args[4], &pos0)
            || !as_i64(args[5], &limit) || !as_i64(args[6], &budget) || start < 0 || pos0 < 0)
        return PyErr_Format(PyExc_ValueError, "log_records: the log id and offsets must be 64-bit ints");
    /* a ledger id that is not an int64: no record covered (the Python path says what is wrong) */
    Py_ssize_t avail = as_i64(args[0], &ledger) ? PyList_GET_SIZE(pairs) - (Py_ssize_t)start : 0;
    if (budget / 24 + 1 < avail) /* a record has 24 bytes at least: no more fill the budget */
        avail = budget > 0 ? (Py_ssize_t)(budget / 24 + 1) : 1;
    RecordSource *src = PyMem_Malloc(sizeof(RecordSource) * (size_t)(avail > 0 ? avail : 1));
    if (src == NULL)
        return PyErr_NoMemory();
    /* which records: under the GIL, holding each one's data until its copy is made */
    Py_ssize_t k = 0;
    long long pos = pos0, total = 0;
    for (; k < avail; k++) {
        PyObject *item = PyList_GET_ITEM(pairs, (Py_ssize_t)start + k);
        long long entry;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 || !as_i64(PyTuple_GET_ITEM(item, 0), &entry))
            break;
        PyObject *data = PyTuple_GET_ITEM(item, 1);
        if (!PyBytes_CheckExact(data))
            break;
        long long n = (long long)PyBytes_GET_SIZE(data) + 24;
        if (pos > 0xFFFFFFFFLL || n > 0xFFFFFFFFLL || (k > 0 && pos + n > limit))
            break;
        Py_INCREF(data);
        src[k].data = data;
        src[k].entry = entry;
        pos += n;
        total += n;
        if (total >= budget) {
            k++;
            break;
        }
    }
    PyObject *chunk = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    PyObject *rows = chunk != NULL ? PyList_New(k) : NULL;
    unsigned char loc[16], key[16];
    put_be64(loc, (uint64_t)log_id);
    put_be64(key, (uint64_t)ledger);
    pos = pos0;
    for (Py_ssize_t i = 0; rows != NULL && i < k; i++) {
        uint32_t n = (uint32_t)PyBytes_GET_SIZE(src[i].data) + 24;
        put_be64(key + 8, (uint64_t)src[i].entry);
        put_be32(loc + 8, (uint32_t)pos);
        put_be32(loc + 12, n);
        PyObject *row = pair(PyBytes_FromStringAndSize((const char *)key, 16),
                             PyBytes_FromStringAndSize((const char *)loc, 16));
        if (row == NULL)
            Py_CLEAR(rows);
        else
            PyList_SET_ITEM(rows, i, row);
        pos += n;
    }
    if (rows != NULL) {
        /* the chunk is not shared yet and each data is held: no Python object changes here */
        write_records((unsigned char *)PyBytes_AS_STRING(chunk), src, k, ledger, -1, (size_t)total);
    }
    for (Py_ssize_t i = 0; i < k; i++)
        Py_DECREF(src[i].data);
    PyMem_Free(src);
    if (rows == NULL) {
        Py_XDECREF(chunk);
        return NULL;
    }
    if (k == 0) {
        Py_DECREF(chunk);
        Py_DECREF(rows);
        Py_RETURN_NONE;
    }
    return pair(chunk, rows);
}

/* ------------------------------------------------------------ journal records */

PyDoc_STRVAR(journal_entries_doc,
"journal_entries(ledger_id, entry_ids, bodies, record_type) -> bytes | None\n\n"
"The bookie journal's records of one ledger's entries, one after the other\n"
"(bookied.journal's _encode_entry of each): the CRC32C of head and body (4\n"
"bytes), the head (len(body) + 17 as u32, record_type as a byte, ledger_id\n"
"and the entry id as i64, big-endian) and the body.  None when an id is not\n"
"an int64, a body not bytes or the lists differ in length: the caller takes\n"
"its Python path.  The checksums and copies are made without the GIL for\n"
"64 KiB of records or more.");

static PyObject *journal_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("journal_entries", nargs, 4))
        return NULL;
    long long ledger, type;
    PyObject *ids = args[1], *bodies = args[2];
    if (!PyList_CheckExact(ids) || !PyList_CheckExact(bodies) || PyList_GET_SIZE(ids) != PyList_GET_SIZE(bodies)
            || !as_i64(args[0], &ledger) || !as_i64(args[3], &type) || type < 0 || type > 255)
        Py_RETURN_NONE;
    Py_ssize_t k = PyList_GET_SIZE(ids);
    RecordSource *src = PyMem_Malloc(sizeof(RecordSource) * (size_t)(k > 0 ? k : 1));
    if (src == NULL)
        return PyErr_NoMemory();
    /* under the GIL: every id and body checked, each body held until its copy is made */
    Py_ssize_t taken = 0;
    size_t total = 0;
    for (; taken < k; taken++) {
        PyObject *data = PyList_GET_ITEM(bodies, taken);
        long long entry;
        if (!as_i64(PyList_GET_ITEM(ids, taken), &entry) || !PyBytes_CheckExact(data)
                || (size_t)PyBytes_GET_SIZE(data) > 0xFFFFFFFFu - 17)
            break;
        Py_INCREF(data);
        src[taken].data = data;
        src[taken].entry = entry;
        total += 25 + (size_t)PyBytes_GET_SIZE(data);
    }
    PyObject *out = NULL;
    if (taken == k && (out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total)) != NULL) {
        write_records((unsigned char *)PyBytes_AS_STRING(out), src, k, ledger, (int)type, total);
    }
    for (Py_ssize_t i = 0; i < taken; i++)
        Py_DECREF(src[i].data);
    PyMem_Free(src);
    if (out == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return out;
}

/* ------------------------------------------------------------ entry log reads */

PyDoc_STRVAR(span_records_doc,
"span_records(span, base, rows, start, end, ledger_id, entry_ids, out) -> int\n\n"
"EntryStore.get_entries' check of the records read with one pread: span is the\n"
"bytes read from offset base of a log, rows[start:end] index rows (log_id,\n"
"offset, length, i) of entries in it.  For each row whose record check_record\n"
"passes (inside span, its length, ledger, entry entry_ids[i] and CRC32C as\n"
"written), out[i] = the entry's bytes.  Stops at the first row it does not\n"
"take -- a record check_record would refuse, or a row not of that shape -- and\n"
"returns its index (end when it took them all): the caller checks that one\n"
"the Python way (raising its precise error) and goes on after it.");

static PyObject *span_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("span_records", nargs, 8))
        return NULL;
    PyObject *span = args[0], *rows = args[2], *ids = args[6], *out = args[7];
    long long base, ledger;
    Py_ssize_t k = PyLong_AsSsize_t(args[3]), end = PyLong_AsSsize_t(args[4]);
    if ((k == -1 || end == -1) && PyErr_Occurred())
        return NULL;
    if (!PyBytes_CheckExact(span) || !PyList_CheckExact(rows) || !PyList_CheckExact(ids) || !PyList_CheckExact(out)
        || !as_i64(args[1], &base) || !as_i64(args[5], &ledger))
        return PyLong_FromSsize_t(k);
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(span);
    long long n = (long long)PyBytes_GET_SIZE(span);
    if (end > PyList_GET_SIZE(rows))
        end = PyList_GET_SIZE(rows);
    for (; k >= 0 && k < end; k++) {
        PyObject *row = PyList_GET_ITEM(rows, k);
        long long off, length, i, entry;
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != 4 || !as_i64(PyTuple_GET_ITEM(row, 1), &off)
            || !as_i64(PyTuple_GET_ITEM(row, 2), &length) || !as_i64(PyTuple_GET_ITEM(row, 3), &i)
            || i < 0 || i >= PyList_GET_SIZE(ids) || i >= PyList_GET_SIZE(out)
            || !as_i64(PyList_GET_ITEM(ids, (Py_ssize_t)i), &entry))
            break;
        long long pos = off - base;
        if (length < 24 || pos < 0 || pos > n || length > n - pos)
            break;
        const unsigned char *r = b + pos;
        /* the record: CRC32C of the rest, the length of the rest, ledger, entry, data */
        if ((long long)get_be32(r + 4) != length - 8 || (long long)get_be64(r + 8) != ledger
            || (long long)get_be64(r + 16) != entry || crc32c_two(r + 4, (size_t)(length - 4), r, 0) != get_be32(r))
            break;
        PyObject *data = PyBytes_FromStringAndSize((const char *)r + 24, (Py_ssize_t)(length - 24));
        if (data == NULL)
            return NULL;
        if (PyList_SetItem(out, (Py_ssize_t)i, data) < 0) /* steals data */
            return NULL;
    }
    return PyLong_FromSsize_t(k);
}

/* ------------------------------------------------------------ the answer loop */

static PyObject *str_state, *str_key, *str_ok, *str_fast;

/* requests.SENT: a request on the wire (tests/unit/test_client_take_answers.py checks it) */
#define REQUEST_SENT 1

/* What RequestTable.fast_result makes of payload for the request req
 * (found under its header field): 1 with *result set (a new reference:
 * None for an ADD, the entry for a READ) when it takes it; 0 when it does
 * not (the general path then decides, as it would have); -1 on an error. */
static int fast_result(PyObject *req, PyObject *pending, const unsigned char *b, Py_ssize_t n,
                       PyObject **result)
{
    int taken = 0;
    PyObject *state = NULL, *key = NULL, *ok = NULL, *fast = NULL;
    if ((state = PyObject_GetAttr(req, str_state)) == NULL || (key = PyObject_GetAttr(req, str_key)) == NULL)
        goto fail;
    if (!PyLong_CheckExact(state) || PyLong_AsLong(state) != REQUEST_SENT) {
        if (PyErr_Occurred())
            goto fail;
        goto done;
    }
    PyObject *on_wire = PyDict_GetItemWithError(pending, key); /* borrowed */
    if (on_wire != req) {
        if (on_wire == NULL && PyErr_Occurred())
            goto fail;
        goto done;
    }
    if ((ok = PyObject_GetAttr(req, str_ok)) == NULL || (fast = PyObject_GetAttr(req, str_fast)) == NULL)
        goto fail;
    if (!PyBytes_CheckExact(fast))
        goto done;
    Py_ssize_t head = PyBytes_GET_SIZE(fast);
    if (ok != Py_None) { /* an ADD: the rest of its EOK answer, byte for byte */
        if (!PyBytes_CheckExact(ok))
            goto done;
        Py_ssize_t k = PyBytes_GET_SIZE(ok);
        if (n != head + k || memcmp(b + n - k, PyBytes_AS_STRING(ok), (size_t)k) != 0)
            goto done;
        Py_INCREF(Py_None);
        *result = Py_None;
    } else { /* a READ: an EOK ReadResponse with a body */
        Py_ssize_t body, size;
        if (!read_body_span(b, n, head, &body, &size))
            goto done;
        if ((*result = PyBytes_FromStringAndSize((const char *)b + body, size)) == NULL)
            goto fail;
    }
    if (PyDict_DelItem(pending, key) < 0) {
        Py_CLEAR(*result);
        goto fail;
    }
    taken = 1;
    goto done;
fail:
    taken = -1;
done:
    Py_XDECREF(state);
    Py_XDECREF(key);
    Py_XDECREF(ok);
    Py_XDECREF(fast);
    return taken;
}

PyDoc_STRVAR(take_answers_doc,
"take_answers(payloads, start, fast, pending, answered) -> int\n\n"
"RequestTable.take_answers, its owner handing it its two dicts: the EOK answers\n"
"payloads[start:] of the plain requests on the wire, while it takes them, each\n"
"taken one out of fast (by its header field) and pending (by txnId) and handed\n"
"to answered(req, result), which returns whether to go on; the index of the\n"
"first it does not take (or the one after an answered() that said stop).");

static PyObject *take_answers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("take_answers", nargs, 5))
        return NULL;
    PyObject *payloads = args[0], *fast = args[2], *pending = args[3], *answered = args[4];
    if (!PyList_CheckExact(payloads) || !PyDict_CheckExact(fast) || !PyDict_CheckExact(pending)) {
        PyErr_SetString(PyExc_TypeError, "take_answers wants a list of payloads and two dicts");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    for (; i >= 0 && i < PyList_GET_SIZE(payloads); i++) {
        PyObject *payload = PyList_GET_ITEM(payloads, i);
        if (!PyBytes_CheckExact(payload) || PyBytes_GET_SIZE(payload) <= 2)
            break;
        Py_INCREF(payload);
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(payload);
        Py_ssize_t n = PyBytes_GET_SIZE(payload), h = 2 + (Py_ssize_t)b[1];
        PyObject *head = PyBytes_FromStringAndSize((const char *)b, h < n ? h : n);
        PyObject *req = head == NULL ? NULL : PyDict_GetItemWithError(fast, head);
        Py_XINCREF(req);
        PyObject *result = NULL;
        int taken = req == NULL ? (PyErr_Occurred() ? -1 : 0) : fast_result(req, pending, b, n, &result);
        if (taken == 1 && PyDict_DelItem(fast, head) < 0)
            taken = -1;
        Py_XDECREF(head);
        Py_DECREF(payload);
        int go = 1;
        if (taken == 1) {
            PyObject *call[2] = {req, result};
            PyObject *r = PyObject_Vectorcall(answered, call, 2, NULL);
            go = r == NULL ? -1 : PyObject_IsTrue(r); /* False: a callback closed the connection */
            Py_XDECREF(r);
            if (go < 0)
                taken = -1;
        }
        Py_XDECREF(result);
        Py_XDECREF(req);
        if (taken < 0)
            return NULL;
        if (taken == 0)
            break;
        if (!go) {
            i++;
            break;
        }
    }
    return PyLong_FromSsize_t(i);
}

PyDoc_STRVAR(hardware_crc32c_doc,
"hardware_crc32c(on) -> bool\n\n"
"For tests: compute CRC32C with the CPU's instruction (on, where it has one)\n"
"or the table; returns whether the instruction is used now.");

static PyObject *hardware_crc32c(PyObject *self, PyObject *on)
{
    int want = PyObject_IsTrue(on);
    if (want < 0)
        return NULL;
    use_hw_crc = 0;
#ifdef HAVE_HW_CRC
    if (want && __builtin_cpu_supports("sse4.2"))
        use_hw_crc = 1;
#endif
    return PyBool_FromLong(use_hw_crc);
}

/* ------------------------------------------------------------ the module */

static PyMethodDef methods[] = {
    {"crc32c_package", (PyCFunction)(void (*)(void))crc32c_package, METH_FASTCALL, crc32c_package_doc},
    {"read_frame", (PyCFunction)(void (*)(void))read_frame, METH_FASTCALL, read_frame_doc},
    {"plain_read_body", (PyCFunction)(void (*)(void))plain_read_body, METH_FASTCALL, plain_read_body_doc},
    {"add_part", (PyCFunction)(void (*)(void))add_part, METH_FASTCALL, add_part_doc},
    {"add_frame", (PyCFunction)(void (*)(void))add_frame, METH_FASTCALL, add_frame_doc},
    {"take_answers", (PyCFunction)(void (*)(void))take_answers, METH_FASTCALL, take_answers_doc},
    {"log_records", (PyCFunction)(void (*)(void))log_records, METH_FASTCALL, log_records_doc},
    {"span_records", (PyCFunction)(void (*)(void))span_records, METH_FASTCALL, span_records_doc},
    {"journal_entries", (PyCFunction)(void (*)(void))journal_entries, METH_FASTCALL, journal_entries_doc},
    {"hardware_crc32c", hardware_crc32c, METH_O, hardware_crc32c_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastcodec",
    "The C twins of the client's per-entry codecs (see bkctl.wire.codecs.fast).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastcodec(void)
{
    crc_init_tables();
    if ((str_state = PyUnicode_InternFromString("state")) == NULL
            || (str_key = PyUnicode_InternFromString("key")) == NULL
            || (str_ok = PyUnicode_InternFromString("ok")) == NULL
            || (str_fast = PyUnicode_InternFromString("fast")) == NULL)
        return NULL;
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    use_hw_crc = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    if (PyType_Ready(&CheckerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&CheckerType);
    if (PyModule_AddObject(m, "Crc32cChecker", (PyObject *)&CheckerType) < 0) {
        Py_DECREF(&CheckerType);
        Py_DECREF(m);
        return NULL;
    }
    /* what wire/codecs/fast.py's C_API must be: a build older than the sources is not used */
    if (PyModule_AddIntConstant(m, "API", 2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
