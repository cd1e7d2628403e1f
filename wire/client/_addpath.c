/*
 * bkctl.wire.client._addpath: the C twin of a connection's fast-path ADD copies.
 *
 * A writer's entry goes to Qw bookies; on the fast path each copy is the
 * entry's ADD encoded once for the write set (EncodedAdd) behind the
 * connection's own header field.  Per copy, the Python path builds a
 * Request, registers it in the connection's RequestTable, and, once the
 * bookie's EOK answer is matched, runs the connection's answer bookkeeping
 * and the request's callback: about a dozen Python calls per copy, a third
 * of a 100-byte add's CPU at E3/Qw2.  Here:
 *
 *   AddCopy       a fast-path v3 ADD copy: Request's public interface (the
 *                 fields RequestTable, Deadlines and the connection read and
 *                 write, what, callback_to, complete, call_back), fields in C;
 *   add_copies    EntryRequests.encoded_adds: a run's copies and their frames,
 *                 written into one buffer;
 *   register_all  RequestTable.register_all's loop;
 *   take_adds     the answer loop for the EOK answers of AddCopies: each one
 *                 matched by its header field, taken out of the tables, marked
 *                 done and its callback called, with no Python frame between
 *                 the bytes and the callback (the connection then retires
 *                 deadlines and resets its backoff once per chunk).
 *
 * Its one Python owner is the connection (bkctl.wire.client.connection, through its
 * RequestTable and EntryRequests); the writer's side (Entry, Entries, address_run, Acks: the
 * callback take_adds calls for each copy answered) is another module, _addentries.c.
 *
 * The Python code (bkctl.wire.client.requests, .entry_requests) is the
 * reference and the general path; this module is used only with fast paths
 * on (bkctl.wire.fastpath: Twins.adds).  Nothing here reads an underscored
 * attribute of a Python object: the tables, the queue and the callables
 * are handed in by their owners.  tests/unit/test_client_add_copies.py runs
 * the same checks on both.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#include "../codecs/_twins.h"

/* requests.QUEUED, SENT, DONE */
#define REQ_QUEUED 0
#define REQ_SENT 1
#define REQ_DONE 2
/* OperationType.ADD_ENTRY */
#define OP_ADD 2

static PyObject *str_v3_part, *str_v3_tail, *str_high_priority, *str_ledger_id, *str_entry_id, *str_generation,
    *str_on_done, *str_ctx, *str_slot, *str_frame, *str_value, *empty_bytes, *int_op_add, *int_state[3],
    *failure_type, *callback_raised;

/* ------------------------------------------------------------ AddCopy */

typedef struct {
    PyObject_HEAD
    PyObject *key;      /* txnId */
    PyObject *op;
    PyObject *frame;
    PyObject *decode;
    PyObject *on_done;
    PyObject *ctx;
    PyObject *slot;
    double deadline;
    PyObject *timeouts;
    PyObject *state;
    PyObject *conn;
    PyObject *ok;       /* the rest of its EOK answer after the header field */
    PyObject *fast;     /* its header field */
    PyObject *add;      /* the EncodedAdd: ledger and entry ids */
    PyObject *what;     /* its description, once asked for */
} AddCopy;

static PyTypeObject AddCopyType;

static int copy_traverse(AddCopy *self, visitproc visit, void *arg)
{
    Py_VISIT(self->key);
    Py_VISIT(self->op);
    Py_VISIT(self->frame);
    Py_VISIT(self->decode);
    Py_VISIT(self->on_done);
    Py_VISIT(self->ctx);
    Py_VISIT(self->slot);
    Py_VISIT(self->timeouts);
    Py_VISIT(self->state);
    Py_VISIT(self->conn);
    Py_VISIT(self->ok);
    Py_VISIT(self->fast);
    Py_VISIT(self->add);
    Py_VISIT(self->what);
    return 0;
}

static int copy_clear(AddCopy *self)
{
    Py_CLEAR(self->key);
    Py_CLEAR(self->op);
    Py_CLEAR(self->frame);
    Py_CLEAR(self->decode);
    Py_CLEAR(self->on_done);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->slot);
    Py_CLEAR(self->timeouts);
    Py_CLEAR(self->state);
    Py_CLEAR(self->conn);
    Py_CLEAR(self->ok);
    Py_CLEAR(self->fast);
    Py_CLEAR(self->add);
    Py_CLEAR(self->what);
    return 0;
}

