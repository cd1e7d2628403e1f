/*
 * bkctl.wire.codecs._plain: the C twins of the bookie's hand-made request
 * parsers and of its ADD and READ answers, the hot path of every add and read.
 *
 * A bookie takes apart each request a client sends.  The Python twins
 * (bkctl.wire.codecs.v3.plain_add_request / plain_read_request,
 * v2.plain_add_request, v3.AddResponseEncoder) cost a few microseconds a
 * request, most of it varints read one byte at a time by the interpreter:
 * about a tenth of a loaded bookie's CPU.  Here the same bytes are walked
 * once in C.
 *
 * The Python twins are the reference: each function here returns exactly
 * what its twin returns for every input (None for anything but the plain
 * layout, which then goes through the general parser), checked by
 * tests/unit/test_plain_c.py and the fuzz target ``plain_c_twins``.  Which
 * twin the bookie uses is chosen in one place, v3.PLAIN; BKCTL_FASTPATHS=0
 * switches these off with the other fast paths.  Only ``bytes`` are taken
 * (what a frame decoder gives); anything else is a TypeError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_twins.h"

/* Checked by v3.py before these twins are used: a build older than the
 * sources (another API) is not. */
#define PLAIN_API 4

/* The bytes of a BKPacketHeader up to its txnId varint: version 3, the
 * operation (ADD_ENTRY 2, READ_ENTRY 1), the txnId tag. */
