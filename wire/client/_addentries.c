/*
 * bkctl.wire.client._addentries, the C twin of a writer's side of its adds (its one Python
 * owner: the ledger handle, bkctl.wire.client.ledger_handle): its entries, their addressing and
 * the counting of their acknowledgements.  The connection's side, the copies and their answer
 * loop, is another module, _addpath.c (its owner: the connection); the two meet only through
 * the interfaces both Python twins have (an entry's EncodedAdd fields, the Acks callback).
 *
 *   Entry         a writer's entry on its way (pending_add.PendingAdd) that is also
 *                 its ADD encoded once (add_frames.EncodedAdd), made by Entries;
 *   address_run   pending_add.address_run: a run's write sets and ADDs, by bookie;
 *   Acks          a writer's acknowledgement counter (bkctl.wire.client.acks.Acks),
 *                 the callback the connection calls for each copy answered, which
 *                 reports to its declared sink (acks.AckSink: the writer).
 *
 * The Python code (bkctl.wire.client.pending_add, .acks) is the reference and the general
 * path; tests/unit/test_client_add_copies.py, test_client_address_run.py and
 * test_client_acks.py run the same checks on both.  Nothing here reads an underscored
 * attribute of a Python object.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#include "../codecs/_twins.h"

static PyObject *str_bookies, *str_acked, *str_acks, *str_caught_up, *str_copy_failed, *str_quorum_reached, *str_lo,
    *str_hi, *str_sets, *str_write_set, *str_entry_id;

/* ------------------------------------------------------------ Entry */

/* One entry on its way to its write set: the C twin of pending_add.PendingAdd that is also the
 * entry's ADD encoded once for it (add_frames.EncodedAdd, v3): a writer makes one object per add
 * instead of two, and encodes nothing more when it addresses it (made by Entries). */
typedef struct {
    PyObject_HEAD
    PyObject *ledger_id;
    PyObject *entry_id;
    PyObject *master_key;
    PyObject *body;
    PyObject *length;
    PyObject *recovery;
    PyObject *v3_part;
    PyObject *v3_tail;
    PyObject *deferred;
    PyObject *bookies;
    long long acked;
    long long acks;
} Entry;

static PyTypeObject EntryType;

static int entry_traverse(Entry *self, visitproc visit, void *arg)
{
    Py_VISIT(self->ledger_id);
    Py_VISIT(self->entry_id);
    Py_VISIT(self->master_key);
    Py_VISIT(self->body);
    Py_VISIT(self->length);
    Py_VISIT(self->recovery);
    Py_VISIT(self->v3_part);
    Py_VISIT(self->v3_tail);
    Py_VISIT(self->deferred);
    Py_VISIT(self->bookies);
    return 0;
}

static int entry_clear(Entry *self)
{
    Py_CLEAR(self->ledger_id);
    Py_CLEAR(self->entry_id);
    Py_CLEAR(self->master_key);
    Py_CLEAR(self->body);
    Py_CLEAR(self->length);
    Py_CLEAR(self->recovery);
    Py_CLEAR(self->v3_part);
    Py_CLEAR(self->v3_tail);
    Py_CLEAR(self->deferred);
    Py_CLEAR(self->bookies);
    return 0;
}

