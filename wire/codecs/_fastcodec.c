/*
 * bkctl.wire.codecs._fastcodec: the C twins of the client's per-entry codecs.
 *
 * A client moving 100-byte entries spends its CPU on a few small functions
 * called once per entry or per copy of an entry: packaging an entry with its
 * CRC32C digest, checking the digest of one read back, writing a plain v3
 * READ request, taking the body out of its EOK answer, writing the shared
 * part of an ADD and each copy's header.  In Python each is a dozen slices,
 * joins and varint calls; here each is one allocation and a pass over the
 * bytes.  The loop over a chunk of answers is here too (take_answers), and
 * the one cutting a chunk of bytes into frames (split_frames).  The
 * bookie's disk records are _records.c's.
 *
 * The Python functions are the reference (bkctl.wire.codecs.codec_twins,
 * which records these functions as one interface, CodecTwins): every function
 * here gives the same bytes, and hands anything it does not cover to its
 * Python twin, which the interface's builder hands it once (set_fallbacks:
 * it also says what is wrong with bad input), so a caller never sees a C
 * twin decline.  Used only with fast paths on (bkctl.wire.fastpath);
 * tests/unit/test_fastcodec.py checks each one against its Python twin
 * (take_answers: tests/unit/test_client_take_answers.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_crc32c.h"
#include "_twins.h"

/* ------------------------------------------------------------ helpers */

#define HEADER_LEN 32 /* ledgerId | entryId | lac | length, 4 x i64 BE */
#define CRC32C_LEN 4

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


/* ------------------------------------------------------------ fallbacks */

/* the Python twins of crc32c_package, read_frame, add_part and add_frame (set_fallbacks) */
enum { FB_PACKAGE, FB_READ_FRAME, FB_ADD_PART, FB_ADD_FRAME, FB_COUNT };
static const char *const fallback_names[FB_COUNT] = {"crc32c_package", "read_frame", "add_part", "add_frame"};
static PyObject *fallbacks[FB_COUNT];

/* What the Python twin `which` makes of the arguments the C one does not cover */
static PyObject *fall_back(int which, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *twin = fallbacks[which];
    if (twin == NULL) {
        PyErr_Format(PyExc_RuntimeError, "_fastcodec.%s: its Python twin was not handed in (set_fallbacks)",
                     fallback_names[which]);
        return NULL;
    }
    return PyObject_Vectorcall(twin, args, (size_t)nargs, NULL);
}

PyDoc_STRVAR(set_fallbacks_doc,
"set_fallbacks(crc32c_package, read_frame, add_part, add_frame) -> None\n\n"
"The Python twins of those functions (bkctl.wire.codecs.codec_twins), which they\n"
"hand what they do not cover (their answer, or their error, is theirs).");

static PyObject *set_fallbacks(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("set_fallbacks", nargs, FB_COUNT))
        return NULL;
    for (int i = 0; i < FB_COUNT; i++)
        if (!PyCallable_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "set_fallbacks: %s's twin must be callable", fallback_names[i]);
            return NULL;
        }
    for (int i = 0; i < FB_COUNT; i++) {
        Py_INCREF(args[i]);
        Py_XSETREF(fallbacks[i], args[i]);
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ digests */

PyDoc_STRVAR(crc32c_package_doc,
"crc32c_package(ledger_id, entry_id, lac, length, payload) -> bytes\n\n"
"DigestManager.package for a CRC32C ledger: the 32-byte header, its digest\n"
"and the payload in one allocation.  What it does not cover (ids that are\n"
"not 64-bit ints, a payload that is not bytes) goes to its Python twin.");

static PyObject *crc32c_package(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("crc32c_package", nargs, 5))
        return NULL;
    long long v[4];
    for (int i = 0; i < 4; i++)
        if (!as_i64(args[i], &v[i]))
            return fall_back(FB_PACKAGE, args, nargs);
    PyObject *payload = args[4];
    if (!PyBytes_CheckExact(payload))
        return fall_back(FB_PACKAGE, args, nargs);
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
    int any; /* 0: a ledger id that is not a 64-bit int, which no entry's header holds */
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
    if (self->any && PyBytes_CheckExact(entry) && PyBytes_GET_SIZE(entry) >= HEADER_LEN + CRC32C_LEN
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
    long long ledger_id = 0;
    int any = as_i64(ledger, &ledger_id);
    Checker *self = (Checker *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->ledger_id = ledger_id;
    self->any = any;
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
                        "CRC32C entry of that ledger whose digest and ids check; anything else (every\n"
                        "entry for a ledger id that is not a 64-bit int) is handed to slow(entry,\n"
                        "entry_id) (DigestManager.payload: its result or its error)."),
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
"read_frame(txn_id, ledger_id, entry_id) -> (frame, header_field)\n\n"
"RequestEncoder.read_frame, by hand for a txnId that is a uint64 and\n"
"non-negative int64 ids; by its Python twin otherwise.");

static PyObject *read_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("read_frame", nargs, 3))
        return NULL;
    unsigned long long txn;
    long long ledger, entry;
    if (!as_u64(args[0], &txn) || !as_i64(args[1], &ledger) || !as_i64(args[2], &entry) || ledger < 0 || entry < 0)
        return fall_back(FB_READ_FRAME, args, nargs);
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
"add_part(ledger_id, entry_id, master_key, body, recovery) -> (part, reply)\n\n"
"RequestEncoder.add_part, by hand for non-negative int64 ids, a bytes key of\n"
"under 128 bytes and a bytes body; by its Python twin otherwise.");