static void copy_dealloc(AddCopy *self)
{
    PyObject_GC_UnTrack(self);
    copy_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* a new copy: every field set (references taken), state QUEUED, not tracked yet */
static AddCopy *copy_new(PyObject *txn, PyObject *decode, PyObject *ok, PyObject *fast, PyObject *add)
{
    AddCopy *c = PyObject_GC_New(AddCopy, &AddCopyType);
    if (c == NULL)
        return NULL;
    Py_INCREF(txn);
    c->key = txn;
    Py_INCREF(int_op_add);
    c->op = int_op_add;
    Py_INCREF(empty_bytes);
    c->frame = empty_bytes;
    Py_INCREF(decode);
    c->decode = decode;
    c->on_done = NULL;
    c->ctx = NULL;
    c->slot = NULL;
    c->deadline = 0.0;
    c->timeouts = NULL;
    Py_INCREF(int_state[REQ_QUEUED]);
    c->state = int_state[REQ_QUEUED];
    c->conn = NULL;
    Py_INCREF(ok);
    c->ok = ok;
    Py_INCREF(fast);
    c->fast = fast;
    Py_INCREF(add);
    c->add = add;
    c->what = NULL;
    PyObject_GC_Track(c);
    return c;
}

static PyObject *copy_ids(AddCopy *self, void *closure)
{
    PyObject *ledger = PyObject_GetAttr(self->add, str_ledger_id);
    PyObject *entry = ledger == NULL ? NULL : PyObject_GetAttr(self->add, str_entry_id);
    return pair(ledger, entry);
}

static PyObject *copy_what(AddCopy *self, void *closure)
{
    if (self->what == NULL) {
        PyObject *ids = copy_ids(self, NULL);
        if (ids == NULL)
            return NULL;
        self->what = PyUnicode_FromFormat("ADD ledger %S entry %S", PyTuple_GET_ITEM(ids, 0), PyTuple_GET_ITEM(ids, 1));
        Py_DECREF(ids);
        if (self->what == NULL)
            return NULL;
    }
    Py_INCREF(self->what);
    return self->what;
}

static PyObject *copy_none(AddCopy *self, void *closure)
{
    Py_RETURN_NONE;
}

static PyObject *copy_false(AddCopy *self, void *closure)
{
    Py_RETURN_FALSE;
}

static PyObject *copy_verb(AddCopy *self, void *closure)
{
    return PyUnicode_FromString("ADD");
}

/* a copy completes through its callback only: its Deferred stays None */
static int copy_set_deferred(AddCopy *self, PyObject *value, void *closure)
{
    if (value != NULL && value != Py_None) {
        PyErr_SetString(PyExc_TypeError, "an AddCopy completes through its callback, not a Deferred");
        return -1;
    }
    return 0;
}

/* requests.callback_raised(bookie_id, req, exc) for the exception raised (and cleared here) */
static void report_raised(PyObject *bookie_id, PyObject *req)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL)
        PyException_SetTraceback(value, tb);
    PyObject *r = NULL;
    if (callback_raised == NULL) { /* looked up on first need: requests imports nothing of this module */
        PyObject *requests = PyImport_ImportModule("bkctl.wire.client.requests");
        callback_raised = requests == NULL ? NULL : PyObject_GetAttrString(requests, "callback_raised");
        Py_XDECREF(requests);
        if (callback_raised == NULL)
            PyErr_Clear();
    }
    if (callback_raised != NULL && value != NULL) {
        PyObject *args[3] = {bookie_id, req, value};
        r = PyObject_Vectorcall(callback_raised, args, 3, NULL);
    }
    if (r == NULL)
        PyErr_WriteUnraisable(req);
    Py_XDECREF(r);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* Request.call_back: on_done(ctx, slot, bookie_id, result), on_done and ctx cleared
 * first; an Exception it raises is reported (callback_raised), not passed on.
 * 0, or -1 for an exception that is not an Exception (KeyboardInterrupt...). */