static const uint8_t ADD_HEADER_START[5] = {0x08, 0x03, 0x10, 0x02, 0x18};
static const uint8_t READ_HEADER_START[5] = {0x08, 0x03, 0x10, 0x01, 0x18};
/* Request.addRequest (field 101) and Request.readRequest (100), length-delimited. */
static const uint8_t ADD_FIELD[2] = {0xaa, 0x06};
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
static Py_ssize_t header_at(const uint8_t *b, Py_ssize_t n, const uint8_t start[5], uint64_t *txn,
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
static Py_ssize_t ids_at(const uint8_t *b, Py_ssize_t n, Py_ssize_t pos, const uint8_t field[2],
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

static int need_bytes(PyObject *arg)
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

PyDoc_STRVAR(plain_add_request_doc,
"plain_add_request(b: bytes) -> (txnId, ledgerId, entryId, masterKey, body, high_priority, recovery) | None\n\n"
"bkctl.wire.codecs.v3.plain_add_request, in C.");

static PyObject *plain_add_request(PyObject *self, PyObject *arg)
{
    if (!need_bytes(arg))
        return NULL;
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    uint64_t txn, priority, body_len;
    int64_t ledger_id, entry_id;
    Py_ssize_t pos = header_at(b, n, ADD_HEADER_START, &txn, &priority);
    if (pos < 0)
        Py_RETURN_NONE;
    pos = ids_at(b, n, pos, ADD_FIELD, &ledger_id, &entry_id);
    if (pos < 0 || pos + 2 > n || b[pos] != 0x1a)
        Py_RETURN_NONE;
    Py_ssize_t key_len = b[pos + 1];
    Py_ssize_t key_at = pos + 2;
    if (key_len >= 0x80 || key_at + key_len >= n || b[key_at + key_len] != 0x22)
        Py_RETURN_NONE;
    pos = key_at + key_len + 1;
    if (!varint(b, n, &pos, &body_len) || body_len > (uint64_t)(n - pos))
        Py_RETURN_NONE;
    /* the body runs to the end, or is followed by exactly AddRequest.flag (100) = RECOVERY_ADD */
    Py_ssize_t end = pos + (Py_ssize_t)body_len;
    int recovery = 0;
    if (end != n) {
        if (end + 3 != n || b[end] != 0xa0 || b[end + 1] != 0x06 || b[end + 2] != 0x01)
            Py_RETURN_NONE;
        recovery = 1;
    }
    return Py_BuildValue("(KLLy#y#OO)", (unsigned long long)txn, (long long)ledger_id, (long long)entry_id,
                         (const char *)b + key_at, key_len, (const char *)b + pos, end - pos,
                         priority > 0 ? Py_True : Py_False, recovery ? Py_True : Py_False);
}

PyDoc_STRVAR(plain_read_request_doc,
"plain_read_request(b: bytes) -> (ledgerId, entryId, header length, b) | None\n\n"
"bkctl.wire.codecs.v3.plain_read_request, in C.");

static PyObject *plain_read_request(PyObject *self, PyObject *arg)
{
    if (!need_bytes(arg))
        return NULL;
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    uint64_t txn;
    int64_t ledger_id, entry_id;
    Py_ssize_t header_end = header_at(b, n, READ_HEADER_START, &txn, NULL);
    if (header_end < 0)
        Py_RETURN_NONE;
    if (ids_at(b, n, header_end, READ_FIELD, &ledger_id, &entry_id) != n)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLnO)", (long long)ledger_id, (long long)entry_id, header_end, arg);
}

PyDoc_STRVAR(v2_add_request_doc,
"v2_add_request(payload: bytes) -> (flags, ledgerId, entryId, masterKey, body) | None\n\n"
"bkctl.wire.codecs.v2.plain_add_request, in C.");

static PyObject *v2_add_request(PyObject *self, PyObject *arg)
{
    if (!need_bytes(arg))
        return NULL;
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    if (n < 4 + MASTER_KEY_LENGTH + 16 || ((b[0] << 8) | b[1]) != V2_ADD_TOP)
        Py_RETURN_NONE;
    uint64_t ledger = 0, entry = 0;
    for (int i = 0; i < 8; i++) {
        ledger = (ledger << 8) | b[4 + MASTER_KEY_LENGTH + i];
        entry = (entry << 8) | b[4 + MASTER_KEY_LENGTH + 8 + i];
    }
    return Py_BuildValue("(iLLy#y#)", (b[2] << 8) | b[3], (long long)(int64_t)ledger, (long long)(int64_t)entry,
                         (const char *)b + 4, (Py_ssize_t)MASTER_KEY_LENGTH, (const char *)b + 4 + MASTER_KEY_LENGTH,
                         n - 4 - MASTER_KEY_LENGTH);
}

/* A bytes object for a frame of ``payload`` bytes, its 4-byte length written and
 * *o at its payload; NULL (an exception set) when it cannot be made. */
static PyObject *new_frame(size_t payload, uint8_t **o)
{
    if (payload > 0x7FFFFFFF) {
        PyErr_SetString(PyExc_OverflowError, "answer too large for a frame");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 + payload));
    if (out == NULL)
        return NULL;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(out);
    p[0] = (uint8_t)(payload >> 24);
    p[1] = (uint8_t)(payload >> 16);
    p[2] = (uint8_t)(payload >> 8);
    p[3] = (uint8_t)payload;
    *o = p + 4;
    return out;
}

/* A field's tag byte, then its ``n`` bytes (a varint already encoded): past them. */
static inline uint8_t *put_tagged(uint8_t *o, uint8_t tag, const uint8_t *v, size_t n)
{
    *o++ = tag;
    memcpy(o, v, n);
    return o + n;
}

PyDoc_STRVAR(add_answer_doc,
"add_answer(txn_id: int, status: int, ledger_id: int, entry_id: int) -> bytes\n\n"
"frame(AddResponseEncoder().encode(txn_id, status, ledger_id, entry_id)) for a v3\n"
"StatusCode number ``status``, in C: the framed answer to an ADD_ENTRY request.");