static void entry_dealloc(Entry *self)
{
    PyObject_GC_UnTrack(self);
    entry_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *entry_none(Entry *self, void *closure)
{
    Py_RETURN_NONE;
}

/* PendingAdd.reassign: copy slot goes to bookie now; its acknowledgement no longer counts */
static PyObject *entry_reassign(Entry *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("reassign", nargs, 2))
        return NULL;
    Py_ssize_t slot = PyLong_AsSsize_t(args[0]);
    if (slot == -1 && PyErr_Occurred())
        return NULL;
    if (slot < 0 || slot > 62) {
        PyErr_SetString(PyExc_ValueError, "reassign: no such copy");
        return NULL;
    }
    if (!PyList_CheckExact(self->bookies)) { /* shared with its stripe until now */
        PyObject *copy = self->bookies == Py_None ? PyList_New(0) : PySequence_List(self->bookies);
        if (copy == NULL)
            return NULL;
        Py_XSETREF(self->bookies, copy);
    }
    long long bit = 1LL << slot;
    if (self->acked & bit) {
        self->acked &= ~bit;
        self->acks -= 1;
    }
    Py_INCREF(args[1]);
    if (PyList_SetItem(self->bookies, slot, args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef entry_methods[] = {
    {"reassign", (PyCFunction)(void (*)(void))entry_reassign, METH_FASTCALL,
     "reassign(slot, bookie): copy slot goes to bookie now, as PendingAdd.reassign."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef entry_members[] = {
    {"ledger_id", T_OBJECT, offsetof(Entry, ledger_id), READONLY, NULL},
    {"entry_id", T_OBJECT, offsetof(Entry, entry_id), READONLY, NULL},
    {"master_key", T_OBJECT, offsetof(Entry, master_key), READONLY, NULL},
    {"body", T_OBJECT, offsetof(Entry, body), READONLY, "the packaged entry"},
    {"length", T_OBJECT, offsetof(Entry, length), READONLY, "the ledger's length with this entry"},
    {"recovery", T_OBJECT, offsetof(Entry, recovery), READONLY, NULL},
    {"high_priority", T_OBJECT, offsetof(Entry, recovery), READONLY, "a recovery add's: high priority"},
    {"v3_part", T_OBJECT, offsetof(Entry, v3_part), READONLY, "the request's addRequest field"},
    {"v3_tail", T_OBJECT, offsetof(Entry, v3_tail), READONLY, "the EOK answer after its header field"},
    {"deferred", T_OBJECT, offsetof(Entry, deferred), 0, "fired once complete (None: nobody waits)"},
    {"bookies", T_OBJECT, offsetof(Entry, bookies), 0, "its write set (None until sent)"},
    {"acked", T_LONGLONG, offsetof(Entry, acked), 0, "bit i: copy i acknowledged"},
    {"acks", T_LONGLONG, offsetof(Entry, acks), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef entry_getset[] = {
    {"v2_frame", (getter)entry_none, NULL, "None: encoded for v3", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bkctl.wire.client._addentries.Entry",
    .tp_doc = "An entry on its way to its write set: PendingAdd and its EncodedAdd in one (made by Entries).",
    .tp_basicsize = sizeof(Entry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_methods = entry_methods,
    .tp_members = entry_members,
    .tp_getset = entry_getset,
};

/* ------------------------------------------------------------ Entries */

/* A writer's maker of Entries: Entries(package, add_part, ledger_id, master_key, recovery)(entry_id,
 * lac, length, payload, deferred) -> Entry, packaged by package (DigestManager.packager: for
 * CRC32C _fastcodec's crc32c_package) and encoded by add_part (_fastcodec's), each whole (its
 * Python twin: pending_add.Entries). */
typedef struct {
    PyObject_HEAD
    PyObject *package;
    PyObject *add_part;
    PyObject *ledger_id;
    PyObject *master_key;
    PyObject *recovery;
    vectorcallfunc vectorcall;
} Entries;

static int entries_traverse(Entries *self, visitproc visit, void *arg)
{
    Py_VISIT(self->package);
    Py_VISIT(self->add_part);
    Py_VISIT(self->ledger_id);
    Py_VISIT(self->master_key);
    Py_VISIT(self->recovery);
    return 0;
}

static int entries_clear(Entries *self)
{
    Py_CLEAR(self->package);
    Py_CLEAR(self->add_part);
    Py_CLEAR(self->ledger_id);
    Py_CLEAR(self->master_key);
    Py_CLEAR(self->recovery);
    return 0;
}

static void entries_dealloc(Entries *self)
{
    PyObject_GC_UnTrack(self);
    entries_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *entries_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Entries *self = (Entries *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) || !bk_nargs("Entries", nargs, 5)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Entries takes no keyword arguments");
        return NULL;
    }
    PyObject *entry_id = args[0], *length = args[2], *deferred = args[4];
    PyObject *pack[5] = {self->ledger_id, entry_id, args[1], length, args[3]};
    PyObject *body = PyObject_Vectorcall(self->package, pack, 5, NULL);
    if (body == NULL)
        return NULL;
    PyObject *call[5] = {self->ledger_id, entry_id, self->master_key, body, self->recovery};
    PyObject *parts = PyObject_Vectorcall(self->add_part, call, 5, NULL);
    if (parts == NULL) {
        Py_DECREF(body);
        return NULL;
    }
    if (!PyTuple_CheckExact(parts) || PyTuple_GET_SIZE(parts) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(parts, 0))
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(parts, 1))) {
        Py_DECREF(parts);
        Py_DECREF(body);
        PyErr_SetString(PyExc_TypeError, "Entries: add_part must give (part, reply)");
        return NULL;
    }
    Entry *e = PyObject_GC_New(Entry, &EntryType);
    if (e == NULL) {
        Py_DECREF(parts);
        Py_DECREF(body);
        return NULL;
    }
#define SET(field, value) (Py_INCREF(value), e->field = (value))
    SET(ledger_id, self->ledger_id);
    SET(entry_id, entry_id);
    SET(master_key, self->master_key);
    SET(body, body);
    SET(length, length);
    SET(recovery, self->recovery);
    SET(v3_part, PyTuple_GET_ITEM(parts, 0));
    SET(v3_tail, PyTuple_GET_ITEM(parts, 1));
    SET(deferred, deferred);
    SET(bookies, Py_None);
#undef SET
    Py_DECREF(parts);
    Py_DECREF(body);
    e->acked = 0;
    e->acks = 0;
    PyObject_GC_Track(e);
    return (PyObject *)e;
}

static PyObject *entries_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *package, *add_part, *ledger_id, *master_key, *recovery;
    static char *names[] = {"package", "add_part", "ledger_id", "master_key", "recovery", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOO:Entries", names, &package, &add_part, &ledger_id,
                                     &master_key, &recovery))
        return NULL;
    Entries *self = (Entries *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(package);
    self->package = package;
    Py_INCREF(add_part);
    self->add_part = add_part;
    Py_INCREF(ledger_id);
    self->ledger_id = ledger_id;
    Py_INCREF(master_key);
    self->master_key = master_key;
    Py_INCREF(recovery);
    self->recovery = recovery;
    self->vectorcall = entries_vectorcall;
    return (PyObject *)self;
}

static PyMemberDef entries_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Entries, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject EntriesType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bkctl.wire.client._addentries.Entries",
    .tp_doc = "Entries(package, add_part, ledger_id, master_key, recovery)(entry_id, lac, length, payload, deferred)"
              " -> Entry.",
    .tp_basicsize = sizeof(Entries),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = entries_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Entries, vectorcall),
    .tp_traverse = (traverseproc)entries_traverse,
    .tp_clear = (inquiry)entries_clear,
    .tp_dealloc = (destructor)entries_dealloc,
    .tp_members = entries_members,
};

/* ------------------------------------------------------------ addressing a run */

/* the int attribute name of obj in *out; 0, or -1 with an error */
static int long_attr(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* the stripe a StripeCursor keeps: lo, hi and sets (a new reference); 0, or -1 with an error */
static int stripe_of(PyObject *cursor, long long *lo, long long *hi, PyObject **sets)
{
    if (long_attr(cursor, str_lo, lo) < 0 || long_attr(cursor, str_hi, hi) < 0)
        return -1;
    PyObject *v;
    v = PyObject_GetAttr(cursor, str_sets);
    if (v == NULL)
        return -1;
    if (!PyList_CheckExact(v)) {
        Py_DECREF(v);
        PyErr_SetString(PyExc_TypeError, "address_run: a cursor's sets must be a list");
        return -1;
    }
    Py_XSETREF(*sets, v);
    return 0;
}

PyDoc_STRVAR(address_run_doc,
"address_run(run, cursor) -> {bookie: (entries, slots)}\n\n"
"The C twin of bkctl.wire.client.pending_add.address_run: each entry of run\n"
"not addressed yet (bookies None; the others are skipped) given its write set (the StripeCursor's)\n"
"and no copy acknowledged, its copies (each entry its own encoded ADD) grouped by bookie.");

static PyObject *address_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("address_run", nargs, 2))
        return NULL;
    PyObject *run = args[0], *cursor = args[1];
    if (!PyList_CheckExact(run)) {
        PyErr_SetString(PyExc_TypeError, "address_run wants a list");
        return NULL;
    }
    PyObject *copies = PyDict_New();
    if (copies == NULL)
        return NULL;
    PyObject *sets = NULL, *zero = NULL;
    long long lo = 0, hi = -1;
    Py_ssize_t n = PyList_GET_SIZE(run);
    if (n == 0)
        return copies;
    zero = PyLong_FromLong(0);
    if (zero == NULL)
        goto fail;
    int fresh = 0; /* the cursor looked at under the ledger's metadata now */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(run); i++) {
        PyObject *p = PyList_GET_ITEM(run, i);
        int addressed;
        if (Py_IS_TYPE(p, &EntryType)) {
            addressed = ((Entry *)p)->bookies != Py_None;
        } else {
            PyObject *had = PyObject_GetAttr(p, str_bookies);
            addressed = had == NULL ? -1 : had != Py_None;
            Py_XDECREF(had);
        }
        if (addressed < 0)
            goto fail;
        if (addressed)
            continue; /* addressed already (an ensemble change sent it) */
        Py_INCREF(p);
        PyObject *bookies = NULL, *e_obj = PyObject_GetAttr(p, str_entry_id);
        long long e = e_obj == NULL ? -1 : PyLong_AsLongLong(e_obj);
        int ok = e_obj != NULL && !(e == -1 && PyErr_Occurred());
        if (ok && fresh && lo <= e && e <= hi && PyList_GET_SIZE(sets) > 0) {
            bookies = PyList_GET_ITEM(sets, (Py_ssize_t)(e % PyList_GET_SIZE(sets)));
            Py_INCREF(bookies);
        } else if (ok) { /* the cursor's write_set: it checks the metadata and moves to e's stripe */
            bookies = PyObject_CallMethodOneArg(cursor, str_write_set, e_obj);
            ok = bookies != NULL && stripe_of(cursor, &lo, &hi, &sets) == 0;
            fresh = 1;
        }
        if (ok && Py_IS_TYPE(p, &EntryType)) { /* in place */
            Entry *en = (Entry *)p;
            Py_INCREF(bookies);
            Py_XSETREF(en->bookies, bookies);
            en->acked = en->acks = 0;
        } else {
            ok = ok && PyObject_SetAttr(p, str_bookies, bookies) == 0 && PyObject_SetAttr(p, str_acked, zero) == 0
                 && PyObject_SetAttr(p, str_acks, zero) == 0;
        }
        PyObject *seq = ok ? PySequence_Fast(bookies, "a write set must be a sequence") : NULL;
        ok = seq != NULL;
        for (Py_ssize_t slot = 0; ok && slot < PySequence_Fast_GET_SIZE(seq); slot++) {
            PyObject *bookie = PySequence_Fast_GET_ITEM(seq, slot);
            PyObject *mine = PyDict_GetItemWithError(copies, bookie); /* borrowed */
            if (mine == NULL) {
                if (PyErr_Occurred()) {
                    ok = 0;
                    break;
                }
                PyObject *a = PyList_New(0), *b = PyList_New(0);
                mine = a && b ? PyTuple_Pack(2, a, b) : NULL;
                Py_XDECREF(a);
                Py_XDECREF(b);
                if (mine == NULL || PyDict_SetItem(copies, bookie, mine) < 0) {
                    Py_XDECREF(mine);
                    ok = 0;
                    break;
                }
                Py_DECREF(mine); /* the dict keeps it */
            }
            PyObject *slot_obj = PyLong_FromSsize_t(slot);
            ok = slot_obj != NULL && PyList_Append(PyTuple_GET_ITEM(mine, 0), p) == 0
                 && PyList_Append(PyTuple_GET_ITEM(mine, 1), slot_obj) == 0;
            Py_XDECREF(slot_obj);
        }
        Py_XDECREF(seq);
        Py_XDECREF(bookies);
        Py_XDECREF(e_obj);
        Py_DECREF(p);
        if (!ok)
            goto fail;
    }
    Py_XDECREF(sets);
    Py_DECREF(zero);
    return copies;
fail:
    Py_XDECREF(sets);
    Py_XDECREF(zero);
    Py_DECREF(copies);
    return NULL;
}

/* ------------------------------------------------------------ Acks */

/* A writer's acknowledgement counter: the C twin of bkctl.wire.client.acks.Acks (read it for
 * what each step means).  Called by the connections once per copy answered, from take_adds
 * with no Python frame between the bytes and the count; the entries are read and written
 * through their public fields (bookies, acked, acks).  Its state is its own (each bookie's
 * backlog, the bookies behind); what the writer acts on goes to its sink (acks.AckSink:
 * copy_failed, caught_up, quorum_reached), which holds the writer's pipeline. */
typedef struct {
    PyObject_HEAD
    PyObject *sink;
    PyObject *unanswered; /* dict: bookie -> writes unanswered (its own) */
    PyObject *behind;     /* set of the bookies max_inflight writes behind (its own) */
    long long qa;
    long long max_inflight;
    long long resume_at;
    char held;
    vectorcallfunc vectorcall;
} Acks;

static PyTypeObject AcksType;

static int acks_traverse(Acks *self, visitproc visit, void *arg)
{
    Py_VISIT(self->sink);
    Py_VISIT(self->unanswered);
    Py_VISIT(self->behind);
    return 0;
}

static int acks_clear(Acks *self)
{
    Py_CLEAR(self->sink);
    Py_CLEAR(self->unanswered);
    Py_CLEAR(self->behind);
    return 0;
}

static void acks_dealloc(Acks *self)
{
    PyObject_GC_UnTrack(self);
    acks_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* the sink's method name(args...): 0, or -1 with an exception set; *out (when given) its truth */
static int sink_call(Acks *self, PyObject *name, PyObject *const *args, size_t nargs, int *out)
{
    PyObject *call[5] = {self->sink, NULL, NULL, NULL, NULL};
    for (size_t i = 0; i < nargs; i++)
        call[i + 1] = args[i];
    PyObject *r = PyObject_VectorcallMethod(name, call, (nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL)
        return -1;
    int rc = 0;
    if (out != NULL) {
        rc = PyObject_IsTrue(r);
        if (rc >= 0) {
            *out = rc;
            rc = 0;
        }
    }
    Py_DECREF(r);
    return rc;
}

/* a bookie's backlog: 0 with *n set, or -1 with an exception set */
static int acks_backlog_of(Acks *self, PyObject *bookie, long long absent, long long *n)
{
    PyObject *had = PyDict_GetItemWithError(self->unanswered, bookie); /* borrowed */
    if (had == NULL && PyErr_Occurred())
        return -1;
    *n = had == NULL ? absent : PyLong_AsLongLong(had);
    return *n == -1 && PyErr_Occurred() ? -1 : 0;
}

static int acks_set_backlog(Acks *self, PyObject *bookie, long long n)
{
    PyObject *v = PyLong_FromLongLong(n);
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItem(self->unanswered, bookie, v);
    Py_DECREF(v);
    return rc;
}

/* the count of one copy's answer: 0, or -1 with an exception set */
static int acks_count(Acks *self, PyObject *p, PyObject *slot_obj, PyObject *bookie, PyObject *error)
{
    /* the bookie's unanswered writes, one fewer */
    long long n;
    if (acks_backlog_of(self, bookie, 1, &n) < 0 || acks_set_backlog(self, bookie, n - 1) < 0)
        return -1;
    if (PySet_GET_SIZE(self->behind) > 0 && n - 1 <= self->resume_at) {
        int in = PySet_Discard(self->behind, bookie);
        if (in < 0)
            return -1;
        if (in && PySet_GET_SIZE(self->behind) == 0 && sink_call(self, str_caught_up, NULL, 0, NULL) < 0)
            return -1;
    }
    if (error != Py_None) {
        PyObject *args[4] = {error, p, slot_obj, bookie};
        return sink_call(self, str_copy_failed, args, 4, NULL);
    }
    Py_ssize_t slot = PyLong_AsSsize_t(slot_obj);
    if (slot == -1 && PyErr_Occurred())
        return -1;
    if (slot < 0 || slot > 62) {
        PyErr_SetString(PyExc_ValueError, "Acks: a copy's slot is 0..62");
        return -1;
    }
    /* from a bookie of the copy's current write set, the first time */
    int is_entry = Py_IS_TYPE(p, &EntryType); /* an Entry's fields are read and written in place */
    PyObject *bookies = is_entry ? (Py_INCREF(((Entry *)p)->bookies), ((Entry *)p)->bookies)
                                 : PyObject_GetAttr(p, str_bookies);
    if (bookies == NULL)
        return -1;
    if (bookies == Py_None) {
        Py_DECREF(bookies);
        return 0;
    }
    PyObject *to = PySequence_GetItem(bookies, slot);
    Py_DECREF(bookies);
    if (to == NULL)
        return -1;
    int same = to == bookie ? 1 : PyObject_RichCompareBool(to, bookie, Py_EQ);
    Py_DECREF(to);
    if (same <= 0)
        return same;
    long long bit = 1LL << slot, acks;
    if (is_entry) {
        Entry *en = (Entry *)p;
        if (en->acked & bit)
            return 0; /* a duplicate */
        en->acked |= bit;
        acks = ++en->acks;
    } else {
        long long acked;
        if (long_attr(p, str_acked, &acked) < 0)
            return -1;
        if (acked & bit)
            return 0; /* a duplicate */
        if (long_attr(p, str_acks, &acks) < 0)
            return -1;
        acks += 1;
        PyObject *v = PyLong_FromLongLong(acked | bit);
        int rc = v == NULL ? -1 : PyObject_SetAttr(p, str_acked, v);
        Py_XDECREF(v);
        if (rc < 0)
            return -1;
        v = PyLong_FromLongLong(acks);
        rc = v == NULL ? -1 : PyObject_SetAttr(p, str_acks, v);
        Py_XDECREF(v);
        if (rc < 0)
            return -1;
    }
    if (self->held || acks < self->qa)
        return 0; /* completes at the burst's end, or when more copies are in */
    int later = 0;
    if (sink_call(self, str_quorum_reached, &p, 1, &later) < 0)
        return -1;
    if (later)
        self->held = 1;
    return 0;
}

static PyObject *acks_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_SetString(PyExc_TypeError, "Acks takes no keyword arguments");
        return NULL;
    }
    if (!bk_nargs("Acks", nargs, 4))
        return NULL;
    if (acks_count((Acks *)callable, args[0], args[1], args[2], args[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *acks_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *sink;
    long long qa, max_inflight, resume_at;
    static char *names[] = {"sink", "ack_quorum", "max_inflight", "resume_at", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OLLL:Acks", names, &sink, &qa, &max_inflight, &resume_at))
        return NULL;
    Acks *self = (Acks *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(sink);
    self->sink = sink;
    self->unanswered = PyDict_New();
    self->behind = PySet_New(NULL);
    if (self->unanswered == NULL || self->behind == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->qa = qa;
    self->max_inflight = max_inflight;
    self->resume_at = resume_at;
    self->held = 0;
    self->vectorcall = acks_vectorcall;
    return (PyObject *)self;
}

/* Acks.sent(bookie, n): n more writes to bookie unanswered; behind at max_inflight */
static PyObject *acks_sent(Acks *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("sent", nargs, 2))
        return NULL;
    long long n, more = PyLong_AsLongLong(args[1]);
    if (more == -1 && PyErr_Occurred())
        return NULL;
    if (acks_backlog_of(self, args[0], 0, &n) < 0 || acks_set_backlog(self, args[0], n + more) < 0)
        return NULL;
    if (n + more >= self->max_inflight && PySet_Add(self->behind, args[0]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Acks.backlog(bookie): its writes unanswered */
static PyObject *acks_backlog(Acks *self, PyObject *bookie)
{
    long long n;
    if (acks_backlog_of(self, bookie, 0, &n) < 0)
        return NULL;
    return PyLong_FromLongLong(n);
}

/* Acks.forget(bookie): it is being replaced; nothing waits for it */
static PyObject *acks_forget(Acks *self, PyObject *bookie)
{
    if (PySet_Discard(self->behind, bookie) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef acks_methods[] = {
    {"sent", (PyCFunction)(void (*)(void))acks_sent, METH_FASTCALL,
     "sent(bookie, n): n more writes to bookie unanswered, as Acks.sent."},
    {"backlog", (PyCFunction)acks_backlog, METH_O, "backlog(bookie): its writes unanswered, as Acks.backlog."},
    {"forget", (PyCFunction)acks_forget, METH_O, "forget(bookie): nothing waits for it, as Acks.forget."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef acks_members[] = {
    {"sink", T_OBJECT, offsetof(Acks, sink), READONLY, NULL},
    {"behind", T_OBJECT, offsetof(Acks, behind), READONLY, "the bookies max_inflight writes behind"},
    {"ack_quorum", T_LONGLONG, offsetof(Acks, qa), READONLY, NULL},
    {"max_inflight", T_LONGLONG, offsetof(Acks, max_inflight), READONLY, NULL},
    {"resume_at", T_LONGLONG, offsetof(Acks, resume_at), READONLY, NULL},
    {"held", T_BOOL, offsetof(Acks, held), 0, "completions are due at the end of the burst under way"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Acks, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject AcksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bkctl.wire.client._addentries.Acks",
    .tp_doc = "The C twin of bkctl.wire.client.acks.Acks: a writer's acknowledgement counter.",
    .tp_basicsize = sizeof(Acks),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = acks_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Acks, vectorcall),
    .tp_traverse = (traverseproc)acks_traverse,
    .tp_clear = (inquiry)acks_clear,
    .tp_dealloc = (destructor)acks_dealloc,
    .tp_methods = acks_methods,
    .tp_members = acks_members,
};


/* ------------------------------------------------------------ into the module */

static PyMethodDef entries_methods[] = {
    {"address_run", (PyCFunction)(void (*)(void))address_run, METH_FASTCALL, address_run_doc},
    {NULL, NULL, 0, NULL},
};

#define INTERN(var, text) (((var) = PyUnicode_InternFromString(text)) != NULL)

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_addentries",
    "The C twin of a writer's entries, their addressing and acknowledgements (see bkctl.wire.client.pending_add).",
    -1, entries_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__addentries(void)
{
    if (!INTERN(str_bookies, "bookies") || !INTERN(str_acked, "acked") || !INTERN(str_acks, "acks")
            || !INTERN(str_caught_up, "caught_up")
            || !INTERN(str_copy_failed, "copy_failed") || !INTERN(str_quorum_reached, "quorum_reached") || !INTERN(str_lo, "lo")
            || !INTERN(str_hi, "hi") || !INTERN(str_sets, "sets") || !INTERN(str_write_set, "write_set")
            || !INTERN(str_entry_id, "entry_id"))
        return NULL;
    if (PyType_Ready(&AcksType) < 0 || PyType_Ready(&EntryType) < 0 || PyType_Ready(&EntriesType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyTypeObject *types[3] = {&AcksType, &EntryType, &EntriesType};
    const char *type_names[3] = {"Acks", "Entry", "Entries"};
    for (int t = 0; t < 3; t++) {
        if (PyModule_AddObjectRef(m, type_names[t], (PyObject *)types[t]) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    /* what bkctl.wire.fastpath's ADDENTRIES_API must be: a build older than the sources is not used */
    if (PyModule_AddIntConstant(m, "API", 4) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