static int copy_call(AddCopy *self, PyObject *on_done, PyObject *bookie_id, PyObject *result)
{
    Py_INCREF(on_done);
    Py_CLEAR(self->on_done);
    PyObject *ctx = self->ctx; /* the reference moves to this call */
    self->ctx = NULL;
    PyObject *args[4] = {ctx != NULL ? ctx : Py_None, self->slot != NULL ? self->slot : Py_None, bookie_id, result};
    PyObject *r = PyObject_Vectorcall(on_done, args, 4, NULL);
    Py_XDECREF(ctx);
    Py_DECREF(on_done);
    if (r != NULL) {
        Py_DECREF(r);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_Exception))
        return -1;
    report_raised(bookie_id, (PyObject *)self);
    return 0;
}

static PyObject *copy_call_back(AddCopy *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("call_back", nargs, 3))
        return NULL;
    if (copy_call(self, args[0], args[1], args[2]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *copy_callback_to(AddCopy *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("callback_to", nargs, 3))
        return NULL;
    Py_INCREF(args[0]);
    Py_XSETREF(self->on_done, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(self->ctx, args[1]);
    Py_INCREF(args[2]);
    Py_XSETREF(self->slot, args[2]);
    Py_RETURN_NONE;
}

/* Request.complete for a request with no Deferred: on_done with result (a Failure's exception) */
static PyObject *copy_complete(AddCopy *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("complete", nargs, 2))
        return NULL;
    if (self->on_done == NULL || self->on_done == Py_None)
        Py_RETURN_NONE;
    PyObject *result = args[1];
    int is_failure = PyObject_IsInstance(result, failure_type);
    if (is_failure < 0)
        return NULL;
    result = is_failure ? PyObject_GetAttr(result, str_value) : (Py_INCREF(result), result);
    if (result == NULL)
        return NULL;
    int rc = copy_call(self, self->on_done, args[0], result);
    Py_DECREF(result);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef copy_methods[] = {
    {"call_back", (PyCFunction)(void (*)(void))copy_call_back, METH_FASTCALL,
     "call_back(on_done, bookie_id, result): on_done(ctx, slot, bookie_id, result), as Request.call_back."},
    {"callback_to", (PyCFunction)(void (*)(void))copy_callback_to, METH_FASTCALL,
     "callback_to(on_done, ctx, slot): complete through on_done, as Request.callback_to."},
    {"complete", (PyCFunction)(void (*)(void))copy_complete, METH_FASTCALL,
     "complete(bookie_id, result): on_done with result, as Request.complete."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef copy_members[] = {
    {"key", T_OBJECT, offsetof(AddCopy, key), 0, "its txnId"},
    {"op", T_OBJECT, offsetof(AddCopy, op), 0, "OperationType.ADD_ENTRY"},
    {"frame", T_OBJECT, offsetof(AddCopy, frame), 0, "b'': it went on the wire as it was built"},
    {"decode", T_OBJECT, offsetof(AddCopy, decode), 0, "answers.v3_add"},
    {"on_done", T_OBJECT, offsetof(AddCopy, on_done), 0, NULL},
    {"ctx", T_OBJECT, offsetof(AddCopy, ctx), 0, NULL},
    {"slot", T_OBJECT, offsetof(AddCopy, slot), 0, NULL},
    {"deadline", T_DOUBLE, offsetof(AddCopy, deadline), 0, NULL},
    {"timeouts", T_OBJECT, offsetof(AddCopy, timeouts), 0, NULL},
    {"state", T_OBJECT, offsetof(AddCopy, state), 0, "QUEUED, SENT or DONE"},
    {"conn", T_OBJECT, offsetof(AddCopy, conn), 0, NULL},
    {"ok", T_OBJECT, offsetof(AddCopy, ok), READONLY, "its EOK answer after the header field"},
    {"fast", T_OBJECT, offsetof(AddCopy, fast), READONLY, "its header field"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef copy_getset[] = {
    {"what", (getter)copy_what, NULL, "ADD ledger L entry E", NULL},
    {"ids", (getter)copy_ids, NULL, "(ledger_id, entry_id)", NULL},
    {"deferred", (getter)copy_none, (setter)copy_set_deferred, "None: it completes through on_done", NULL},
    {"is_batch", (getter)copy_false, NULL, "False", NULL},
    {"verb", (getter)copy_verb, NULL, "ADD", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject AddCopyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bkctl.wire.client._addpath.AddCopy",
    .tp_doc = "A fast-path v3 ADD copy: the C twin of requests.Request for one (made by add_copies).",
    .tp_basicsize = sizeof(AddCopy),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)copy_traverse,
    .tp_clear = (inquiry)copy_clear,
    .tp_dealloc = (destructor)copy_dealloc,
    .tp_methods = copy_methods,
    .tp_members = copy_members,
    .tp_getset = copy_getset,
};

/* ------------------------------------------------------------ building a run */

/* the header field of a v3 ADD request (normal priority): 0a len 08 03 10 02 18 txn */
static unsigned char *put_add_header_field(unsigned char *p, uint64_t txn, size_t txn_len)
{
    *p++ = 0x0a;
    *p++ = (unsigned char)(5 + txn_len);
    *p++ = 0x08;
    *p++ = 0x03;
    *p++ = 0x10;
    *p++ = OP_ADD;
    *p++ = 0x18;
    return bk_put_varint(p, txn);
}

/* one copy of a run as add_copies lays it out */
typedef struct {
    PyObject *req;     /* the request (a new reference) */
    PyObject *data;    /* a copy built the general way: its frame (new reference); else NULL */
    PyObject *part;    /* borrowed from the add */
    uint64_t txn;
    size_t txn_len;
} Copy;

PyDoc_STRVAR(add_copies_doc,
"add_copies(adds, slots, on_done, ids, decode, general) -> (reqs, data)\n\n"
"EntryRequests.encoded_adds: for each encoded ADD of adds, the next txnId of\n"
"ids and a copy completing through on_done with the add as ctx and its slot, and\n"
"the frames of all of them joined.  A copy of a normal priority add encoded\n"
"for v3 with a uint64 txnId is an AddCopy; any other goes to general(add, txn),\n"
"which gives (req, data) as EntryRequests.encoded_add does (data None: the\n"
"frame is req.frame, taken out of it here).");

static PyObject *add_copies(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("add_copies", nargs, 6))
        return NULL;
    PyObject *adds = args[0], *slots = args[1], *on_done = args[2], *ids = args[3], *decode = args[4],
             *general = args[5];
    if (!PyList_CheckExact(adds) || !PyList_CheckExact(slots)) {
        PyErr_SetString(PyExc_TypeError, "add_copies wants two lists");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(adds);
    if (PyList_GET_SIZE(slots) < n) {
        PyErr_SetString(PyExc_ValueError, "add_copies: fewer slots than adds");
        return NULL;
    }
    Copy *copies = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(Copy));
    PyObject *reqs = PyList_New(n), *out = NULL;
    if (copies == NULL || reqs == NULL) {
        PyMem_Free(copies);
        Py_XDECREF(reqs);
        return PyErr_NoMemory();
    }
    size_t total = 0;
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        Copy *c = &copies[i];
        PyObject *add = PyList_GET_ITEM(adds, i);
        PyObject *txn = PyIter_Next(ids);
        if (txn == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "the txnId iterator is exhausted");
            goto fail;
        }
        PyObject *part = PyObject_GetAttr(add, str_v3_part);
        PyObject *tail = part == NULL ? NULL : PyObject_GetAttr(add, str_v3_tail);
        PyObject *high = tail == NULL ? NULL : PyObject_GetAttr(add, str_high_priority);
        unsigned long long t;
        int plain = high == NULL ? -1 : (high == Py_False && PyBytes_CheckExact(part) && PyBytes_CheckExact(tail)
                                         && as_u64(txn, &t));
        if (plain == 1) {
            size_t tl = bk_varint_len(t);
            unsigned char head[7 + 10];
            put_add_header_field(head, t, tl);
            PyObject *fast = PyBytes_FromStringAndSize((const char *)head, (Py_ssize_t)(7 + tl));
            AddCopy *req = fast == NULL ? NULL : copy_new(txn, decode, tail, fast, add);
            Py_XDECREF(fast);
            if (req == NULL) {
                plain = -1;
            } else {
                c->req = (PyObject *)req;
                c->part = part; /* the add keeps it */
                c->txn = t;
                c->txn_len = tl;
                total += 4 + 7 + tl + (size_t)PyBytes_GET_SIZE(part);
            }
        } else if (plain == 0) {
            PyObject *call[2] = {add, txn};
            PyObject *got = PyObject_Vectorcall(general, call, 2, NULL);
            if (got == NULL || !PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2) {
                if (got != NULL)
                    PyErr_SetString(PyExc_TypeError, "add_copies: general() must give (req, data)");
                plain = -1;
            } else {
                PyObject *req = PyTuple_GET_ITEM(got, 0), *data = PyTuple_GET_ITEM(got, 1);
                Py_INCREF(req);
                c->req = req;
                if (data == Py_None) { /* built the general way: its frame goes out with the others */
                    data = PyObject_GetAttr(req, str_frame);
                    if (data != NULL && PyObject_SetAttr(req, str_frame, empty_bytes) < 0)
                        Py_CLEAR(data);
                } else {
                    Py_INCREF(data);
                }
                if (data == NULL || !PyBytes_CheckExact(data)) {
                    if (data != NULL)
                        PyErr_SetString(PyExc_TypeError, "add_copies: a frame must be bytes");
                    Py_XDECREF(data);
                    plain = -1;
                } else {
                    c->data = data;
                    total += (size_t)PyBytes_GET_SIZE(data);
                }
            }
            Py_XDECREF(got);
        }
        Py_XDECREF(part);
        Py_XDECREF(tail);
        Py_XDECREF(high);
        Py_DECREF(txn);
        if (plain < 0)
            goto fail;
        /* its callback */
        PyObject *req = c->req;
        if (Py_IS_TYPE(req, &AddCopyType)) {
            AddCopy *a = (AddCopy *)req;
            Py_INCREF(on_done);
            Py_XSETREF(a->on_done, on_done);
            Py_INCREF(PyList_GET_ITEM(adds, i));
            Py_XSETREF(a->ctx, PyList_GET_ITEM(adds, i));
            Py_INCREF(PyList_GET_ITEM(slots, i));
            Py_XSETREF(a->slot, PyList_GET_ITEM(slots, i));
        } else if (PyObject_SetAttr(req, str_on_done, on_done) < 0
                   || PyObject_SetAttr(req, str_ctx, PyList_GET_ITEM(adds, i)) < 0
                   || PyObject_SetAttr(req, str_slot, PyList_GET_ITEM(slots, i)) < 0) {
            goto fail;
        }
    }
    if (total > PY_SSIZE_T_MAX)
        goto fail;
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL)
        goto fail;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    for (i = 0; i < n; i++) {
        Copy *c = &copies[i];
        if (c->data != NULL) {
            size_t k = (size_t)PyBytes_GET_SIZE(c->data);
            memcpy(p, PyBytes_AS_STRING(c->data), k);
            p += k;
            Py_CLEAR(c->data);
        } else {
            size_t pl = (size_t)PyBytes_GET_SIZE(c->part);
            put_be32(p, (uint32_t)(7 + c->txn_len + pl));
            p = put_add_header_field(p + 4, c->txn, c->txn_len);
            memcpy(p, PyBytes_AS_STRING(c->part), pl);
            p += pl;
        }
        PyList_SET_ITEM(reqs, i, c->req); /* steals it */
        c->req = NULL;
    }
    PyMem_Free(copies);
    return pair(reqs, out);
fail:
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_XDECREF(copies[j].req);
        Py_XDECREF(copies[j].data);
    }
    PyMem_Free(copies);
    Py_DECREF(reqs);
    Py_XDECREF(out);
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_OverflowError, "add_copies: the run is too large");
    return NULL;
}