static PyObject *add_answer(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("add_answer()", nargs, 4))
        return NULL;
    unsigned long long txn = PyLong_AsUnsignedLongLong(args[0]);
    if (txn == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    long status = PyLong_AsLong(args[1]);
    if (status == -1 && PyErr_Occurred())
        return NULL;
    if (status < INT32_MIN || status > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "status out of the int32 range");
        return NULL;
    }
    long long ledger, entry;
    if (!i64_of(args[2], &ledger) || !i64_of(args[3], &entry))
        return NULL;
    /* enums and int64s as protobuf writes them: a negative value sign-extended to 64 bits */
    uint64_t st = (uint64_t)(int64_t)status;
    uint8_t status_v[10], ledger_v[10], entry_v[10], txn_v[10];
    size_t ns = bk_put_varint(status_v, st) - status_v, nl = bk_put_varint(ledger_v, (uint64_t)ledger) - ledger_v,
           ne = bk_put_varint(entry_v, (uint64_t)entry) - entry_v, nt = bk_put_varint(txn_v, txn) - txn_v;
    size_t header = 5 + nt, inner = 1 + ns + 1 + nl + 1 + ne; /* both < 0x80: one-byte lengths */
    size_t payload = 2 + header + 1 + ns + 2 + 1 + inner;
    uint8_t *o;
    PyObject *out = new_frame(payload, &o);
    if (out == NULL)
        return NULL;
    *o++ = 0x0a; /* header (1) */
    *o++ = (uint8_t)header;
    memcpy(o, ADD_HEADER_START, 5);
    o += 5;
    memcpy(o, txn_v, nt);
    o = put_tagged(o + nt, 0x10, status_v, ns); /* status (2) */
    *o++ = ADD_FIELD[0]; /* addResponse (101) */
    *o++ = ADD_FIELD[1];
    *o++ = (uint8_t)inner;
    o = put_tagged(o, 0x08, status_v, ns); /* status (1) */
    o = put_tagged(o, 0x10, ledger_v, nl); /* ledgerId (2) */
    put_tagged(o, 0x18, entry_v, ne); /* entryId (3) */
    return out;
}

/* One EOK answer to a plain READ_ENTRY, its varints encoded once: see put_read_answer. */
typedef struct {
    const uint8_t *head, *body;
    size_t nh, nb, nl, ne, nc, nbl, nil, inner;
    uint8_t ledger_v[10], entry_v[10], lac_v[10], body_len_v[10], inner_len_v[10];
} read_answer_t;

/* Lays out the answer to the read of (ledger, entry) whose header field is
 * head[0..nh): returns its framed size. */
static size_t plan_read_answer(read_answer_t *a, const uint8_t *head, size_t nh, long long ledger, long long entry,
                               const uint8_t *body, size_t nb, long long lac)
{
    /* int64s as protobuf writes them: a negative value sign-extended to 64 bits */
    a->head = head;
    a->nh = nh;
    a->body = body;
    a->nb = nb;
    a->nl = bk_put_varint(a->ledger_v, (uint64_t)ledger) - a->ledger_v;
    a->ne = bk_put_varint(a->entry_v, (uint64_t)entry) - a->entry_v;
    a->nc = bk_put_varint(a->lac_v, (uint64_t)lac) - a->lac_v;
    a->nbl = bk_put_varint(a->body_len_v, (uint64_t)nb) - a->body_len_v;
    /* ReadResponse: status EOK (1), ledgerId (2), entryId (3), body (4), maxLAC (5) */
    a->inner = 2 + 1 + a->nl + 1 + a->ne + 1 + a->nbl + nb + 1 + a->nc;
    a->nil = bk_put_varint(a->inner_len_v, (uint64_t)a->inner) - a->inner_len_v;
    return 4 + nh + 4 + a->nil + a->inner;
}