static PyObject *add_part(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("add_part", nargs, 5))
        return NULL;
    long long ledger, entry;
    PyObject *key = args[2], *body = args[3];
    if (!as_i64(args[0], &ledger) || !as_i64(args[1], &entry) || ledger < 0 || entry < 0
            || !PyBytes_CheckExact(key) || PyBytes_GET_SIZE(key) >= 0x80 || !PyBytes_CheckExact(body))
        return fall_back(FB_ADD_PART, args, nargs);
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
"is not a uint64 (as its Python twin says); a part that is not bytes, or too\n"
"long for a frame, goes to its Python twin.");

static PyObject *add_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("add_frame", nargs, 2))
        return NULL;
    unsigned long long txn;
    PyObject *part = args[1];
    if (!as_u64(args[0], &txn))
        Py_RETURN_NONE;
    if (!PyBytes_CheckExact(part))
        return fall_back(FB_ADD_FRAME, args, nargs);
    size_t tl = bk_varint_len(txn), head = 7 + tl, pl = (size_t)PyBytes_GET_SIZE(part);
    if (head + pl > 0x7FFFFFFF)
        return fall_back(FB_ADD_FRAME, args, nargs);
    PyObject *frame = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 + head + pl));
    if (frame == NULL)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(frame);
    put_be32(p, (uint32_t)(head + pl));
    put_header_field(p + 4, OP_ADD, txn, tl);
    memcpy(p + 4 + head, PyBytes_AS_STRING(part), pl);
    return pair(frame, PyBytes_FromStringAndSize((const char *)p + 4, (Py_ssize_t)head));
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

/* ------------------------------------------------------------ the module */

/* ------------------------------------------------------------ framing */

PyDoc_STRVAR(split_frames_doc,
"split_frames(buf, limit) -> (frames, pos)\n\n"
"The loop of FrameDecoder.feed: the payloads of the whole frames at the start\n"
"of the bytes buf (i32 BE length | payload), and the position after them.  It\n"
"stops at a frame that is not whole, or whose length is negative or above\n"
"limit: the caller looks at that one (and says what is wrong with it).");

static PyObject *split_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("split_frames", nargs, 2))
        return NULL;
    PyObject *buf = args[0];
    if (!PyBytes_CheckExact(buf)) {
        PyErr_SetString(PyExc_TypeError, "split_frames wants bytes");
        return NULL;
    }
    long long limit = PyLong_AsLongLong(args[1]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(buf);
    Py_ssize_t end = PyBytes_GET_SIZE(buf), pos = 0;
    PyObject *frames = PyList_New(0);
    if (frames == NULL)
        return NULL;
    while (end - pos >= 4) {
        int32_t length = (int32_t)(((uint32_t)b[pos] << 24) | ((uint32_t)b[pos + 1] << 16)
                                   | ((uint32_t)b[pos + 2] << 8) | (uint32_t)b[pos + 3]);
        if (length < 0 || (long long)length > limit || (Py_ssize_t)length > end - pos - 4)
            break;
        PyObject *payload = PyBytes_FromStringAndSize((const char *)b + pos + 4, length);
        if (payload == NULL || PyList_Append(frames, payload) < 0) {
            Py_XDECREF(payload);
            Py_DECREF(frames);
            return NULL;
        }
        Py_DECREF(payload);
        pos += 4 + (Py_ssize_t)length;
    }
    PyObject *at = PyLong_FromSsize_t(pos);
    if (at == NULL) {
        Py_DECREF(frames);
        return NULL;
    }
    return pair(frames, at);
}

static PyMethodDef methods[] = {
    {"crc32c_package", (PyCFunction)(void (*)(void))crc32c_package, METH_FASTCALL, crc32c_package_doc},
    {"read_frame", (PyCFunction)(void (*)(void))read_frame, METH_FASTCALL, read_frame_doc},
    {"plain_read_body", (PyCFunction)(void (*)(void))plain_read_body, METH_FASTCALL, plain_read_body_doc},
    {"add_part", (PyCFunction)(void (*)(void))add_part, METH_FASTCALL, add_part_doc},
    {"add_frame", (PyCFunction)(void (*)(void))add_frame, METH_FASTCALL, add_frame_doc},
    {"take_answers", (PyCFunction)(void (*)(void))take_answers, METH_FASTCALL, take_answers_doc},
    {"split_frames", (PyCFunction)(void (*)(void))split_frames, METH_FASTCALL, split_frames_doc},
    {"hardware_crc32c", hardware_crc32c, METH_O, hardware_crc32c_doc},
    {"set_fallbacks", (PyCFunction)(void (*)(void))set_fallbacks, METH_FASTCALL, set_fallbacks_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastcodec",
    "The C twins of the client's per-entry codecs (see bkctl.wire.codecs.codec_twins).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastcodec(void)
{
    bk_crc_init();
    if ((str_state = PyUnicode_InternFromString("state")) == NULL
            || (str_key = PyUnicode_InternFromString("key")) == NULL
            || (str_ok = PyUnicode_InternFromString("ok")) == NULL
            || (str_fast = PyUnicode_InternFromString("fast")) == NULL)
        return NULL;
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
    /* what bkctl.wire.fastpath's FASTCODEC_API must be: a build older than the sources is not used */
    if (PyModule_AddIntConstant(m, "API", 5) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