/* ------------------------------------------------------------ registering */

PyDoc_STRVAR(register_all_doc,
"register_all(reqs, start, sent, pending, fast) -> int\n\n"
"RequestTable.register_all's loop over reqs[start:] (v3 requests): each one\n"
"SENT, in sent, in pending under its txnId and in fast under its header field;\n"
"stops at one that is not an AddCopy, or whose txnId is another request's\n"
"already (left unregistered for the table) and returns its index, or len(reqs).");

static PyObject *register_all(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("register_all", nargs, 5))
        return NULL;
    PyObject *reqs = args[0], *sent = args[2], *pending = args[3], *fast = args[4];
    if (!PyList_CheckExact(reqs) || !PyDict_CheckExact(sent) || !PyDict_CheckExact(pending)
            || !PyDict_CheckExact(fast)) {
        PyErr_SetString(PyExc_TypeError, "register_all wants a list and three dicts");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    for (; i >= 0 && i < PyList_GET_SIZE(reqs); i++) {
        PyObject *req = PyList_GET_ITEM(reqs, i);
        if (!Py_IS_TYPE(req, &AddCopyType)) /* a request built the general way: the table's */
            break;
        AddCopy *a = (AddCopy *)req;
        PyObject *other = PyDict_SetDefault(pending, a->key, req); /* borrowed */
        if (other == NULL)
            return NULL;
        if (other != req)
            break;
        Py_INCREF(int_state[REQ_SENT]);
        Py_XSETREF(a->state, int_state[REQ_SENT]);
        if (PyDict_SetItem(sent, req, Py_None) < 0 || PyDict_SetItem(fast, a->fast, req) < 0)
            return NULL;
    }
    return PyLong_FromSsize_t(i);
}