/* Writes the answer planned in ``a`` after its 4-byte length (o: where that goes). */
static uint8_t *put_read_answer(uint8_t *o, const read_answer_t *a)
{
    size_t payload = a->nh + 4 + a->nil + a->inner;
    *o++ = (uint8_t)(payload >> 24);
    *o++ = (uint8_t)(payload >> 16);
    *o++ = (uint8_t)(payload >> 8);
    *o++ = (uint8_t)payload;
    memcpy(o, a->head, a->nh);
    o += a->nh;
    *o++ = 0x10; /* Response.status EOK (2) */
    *o++ = 0x00;
    o = put_tagged(o, READ_FIELD[0], READ_FIELD + 1, 1); /* readResponse (100) */
    memcpy(o, a->inner_len_v, a->nil);
    o += a->nil;
    *o++ = 0x08; /* status EOK (1) */
    *o++ = 0x00;
    o = put_tagged(o, 0x10, a->ledger_v, a->nl); /* ledgerId (2) */
    o = put_tagged(o, 0x18, a->entry_v, a->ne); /* entryId (3) */
    o = put_tagged(o, 0x22, a->body_len_v, a->nbl); /* body (4) */
    memcpy(o, a->body, a->nb);
    return put_tagged(o + a->nb, 0x28, a->lac_v, a->nc); /* maxLAC (5) */
}

PyDoc_STRVAR(read_answer_doc,
"read_answer(header_field, ledger_id, entry_id, body, max_lac) -> bytes\n\n"
"frame(v3.read_answer(header_field, ledger_id, entry_id, body, max_lac)), in C:\n"
"the framed EOK answer to a plain READ_ENTRY request whose header field (tag\n"
"included) is ``header_field``.");

static PyObject *read_answer(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("read_answer()", nargs, 5))
        return NULL;
    PyObject *head = args[0], *body = args[3];
    if (!need_bytes(head) || !need_bytes(body))
        return NULL;
    long long ledger, entry, lac;
    if (!i64_of(args[1], &ledger) || !i64_of(args[2], &entry) || !i64_of(args[4], &lac))
        return NULL;
    read_answer_t a;
    size_t size = plan_read_answer(&a, (const uint8_t *)PyBytes_AS_STRING(head), (size_t)PyBytes_GET_SIZE(head),
                                   ledger, entry, (const uint8_t *)PyBytes_AS_STRING(body),
                                   (size_t)PyBytes_GET_SIZE(body), lac);
    uint8_t *o;
    PyObject *out = new_frame(size - 4, &o);
    if (out != NULL)
        put_read_answer(o - 4, &a);
    return out;
}

/* The (rc, body) of results[i] into *rc and *body (borrowed); 0 with an exception set
 * when it is not a 2-tuple of an int and (for rc 0) bytes. */
static int read_result(PyObject *results, Py_ssize_t i, long *rc, PyObject **body)
{
    PyObject *r = PyList_GET_ITEM(results, i);
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 2 || !PyLong_Check(PyTuple_GET_ITEM(r, 0))) {
        PyErr_SetString(PyExc_TypeError, "a read result must be an (rc, body) tuple");
        return 0;
    }
    *rc = PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
    if (*rc == -1 && PyErr_Occurred())
        return 0;
    *body = PyTuple_GET_ITEM(r, 1);
    return *rc != 0 || need_bytes(*body);
}

/* The (header field, ledger, entry) of run[i], a plain_read_request() tuple, into ``a``'s
 * inputs; 0 with an exception set when it is not one. */
static int read_of(PyObject *run, Py_ssize_t i, const uint8_t **head, size_t *nh, long long *ledger,
                   long long *entry)
{
    PyObject *r = PyList_GET_ITEM(run, i);
    /* ints only (no __index__ runs Python code between read_answers' two passes) */
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 4 || !PyLong_Check(PyTuple_GET_ITEM(r, 0)) ||
        !PyLong_Check(PyTuple_GET_ITEM(r, 1)) || !PyLong_Check(PyTuple_GET_ITEM(r, 2)) ||
        !need_bytes(PyTuple_GET_ITEM(r, 3))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "a read must be a plain_read_request() tuple");
        return 0;
    }
    PyObject *payload = PyTuple_GET_ITEM(r, 3);
    if (!i64_of(PyTuple_GET_ITEM(r, 0), ledger) || !i64_of(PyTuple_GET_ITEM(r, 1), entry))
        return 0;
    Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(r, 2));
    if (n == -1 && PyErr_Occurred())
        return 0;
    if (n < 0 || n > PyBytes_GET_SIZE(payload)) {
        PyErr_SetString(PyExc_ValueError, "a read's header length is outside its bytes");
        return 0;
    }
    *head = (const uint8_t *)PyBytes_AS_STRING(payload);
    *nh = (size_t)n;
    return 1;
}

