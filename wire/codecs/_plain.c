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
 * tests/unit/test_plain_c.py and the fuzz target ``plain_c_twins``.  A run of
 * ADDs taken apart and answered at once, or of READs taken apart: _plain_runs.c (a run of
 * READs is answered by read_answers, here).  Which
 * twin the bookie uses is chosen in one place, v3.PLAIN; BKCTL_FASTPATHS=0
 * switches these off with the other fast paths.  Only ``bytes`` are taken
 * (what a frame decoder gives); anything else is a TypeError.
 */
#define PY_SSIZE_T_CLEAN
#include "_plain.h"

/* Checked by v3.py before these twins are used: a build older than the
 * sources (another API) is not. */
#define PLAIN_API 8

PyDoc_STRVAR(plain_add_request_doc,
"plain_add_request(b: bytes) -> (txnId, ledgerId, entryId, masterKey, body, high_priority, recovery) | None\n\n"
"bkctl.wire.codecs.v3.plain_add_request, in C.");

static PyObject *plain_add_request(PyObject *self, PyObject *arg)
{
    if (!need_bytes(arg))
        return NULL;
    const char *b = PyBytes_AS_STRING(arg);
    add_fields_t a;
    if (!add_fields((const uint8_t *)b, PyBytes_GET_SIZE(arg), &a))
        Py_RETURN_NONE;
    return Py_BuildValue("(KLLy#y#OO)", (unsigned long long)a.txn, (long long)a.ledger_id, (long long)a.entry_id,
                         b + a.key_at, a.key_len, b + a.body_at, a.body_len, a.high_priority ? Py_True : Py_False,
                         a.recovery ? Py_True : Py_False);
}

PyDoc_STRVAR(plain_read_request_doc,
"plain_read_request(b: bytes) -> (ledgerId, entryId, header length, b) | None\n\n"
"bkctl.wire.codecs.v3.plain_read_request, in C.");

static PyObject *plain_read_request(PyObject *self, PyObject *arg)
{
    if (!need_bytes(arg))
        return NULL;
    int64_t ledger_id, entry_id;
    Py_ssize_t header_end;
    if (!read_fields((const uint8_t *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg), &ledger_id, &entry_id,
                     &header_end))
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
    const char *b = PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    int flags;
    int64_t ledger_id, entry_id;
    if (!v2_add_fields((const uint8_t *)b, n, &flags, &ledger_id, &entry_id))
        Py_RETURN_NONE;
    return Py_BuildValue("(iLLy#y#)", flags, (long long)ledger_id, (long long)entry_id, b + 4,
                         (Py_ssize_t)MASTER_KEY_LENGTH, b + 4 + MASTER_KEY_LENGTH, n - 4 - MASTER_KEY_LENGTH);
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
    long status;
    long long ledger, entry;
    if (!status_of(args[1], &status) || !i64_of(args[2], &ledger) || !i64_of(args[3], &entry))
        return NULL;
    add_answers_t r;
    plan_add_answers(&r, status, ledger);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)add_answer_size(&r, txn, (uint64_t)entry));
    if (out != NULL)
        put_add_answer((uint8_t *)PyBytes_AS_STRING(out), &r, txn, (uint64_t)entry);
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

/* A run of plain reads as read_answers takes it: the payload list, read_run()'s fields (any
 * tuple of them: plain.ReadRun too) and the bodies read for it. */
typedef struct {
    PyObject *payloads, *entry_ids, *header_lens, *bodies;
    Py_ssize_t first;
    long long ledger;
} read_run_view_t;

/* 0 with a TypeError when the arguments are not those. */
static int view_of(PyObject *payloads, PyObject *run, PyObject *bodies, read_run_view_t *v)
{
    if (!PyList_Check(payloads) || !PyList_Check(bodies) || !PyTuple_Check(run) || PyTuple_GET_SIZE(run) != 5 ||
        !PyLong_Check(PyTuple_GET_ITEM(run, 0)) || !PyLong_Check(PyTuple_GET_ITEM(run, 2)) ||
        !PyList_Check(PyTuple_GET_ITEM(run, 3)) || !PyList_Check(PyTuple_GET_ITEM(run, 4))) {
        PyErr_SetString(PyExc_TypeError, "read_answers() wants the payload list, a read_run() and a list of bodies");
        return 0;
    }
    v->payloads = payloads;
    v->bodies = bodies;
    v->entry_ids = PyTuple_GET_ITEM(run, 3);
    v->header_lens = PyTuple_GET_ITEM(run, 4);
    v->first = PyLong_AsSsize_t(PyTuple_GET_ITEM(run, 0));
    if (v->first == -1 && PyErr_Occurred())
        return 0;
    return i64_of(PyTuple_GET_ITEM(run, 2), &v->ledger);
}