/* ------------------------------------------------------------ the answer loop */

/* the int value of table.generation; -1 with an error set when it is not one */
static long long generation_of(PyObject *table)
{
    PyObject *g = PyObject_GetAttr(table, str_generation);
    if (g == NULL)
        return -1;
    long long v = PyLong_AsLongLong(g);
    Py_DECREF(g);
    return v;
}

PyDoc_STRVAR(take_adds_doc,
"take_adds(payloads, start, fast, pending, sent, table, queue, pump, bookie_id) -> int\n\n"
"The EOK answers payloads[start:] of the AddCopies on the wire of one\n"
"connection, while they are that: each one's copy taken out of fast (by its\n"
"header field), pending (by txnId) and sent, marked DONE (its deadline\n"
"retired: timeouts None), pump() called when queue holds requests (room on\n"
"the wire for them before the callback), then its callback.  The index of\n"
"the first answer it does not take, left as it was (another request's, another\n"
"shape), or the one after a callback that cleared the table (the connection\n"
"went away: table.generation moved).");

static PyObject *take_adds(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("take_adds", nargs, 9))
        return NULL;
    PyObject *payloads = args[0], *fast = args[2], *pending = args[3], *sent = args[4], *table = args[5],
             *queue = args[6], *pump = args[7], *bookie_id = args[8];
    if (!PyList_CheckExact(payloads) || !PyDict_CheckExact(fast) || !PyDict_CheckExact(pending)
            || !PyDict_CheckExact(sent)) {
        PyErr_SetString(PyExc_TypeError, "take_adds wants a list of payloads and three dicts");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    long long generation = generation_of(table);
    if (generation == -1 && PyErr_Occurred())
        return NULL;
    for (; i >= 0 && i < PyList_GET_SIZE(payloads); i++) {
        PyObject *payload = PyList_GET_ITEM(payloads, i);
        if (!PyBytes_CheckExact(payload) || PyBytes_GET_SIZE(payload) <= 2)
            break;
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(payload);
        Py_ssize_t n = PyBytes_GET_SIZE(payload), h = 2 + (Py_ssize_t)b[1];
        if (h >= n)
            break;
        PyObject *head = PyBytes_FromStringAndSize((const char *)b, h);
        if (head == NULL)
            return NULL;
        PyObject *found = PyDict_GetItemWithError(fast, head); /* borrowed */
        if (found == NULL || !Py_IS_TYPE(found, &AddCopyType)) {
            Py_DECREF(head);
            if (PyErr_Occurred())
                return NULL;
            break;
        }
        AddCopy *a = (AddCopy *)found;
        /* RequestTable.fast_result: on the wire, its txnId's, its EOK answer byte for byte */
        Py_ssize_t k = PyBytes_GET_SIZE(a->ok);
        PyObject *on_wire = a->state == int_state[REQ_SENT] || PyLong_AsLong(a->state) == REQ_SENT
                                ? PyDict_GetItemWithError(pending, a->key) : NULL;
        if (on_wire != found || n != h + k || memcmp(b + h, PyBytes_AS_STRING(a->ok), (size_t)k) != 0) {
            Py_DECREF(head);
            if (PyErr_Occurred())
                return NULL;
            break;
        }
        Py_INCREF(found);
        int failed = PyDict_DelItem(fast, head) < 0 || PyDict_DelItem(pending, a->key) < 0;
        Py_DECREF(head);
        if (!failed && PyDict_DelItem(sent, found) < 0) {
            if (PyErr_ExceptionMatches(PyExc_KeyError))
                PyErr_Clear();
            else
                failed = 1;
        }
        if (failed) {
            Py_DECREF(found);
            return NULL;
        }
        Py_INCREF(int_state[REQ_DONE]);
        Py_XSETREF(a->state, int_state[REQ_DONE]);
        Py_CLEAR(a->timeouts); /* the connection prunes its deadline queues once per chunk */
        if (PyObject_Length(queue) > 0) { /* room on the wire for what waits, before the callback */
            PyObject *r = PyObject_CallNoArgs(pump);
            if (r == NULL) {
                Py_DECREF(found);
                return NULL;
            }
            Py_DECREF(r);
        }
        int rc = 0;
        if (a->on_done != NULL && a->on_done != Py_None)
            rc = copy_call(a, a->on_done, bookie_id, Py_None);
        Py_DECREF(found);
        if (rc < 0)
            return NULL;
        long long now = generation_of(table);
        if (now == -1 && PyErr_Occurred())
            return NULL;
        if (now != generation) { /* a callback closed the connection: the rest is dropped */
            i++;
            break;
        }
    }
    return PyLong_FromSsize_t(i);
}