PyDoc_STRVAR(read_answers_doc,
"read_answers(run, results, start, max_lac, limit) -> (bytes, next)\n\n"
"plain.py_read_answers, in C: the framed EOK answers, one after the other, to\n"
"run[start], run[start + 1], ... (plain_read_request() tuples) whose results[i]\n"
"(rc, body) is EOK, until one is not or their bytes reach ``limit``; ``next``\n"
"is the index of the first read not answered.");

static PyObject *read_answers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("read_answers()", nargs, 5))
        return NULL;
    PyObject *run = args[0], *results = args[1];
    if (!PyList_Check(run) || !PyList_Check(results)) {
        PyErr_SetString(PyExc_TypeError, "read_answers() wants two lists");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    long long lac;
    if (!i64_of(args[3], &lac))
        return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[4]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(run);
    if (PyList_GET_SIZE(results) < n)
        n = PyList_GET_SIZE(results);
    if (start < 0)
        start = 0;
    /* first the size of what is answered, then the answers into one bytes object */
    size_t total = 0;
    Py_ssize_t next = start;
    read_answer_t a;
    const uint8_t *head;
    size_t nh;
    long long ledger, entry;
    long rc;
    PyObject *body;
    while (next < n && (Py_ssize_t)total < limit) {
        if (!read_result(results, next, &rc, &body))
            return NULL;
        if (rc != 0)
            break;
        if (!read_of(run, next, &head, &nh, &ledger, &entry))
            return NULL;
        total += plan_read_answer(&a, head, nh, ledger, entry, (const uint8_t *)PyBytes_AS_STRING(body),
                                  (size_t)PyBytes_GET_SIZE(body), lac);
        if (total > (size_t)PY_SSIZE_T_MAX / 2) {
            PyErr_SetString(PyExc_OverflowError, "answers too large");
            return NULL;
        }
        next++;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL)
        return NULL;
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out), *end = o + total;
    for (Py_ssize_t i = start; i < next; i++) {
        /* as checked above: no Python code ran in between to change the lists */
        read_result(results, i, &rc, &body);
        read_of(run, i, &head, &nh, &ledger, &entry);
        size_t size = plan_read_answer(&a, head, nh, ledger, entry, (const uint8_t *)PyBytes_AS_STRING(body),
                                       (size_t)PyBytes_GET_SIZE(body), lac);
        if (size > (size_t)(end - o)) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_RuntimeError, "read_answers(): the reads changed while answered");
            return NULL;
        }
        o = put_read_answer(o, &a);
    }
    return Py_BuildValue("(Nn)", out, next);
}

static PyMethodDef plain_methods[] = {
    {"plain_add_request", (PyCFunction)plain_add_request, METH_O, plain_add_request_doc},
    {"plain_read_request", (PyCFunction)plain_read_request, METH_O, plain_read_request_doc},
    {"v2_add_request", (PyCFunction)v2_add_request, METH_O, v2_add_request_doc},
    {"add_answer", (PyCFunction)(void (*)(void))add_answer, METH_FASTCALL, add_answer_doc},
    {"read_answer", (PyCFunction)(void (*)(void))read_answer, METH_FASTCALL, read_answer_doc},
    {"read_answers", (PyCFunction)(void (*)(void))read_answers, METH_FASTCALL, read_answers_doc},
    {NULL},
};

static struct PyModuleDef plain_module = {
    PyModuleDef_HEAD_INIT, "bkctl.wire.codecs._plain",
    "C twins of the bookie's plain request parsers and its ADD and READ answers (see _plain.c).", -1, plain_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__plain(void)
{
    PyObject *m = PyModule_Create(&plain_module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", PLAIN_API) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