/* The k-th read of the run (its entryId, its header field in its payload) and bodies[k] into
 * the arguments: 1; 0 when bodies[k] is no bytes (a failed read: the answers stop there); -1
 * with an exception set when the run does not hold what read_run() gives for it. */
static int answer_of(const read_run_view_t *v, Py_ssize_t k, const uint8_t **head, size_t *nh, long long *entry,
                     PyObject **body)
{
    *body = PyList_GET_ITEM(v->bodies, k);
    if (!PyBytes_CheckExact(*body))
        return 0;
    Py_ssize_t at = v->first + k;
    if (k >= PyList_GET_SIZE(v->entry_ids) || k >= PyList_GET_SIZE(v->header_lens) || at < 0 ||
        at >= PyList_GET_SIZE(v->payloads)) {
        PyErr_SetString(PyExc_IndexError, "read_answers(): more bodies than reads");
        return -1;
    }
    PyObject *payload = PyList_GET_ITEM(v->payloads, at), *e = PyList_GET_ITEM(v->entry_ids, k),
             *h = PyList_GET_ITEM(v->header_lens, k);
    /* ints only (no __index__ runs Python code between read_answers' two passes) */
    if (!need_bytes(payload))
        return -1;
    if (!PyLong_Check(e) || !PyLong_Check(h)) {
        PyErr_SetString(PyExc_TypeError, "a read run's entryIds and header lengths must be ints");
        return -1;
    }
    if (!i64_of(e, entry))
        return -1;
    Py_ssize_t n = PyLong_AsSsize_t(h);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (n < 0 || n > PyBytes_GET_SIZE(payload)) {
        PyErr_SetString(PyExc_ValueError, "a read's header length is outside its bytes");
        return -1;
    }
    *head = (const uint8_t *)PyBytes_AS_STRING(payload);
    *nh = (size_t)n;
    return 1;
}

PyDoc_STRVAR(read_answers_doc,
"read_answers(payloads, run, bodies, start, max_lac, limit) -> (bytes, next)\n\n"
"plain.py_read_answers, in C: the framed EOK answers, one after the other, to the reads\n"
"start, start + 1, ... of ``run`` (read_run(payloads, ...)) whose bodies[k] is bytes (an\n"
"entry read: anything else is a failed read), until one is not or their bytes reach\n"
"``limit``; ``next`` is the index of the first read not answered.");

static PyObject *read_answers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("read_answers()", nargs, 6))
        return NULL;
    read_run_view_t v;
    if (!view_of(args[0], args[1], args[2], &v))
        return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[3]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    long long lac;
    if (!i64_of(args[4], &lac))
        return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[5]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(v.bodies);
    if (start < 0)
        start = 0;
    /* first the size of what is answered, then the answers into one bytes object */
    size_t total = 0;
    Py_ssize_t next = start;
    read_answer_t a;
    const uint8_t *head;
    size_t nh;
    long long entry;
    PyObject *body;
    while (next < n && (Py_ssize_t)total < limit) {
        int got = answer_of(&v, next, &head, &nh, &entry, &body);
        if (got < 0)
            return NULL;
        if (got == 0)
            break;
        total += plan_read_answer(&a, head, nh, v.ledger, entry, (const uint8_t *)PyBytes_AS_STRING(body),
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
    for (Py_ssize_t k = start; k < next; k++) {
        /* as checked above: no Python code ran in between to change the lists */
        size_t size = 0;
        if (answer_of(&v, k, &head, &nh, &entry, &body) == 1)
            size = plan_read_answer(&a, head, nh, v.ledger, entry, (const uint8_t *)PyBytes_AS_STRING(body),
                                    (size_t)PyBytes_GET_SIZE(body), lac);
        if (size == 0 || size > (size_t)(end - o)) {
            Py_DECREF(out);
            PyErr_Clear();
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
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "API", PLAIN_API) < 0 || bk_plain_add_runs(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