/* ------------------------------------------------------------ the module */

static PyMethodDef methods[] = {
    {"add_copies", (PyCFunction)(void (*)(void))add_copies, METH_FASTCALL, add_copies_doc},
    {"register_all", (PyCFunction)(void (*)(void))register_all, METH_FASTCALL, register_all_doc},
    {"take_adds", (PyCFunction)(void (*)(void))take_adds, METH_FASTCALL, take_adds_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_addpath",
    "The C twin of a connection's fast-path ADD copies (see bkctl.wire.client.requests).", -1, methods,
    NULL, NULL, NULL, NULL,
};

#define INTERN(var, text) (((var) = PyUnicode_InternFromString(text)) != NULL)

PyMODINIT_FUNC PyInit__addpath(void)
{
    if (!INTERN(str_v3_part, "v3_part") || !INTERN(str_v3_tail, "v3_tail")
            || !INTERN(str_high_priority, "high_priority") || !INTERN(str_ledger_id, "ledger_id")
            || !INTERN(str_entry_id, "entry_id") || !INTERN(str_generation, "generation")
            || !INTERN(str_on_done, "on_done") || !INTERN(str_ctx, "ctx") || !INTERN(str_slot, "slot")
            || !INTERN(str_frame, "frame") || !INTERN(str_value, "value"))
        return NULL;
    if ((empty_bytes = PyBytes_FromStringAndSize(NULL, 0)) == NULL || (int_op_add = PyLong_FromLong(OP_ADD)) == NULL)
        return NULL;
    for (int s = 0; s < 3; s++)
        if ((int_state[s] = PyLong_FromLong(s)) == NULL)
            return NULL;
    PyObject *failure = PyImport_ImportModule("twisted.python.failure");
    if (failure == NULL)
        return NULL;
    failure_type = PyObject_GetAttrString(failure, "Failure");
    Py_DECREF(failure);
    if (failure_type == NULL)
        return NULL;
    if (PyType_Ready(&AddCopyType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&AddCopyType);
    if (PyModule_AddObject(m, "AddCopy", (PyObject *)&AddCopyType) < 0) {
        Py_DECREF(&AddCopyType);
        Py_DECREF(m);
        return NULL;
    }
    /* the request states and the ADD operation as this module writes them: tests/unit/test_c_twins.py
     * holds them equal to requests.QUEUED, SENT, DONE and OperationType.ADD_ENTRY */
    PyObject *states = Py_BuildValue("(iii)", REQ_QUEUED, REQ_SENT, REQ_DONE);
    if (states == NULL || PyModule_AddObject(m, "REQUEST_STATES", states) < 0) {
        Py_XDECREF(states);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "OP_ADD", OP_ADD) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* what bkctl.wire.fastpath's ADDPATH_API must be: a build older than the sources is not used */
    if (PyModule_AddIntConstant(m, "API", 7) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
