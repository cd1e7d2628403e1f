/*
 * bkctl.wire.codecs._plain's runs of ADDs: a bookie connection's consecutive plain ADDs of one
 * ledger, one key and the same flags (bookied.adds.Adds.run) taken apart in one call, and their
 * answers built in one, where a Python loop called the one-request twins of _plain.c per add;
 * and a run of plain READs of one ledger taken apart in one call (read_run, v2_read_run: how far
 * it goes, its entryIds and header lengths; bookied.plain_reads.PlainReads.v3_run, v2_run),
 * which _plain.c's read_answers (v3) or v2_read_answers here answers.
 *
 * The Python twins (bkctl.wire.codecs.plain.py_add_run, py_v2_add_run, py_add_answers,
 * py_v2_add_answers, py_read_run, py_v2_read_run, py_v2_read_answers) are the reference: each function here returns what its twin
 * returns (tests/unit/test_plain_add_runs_c.py, test_plain_read_runs_c.py, the fuzz target
 * ``plain_c_twins``).  A run is read
 * twice: first how far it goes (nothing made, so no Python code runs), then its values into
 * lists of that size (add_run: from what the first pass held of each request).
 */
#define PY_SSIZE_T_CLEAN
#include "_plain.h"

/* The arguments every run shares (add_run, v2_add_run, read_run): the payload list, where the run
 * may start and end in it, and the ledger; 0 with an exception set when they are not those.  A
 * ledger beyond int64 matches no request (*ledger_ok 0), as in the Python twins.  The caller cuts
 * ``end`` to the list once no more of its arguments are converted (an __index__ or __bool__ may
 * change the list). */
static int range_args(PyObject *const *args, PyObject **payloads, Py_ssize_t *start, Py_ssize_t *end,
                      long long *ledger, int *ledger_ok)
{
    *payloads = args[0];
    if (!PyList_Check(*payloads)) {
        PyErr_SetString(PyExc_TypeError, "payloads must be a list");
        return 0;
    }
    *start = PyLong_AsSsize_t(args[1]);
    if (*start == -1 && PyErr_Occurred())
        return 0;
    *end = PyLong_AsSsize_t(args[2]);
    if (*end == -1 && PyErr_Occurred())
        return 0;
    int overflow;
    *ledger = PyLong_AsLongLongAndOverflow(args[3], &overflow);
    if (*ledger == -1 && PyErr_Occurred())
        return 0;
    *ledger_ok = !overflow;
    if (*start < 0)
        *start = 0;
    return 1;
}

/* The arguments a run of adds shares (add_run, v2_add_run): range_args' and the key. */
static int run_args(PyObject *const *args, PyObject **payloads, Py_ssize_t *start, Py_ssize_t *end,
                    long long *ledger, int *ledger_ok, PyObject **key)
{
    if (!range_args(args, payloads, start, end, ledger, ledger_ok))
        return 0;
    *key = args[4];
    return need_bytes(*key);
}

/* The PyStructSequence add_run and v2_add_run return (plain.AddRun's fields). */
static PyTypeObject *AddRunType;

static PyStructSequence_Field add_run_fields[] = {
    {"end", "the index of the first payload not in the run"},
    {"txn_ids", "the txnIds of the adds in it (None for version-2 ADDs)"},
    {"entry_ids", "their entryIds"},
    {"bodies", "their bodies"},
    {"lac", "the largest LAC the bodies carry (-1 for none)"},
    {"size", "the bodies' bytes"},
    {NULL, NULL},
};

static PyStructSequence_Desc add_run_desc = {
    "bkctl.wire.codecs._plain.AddRun",
    "A run of plain ADDs taken apart (add_run, v2_add_run): bkctl.wire.codecs.plain.AddRun.",
    add_run_fields,
    6,
};

/* What a run keeps of its bodies as a whole while it cuts them out (plain.AddRun's lac, size). */
typedef struct {
    int64_t lac; /* -1 until a body is seen */
    Py_ssize_t size;
    int any;
} bodies_seen_t;

/* One more body of ``n`` bytes at ``b`` seen: plain.lac_of_entry's LAC (the int64 at offset 16
 * of a body of 24 bytes or more, else -1) and its size. */
static inline void see_body(bodies_seen_t *seen, const char *b, Py_ssize_t n)
{
    int64_t lac = n >= 24 ? (int64_t)get_be64((const uint8_t *)b + 16) : -1;
    if (lac > seen->lac || !seen->any) /* the first sets it: its LAC may be below -1 */
        seen->lac = lac;
    seen->any = 1;
    seen->size += n;
}

/* An AddRun of (end, txn_ids, entry_ids, bodies, lac, size), taking the three lists (txn_ids may be
 * Py_None, a borrowed one); NULL (an exception set, the lists released) when it cannot be made. */
static PyObject *new_add_run(Py_ssize_t end, PyObject *txn_ids, PyObject *entry_ids, PyObject *bodies,
                             const bodies_seen_t *seen)
{
    PyObject *run = PyStructSequence_New(AddRunType), *at = run == NULL ? NULL : PyLong_FromSsize_t(end);
    PyObject *lac = at == NULL ? NULL : PyLong_FromLongLong(seen->lac);
    PyObject *size = lac == NULL ? NULL : PyLong_FromSsize_t(seen->size);
    if (size == NULL) {
        Py_XDECREF(lac);
        Py_XDECREF(at);
        Py_XDECREF(run);
        if (txn_ids != Py_None)
            Py_DECREF(txn_ids);
        Py_DECREF(entry_ids);
        Py_DECREF(bodies);
        return NULL;
    }
    if (txn_ids == Py_None)
        Py_INCREF(Py_None);
    PyStructSequence_SET_ITEM(run, 0, at);
    PyStructSequence_SET_ITEM(run, 1, txn_ids);
    PyStructSequence_SET_ITEM(run, 2, entry_ids);
    PyStructSequence_SET_ITEM(run, 3, bodies);
    PyStructSequence_SET_ITEM(run, 4, lac);
    PyStructSequence_SET_ITEM(run, 5, size);
    return run;
}

/* Whether ``item`` (bytes) is an ADD_ENTRY (into *a) of the run's ledger, key and flags. */
static inline int in_add_run(PyObject *item, add_fields_t *a, long long ledger, PyObject *key, int high_priority,
                             int recovery)
{
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(item);
    return add_fields(b, PyBytes_GET_SIZE(item), a) && a->ledger_id == ledger && a->high_priority == high_priority &&
           a->recovery == recovery && a->key_len == PyBytes_GET_SIZE(key) &&
           memcmp(b + a->key_at, PyBytes_AS_STRING(key), (size_t)a->key_len) == 0;
}

/* payloads[j]'s bytes, which the first pass of a run took apart: NULL with a RuntimeError when
 * Python code run by an allocation in between (a finalizer) changed the list. */
static const char *still_there(PyObject *payloads, Py_ssize_t j, PyObject **item)
{
    if (j < PyList_GET_SIZE(payloads)) {
        *item = PyList_GET_ITEM(payloads, j);
        if (PyBytes_CheckExact(*item))
            return PyBytes_AS_STRING(*item);
    }
    PyErr_SetString(PyExc_RuntimeError, "a run's payloads changed while taken apart");
    return NULL;
}

/* A request of a run of v3 ADD_ENTRYs as its first pass took it apart (a reference held). */
typedef struct {
    PyObject *item;
    uint64_t txn;
    int64_t entry_id;
    Py_ssize_t body_at, body_len;
} taken_add_t;

/* Let go of the first ``n`` requests held in ``taken``, and of ``taken``. */
static void release_taken(taken_add_t *taken, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; k < n; k++)
        Py_DECREF(taken[k].item);
    PyMem_Free(taken);
}

PyDoc_STRVAR(add_run_doc,
"add_run(payloads, i, end, ledger_id, key, high_priority, recovery) -> AddRun\n\n"
"plain.py_add_run, in C: the run of payloads[i], payloads[i + 1], ... (before end and\n"
"the list's end) that plain_add_request takes apart as ADD_ENTRYs of ledger_id with key\n"
"and these flags (bools), up to the first that it does not or that differs in one of\n"
"them: (end, txn_ids, entry_ids, bodies, lac, size).  A payload that is not bytes is a TypeError.");

static PyObject *add_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("add_run()", nargs, 7))
        return NULL;
    PyObject *payloads, *key;
    Py_ssize_t start, end;
    long long ledger;
    int ledger_ok;
    if (!run_args(args, &payloads, &start, &end, &ledger, &ledger_ok, &key))
        return NULL;
    int high_priority = PyObject_IsTrue(args[5]), recovery = PyObject_IsTrue(args[6]);
    if (high_priority < 0 || recovery < 0)
        return NULL;
    if (end > PyList_GET_SIZE(payloads))
        end = PyList_GET_SIZE(payloads);
    /* first how far the run goes (no object made, so no Python code runs), each request held
     * with where its fields lie; then its values, from what was held: each request is taken
     * apart once, and a finalizer run by an allocation in between cannot change what is read */
    taken_add_t *taken = end > start ? PyMem_Malloc(sizeof(taken_add_t) * (size_t)(end - start)) : NULL;
    if (end > start && taken == NULL)
        return PyErr_NoMemory();
    add_fields_t a;
    Py_ssize_t j = start;
    for (; ledger_ok && j < end; j++) {
        PyObject *item = PyList_GET_ITEM(payloads, j);
        if (!need_bytes(item)) {
            release_taken(taken, j - start);
            return NULL;
        }
        if (!in_add_run(item, &a, ledger, key, high_priority, recovery))
            break;
        taken_add_t *t = &taken[j - start];
        Py_INCREF(item);
        t->item = item;
        t->txn = a.txn;
        t->entry_id = a.entry_id;
        t->body_at = a.body_at;
        t->body_len = a.body_len;
    }
    Py_ssize_t n = j > start ? j - start : 0;
    bodies_seen_t seen = {-1, 0, 0};
    PyObject *txn_ids = PyList_New(n), *entry_ids = PyList_New(n), *bodies = PyList_New(n);
    if (txn_ids == NULL || entry_ids == NULL || bodies == NULL)
        goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        const taken_add_t *t = &taken[k];
        const char *b = PyBytes_AS_STRING(t->item);
        PyObject *txn = PyLong_FromUnsignedLongLong(t->txn);
        if (txn == NULL)
            goto fail;
        PyList_SET_ITEM(txn_ids, k, txn);
        PyObject *entry = PyLong_FromLongLong(t->entry_id);
        if (entry == NULL)
            goto fail;
        PyList_SET_ITEM(entry_ids, k, entry);
        PyObject *body = PyBytes_FromStringAndSize(b + t->body_at, t->body_len);
        if (body == NULL)
            goto fail;
        PyList_SET_ITEM(bodies, k, body);
        see_body(&seen, b + t->body_at, t->body_len);
    }
    release_taken(taken, n);
    return new_add_run(start + n, txn_ids, entry_ids, bodies, &seen);
fail:
    release_taken(taken, n);
    Py_XDECREF(txn_ids);
    Py_XDECREF(entry_ids);
    Py_XDECREF(bodies);
    return NULL;
}

PyDoc_STRVAR(v2_add_run_doc,
"v2_add_run(payloads, i, end, ledger_id, key, flags) -> AddRun\n\n"
"plain.py_v2_add_run, in C: add_run of version-2 ADDs (v2_add_request) of ledger_id\n"
"with key and flags; txn_ids None.");

static PyObject *v2_add_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("v2_add_run()", nargs, 6))
        return NULL;
    PyObject *payloads, *key;
    Py_ssize_t start, end;
    long long ledger;
    int ledger_ok, overflow;
    if (!run_args(args, &payloads, &start, &end, &ledger, &ledger_ok, &key))
        return NULL;
    long long want_flags = PyLong_AsLongLongAndOverflow(args[5], &overflow);
    if (want_flags == -1 && PyErr_Occurred())
        return NULL;
    /* a key of another length, flags outside a header's 16 bits: no request matches */
    int any = ledger_ok && !overflow && want_flags >= 0 && want_flags <= 0xFFFF &&
              PyBytes_GET_SIZE(key) == MASTER_KEY_LENGTH;
    const char *want_key = PyBytes_AS_STRING(key);
    if (end > PyList_GET_SIZE(payloads))
        end = PyList_GET_SIZE(payloads);
    int flags;
    int64_t ledger_id, entry_id;
    Py_ssize_t j = start;
    for (; any && j < end; j++) {
        PyObject *item = PyList_GET_ITEM(payloads, j);
        if (!need_bytes(item))
            return NULL;
        const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(item);
        if (!v2_add_fields(b, PyBytes_GET_SIZE(item), &flags, &ledger_id, &entry_id) || ledger_id != ledger ||
            flags != want_flags || memcmp(b + 4, want_key, MASTER_KEY_LENGTH) != 0)
            break;
    }
    Py_ssize_t n = j > start ? j - start : 0;
    bodies_seen_t seen = {-1, 0, 0};
    PyObject *entry_ids = PyList_New(n), *bodies = PyList_New(n);
    if (entry_ids == NULL || bodies == NULL)
        goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item;
        const char *b = still_there(payloads, start + k, &item);
        if (b == NULL)
            goto fail;
        Py_ssize_t size = PyBytes_GET_SIZE(item);
        if (!v2_add_fields((const uint8_t *)b, size, &flags, &ledger_id, &entry_id)) {
            PyErr_SetString(PyExc_RuntimeError, "a run's payloads changed while taken apart");
            goto fail;
        }
        PyObject *entry = PyLong_FromLongLong(entry_id);
        if (entry == NULL)
            goto fail;
        PyList_SET_ITEM(entry_ids, k, entry);
        PyObject *body = PyBytes_FromStringAndSize(b + 4 + MASTER_KEY_LENGTH, size - 4 - MASTER_KEY_LENGTH);
        if (body == NULL)
            goto fail;
        PyList_SET_ITEM(bodies, k, body);
        see_body(&seen, b + 4 + MASTER_KEY_LENGTH, size - 4 - MASTER_KEY_LENGTH);
    }
    return new_add_run(start + n, Py_None, entry_ids, bodies, &seen);
fail:
    Py_XDECREF(entry_ids);
    Py_XDECREF(bodies);
    return NULL;
}

/* Each of a run's ids (a list's items, as far as ``n``) as a uint64 into ids[0..n): ``txn`` a
 * txnId (0..2^64), else an int64 in two's complement; 0 with an exception set when one is not
 * one, or the list got shorter (Python code run by an int's __index__). */
static int ids_of(PyObject *list, Py_ssize_t n, uint64_t *ids, int txn)
{
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k >= PyList_GET_SIZE(list)) {
            PyErr_SetString(PyExc_RuntimeError, "a run's ids changed while answered");
            return 0;
        }
        PyObject *id = PyList_GET_ITEM(list, k);
        if (txn) {
            unsigned long long v = PyLong_AsUnsignedLongLong(id);
            if (v == (unsigned long long)-1 && PyErr_Occurred())
                return 0;
            ids[k] = v;
        } else {
            long long v;
            if (!i64_of(id, &v))
                return 0;
            ids[k] = (uint64_t)v;
        }
    }
    return 1;
}

PyDoc_STRVAR(add_answers_doc,
"add_answers(txn_ids: list[int], status: int, ledger_id: int, entry_ids: list[int]) -> bytes\n\n"
"plain.py_add_answers, in C: add_answer(txn_ids[k], status, ledger_id, entry_ids[k]) of\n"
"each k (as far as the shorter list goes), one after the other, as one bytes.");

static PyObject *add_answers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("add_answers()", nargs, 4))
        return NULL;
    PyObject *txn_ids = args[0], *entry_ids = args[3];
    if (!PyList_Check(txn_ids) || !PyList_Check(entry_ids)) {
        PyErr_SetString(PyExc_TypeError, "add_answers() wants lists of txnIds and entryIds");
        return NULL;
    }
    long status;
    long long ledger;
    if (!status_of(args[1], &status) || !i64_of(args[2], &ledger))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(txn_ids);
    if (PyList_GET_SIZE(entry_ids) < n)
        n = PyList_GET_SIZE(entry_ids);
    uint64_t *ids = PyMem_Malloc(2 * (size_t)(n > 0 ? n : 1) * sizeof(uint64_t));
    if (ids == NULL)
        return PyErr_NoMemory();
    PyObject *out = NULL;
    if (!ids_of(txn_ids, n, ids, 1) || !ids_of(entry_ids, n, ids + n, 0))
        goto done;
    add_answers_t r;
    plan_add_answers(&r, status, ledger);
    size_t total = 0;
    for (Py_ssize_t k = 0; k < n; k++)
        total += add_answer_size(&r, ids[k], ids[n + k]);
    if (total > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "answers too large");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL)
        goto done;
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0; k < n; k++)
        o = put_add_answer(o, &r, ids[k], ids[n + k]);
done:
    PyMem_Free(ids);
    return out;
}

/* A version-2 ADD's answer header: version 2, ADD_ENTRY (v2.ADD_ANSWER_HEADER). */
#define V2_ADD_ANSWER_HEADER 0x02010000u

PyDoc_STRVAR(v2_add_answers_doc,
"v2_add_answers(rc: int, ledger_id: int, entry_ids: list[int]) -> bytes\n\n"
"plain.py_v2_add_answers, in C: the framed answers (rc) to the version-2 ADDs of\n"
"entry_ids of ledger_id, one after the other, as one bytes.");

static PyObject *v2_add_answers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("v2_add_answers()", nargs, 3))
        return NULL;
    PyObject *entry_ids = args[2];
    if (!PyList_Check(entry_ids)) {
        PyErr_SetString(PyExc_TypeError, "v2_add_answers() wants a list of entryIds");
        return NULL;
    }
    long rc = PyLong_AsLong(args[0]);
    if (rc == -1 && PyErr_Occurred())
        return NULL;
    if (rc < INT32_MIN || rc > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "rc out of the int32 range");
        return NULL;
    }
    long long ledger;
    if (!i64_of(args[1], &ledger))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(entry_ids);
    uint64_t *ids = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(uint64_t));
    if (ids == NULL)
        return PyErr_NoMemory();
    PyObject *out = NULL;
    if (ids_of(entry_ids, n, ids, 0) && (size_t)n <= (size_t)PY_SSIZE_T_MAX / 28)
        out = PyBytes_FromStringAndSize(NULL, 28 * n);
    if (out != NULL) {
        uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
        for (Py_ssize_t k = 0; k < n; k++, o += 28) { /* frame length 24 | header | rc | ledgerId | entryId */
            put_be32(o, 24);
            put_be32(o + 4, V2_ADD_ANSWER_HEADER);
            put_be32(o + 8, (uint32_t)(int32_t)rc);
            put_be64(o + 12, (uint64_t)ledger);
            put_be64(o + 20, ids[k]);
        }
    }
    PyMem_Free(ids);
    return out;
}

/* The PyStructSequence read_run returns (plain.ReadRun's fields). */
static PyTypeObject *ReadRunType;

static PyStructSequence_Field read_run_fields[] = {
    {"first", "the index of the run's first payload"},
    {"end", "the index of the first payload not in the run"},
    {"ledger_id", "the ledger they read"},
    {"entry_ids", "the entryIds of the reads in it"},
    {"header_lens", "the lengths of their header fields (plain_read_request's third field; None for version 2)"},
    {NULL, NULL},
};

static PyStructSequence_Desc read_run_desc = {
    "bkctl.wire.codecs._plain.ReadRun",
    "A run of plain READ_ENTRYs of one ledger taken apart (read_run): bkctl.wire.codecs.plain.ReadRun.",
    read_run_fields,
    5,
};

/* A ReadRun of (first, end, ledger, entry_ids, header_lens), taking the two lists (header_lens
 * may be Py_None, a borrowed one); NULL (an exception set, the lists released) when it cannot be made. */
static PyObject *new_read_run(Py_ssize_t first, Py_ssize_t end, PyObject *ledger, PyObject *entry_ids,
                              PyObject *header_lens)
{
    PyObject *run = PyStructSequence_New(ReadRunType), *at = run == NULL ? NULL : PyLong_FromSsize_t(first),
             *stop = at == NULL ? NULL : PyLong_FromSsize_t(end);
    if (stop == NULL) {
        Py_XDECREF(at);
        Py_XDECREF(run);
        Py_DECREF(entry_ids);
        if (header_lens != Py_None)
            Py_DECREF(header_lens);
        return NULL;
    }
    PyStructSequence_SET_ITEM(run, 0, at);
    PyStructSequence_SET_ITEM(run, 1, stop);
    PyStructSequence_SET_ITEM(run, 2, Py_NewRef(ledger));
    PyStructSequence_SET_ITEM(run, 3, entry_ids);
    PyStructSequence_SET_ITEM(run, 4, header_lens == Py_None ? Py_NewRef(Py_None) : header_lens);
    return run;
}

PyDoc_STRVAR(read_run_doc,
"read_run(payloads, i, end, ledger_id) -> ReadRun\n\n"
"plain.py_read_run, in C: the run of payloads[i], payloads[i + 1], ... (before end and\n"
"the list's end) that plain_read_request takes apart as READ_ENTRYs of ledger_id, up to\n"
"the first that it does not or that reads another ledger: (first, end, ledger_id,\n"
"entry_ids, header_lens).  A payload that is not bytes is a TypeError.");

/* A version-2 READ's fields as v2.plain_read_request takes them apart: version 2, READ_ENTRY
 * in its header's top 16 bits, no DO_FENCING flag, then the two ids, nothing more. */
#define V2_READ_TOP 0x0202
#define V2_READ_SIZE 20
#define V2_DO_FENCING 0x0001

/* b[0..n) as the plain READ parser of ``version`` (3: plain_read_request, 2:
 * v2.plain_read_request) takes it apart: 1 with its ids and its header field's length (0 for
 * version 2), or 0 for None. */
static inline int plain_read_fields(int version, const uint8_t *b, Py_ssize_t n, int64_t *ledger_id,
                                    int64_t *entry_id, Py_ssize_t *header_len)
{
    if (version == 3)
        return read_fields(b, n, ledger_id, entry_id, header_len);
    if (n != V2_READ_SIZE || ((b[0] << 8) | b[1]) != V2_READ_TOP || (b[3] & V2_DO_FENCING))
        return 0;
    *ledger_id = (int64_t)get_be64(b + 4);
    *entry_id = (int64_t)get_be64(b + 12);
    *header_len = 0;
    return 1;
}

/* read_run (version 3) and v2_read_run (version 2, no header lengths: None). */
static PyObject *read_run_of(PyObject *const *args, int version)
{
    PyObject *payloads;
    Py_ssize_t start, end;
    long long ledger;
    int ledger_ok;
    if (!range_args(args, &payloads, &start, &end, &ledger, &ledger_ok))
        return NULL;
    if (end > PyList_GET_SIZE(payloads))
        end = PyList_GET_SIZE(payloads);
    /* first how far the run goes (no object made, so no Python code runs), then its values;
     * a ledger beyond int64 matches no request, as in the Python twins */
    int64_t ledger_id, entry_id;
    Py_ssize_t header_len, j = start;
    for (; ledger_ok && j < end; j++) {
        PyObject *item = PyList_GET_ITEM(payloads, j);
        if (!need_bytes(item))
            return NULL;
        if (!plain_read_fields(version, (const uint8_t *)PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item),
                               &ledger_id, &entry_id, &header_len) ||
            ledger_id != ledger)
            break;
    }
    Py_ssize_t n = j > start ? j - start : 0;
    PyObject *entry_ids = PyList_New(n), *header_lens = version == 3 ? PyList_New(n) : Py_None;
    if (entry_ids == NULL || header_lens == NULL)
        goto fail;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item, *entry, *len;
        const char *b = still_there(payloads, start + k, &item);
        if (b == NULL)
            goto fail;
        if (!plain_read_fields(version, (const uint8_t *)b, PyBytes_GET_SIZE(item), &ledger_id, &entry_id,
                               &header_len)) {
            PyErr_SetString(PyExc_RuntimeError, "a run's payloads changed while taken apart");
            goto fail;
        }
        if ((entry = PyLong_FromLongLong(entry_id)) == NULL)
            goto fail;
        PyList_SET_ITEM(entry_ids, k, entry);
        if (version == 3) {
            if ((len = PyLong_FromSsize_t(header_len)) == NULL)
                goto fail;
            PyList_SET_ITEM(header_lens, k, len);
        }
    }
    return new_read_run(start, start + n, args[3], entry_ids, header_lens);
fail:
    Py_XDECREF(entry_ids);
    if (header_lens != Py_None)
        Py_XDECREF(header_lens);
    return NULL;
}

static PyObject *read_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return bk_nargs("read_run()", nargs, 4) ? read_run_of(args, 3) : NULL;
}

PyDoc_STRVAR(v2_read_run_doc,
"v2_read_run(payloads, i, end, ledger_id) -> ReadRun\n\n"
"plain.py_v2_read_run, in C: read_run of version-2 READ_ENTRYs (v2.plain_read_request)\n"
"of ledger_id; header_lens None.");

static PyObject *v2_read_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return bk_nargs("v2_read_run()", nargs, 4) ? read_run_of(args, 2) : NULL;
}

/* A version-2 READ's answer header: version 2, READ_ENTRY (v2.READ_ANSWER_HEADER). */
#define V2_READ_ANSWER_HEADER 0x02020000u

PyDoc_STRVAR(v2_read_answers_doc,
"v2_read_answers(run, bodies, start, limit) -> (bytes, next)\n\n"
"plain.py_v2_read_answers, in C: the framed EOK answers, one after the other, to the\n"
"reads start, start + 1, ... of ``run`` (a v2_read_run()) whose bodies[k] is bytes,\n"
"until one is not or their bytes reach ``limit``; ``next`` is the index of the first\n"
"read not answered.");

static PyObject *v2_read_answers(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("v2_read_answers()", nargs, 4))
        return NULL;
    PyObject *run = args[0], *bodies = args[1];
    if (!PyList_Check(bodies) || !PyTuple_Check(run) || PyTuple_GET_SIZE(run) != 5 ||
        !PyList_Check(PyTuple_GET_ITEM(run, 3))) {
        PyErr_SetString(PyExc_TypeError, "v2_read_answers() wants a v2_read_run() and a list of bodies");
        return NULL;
    }
    PyObject *entry_ids = PyTuple_GET_ITEM(run, 3);
    long long ledger;
    if (!i64_of(PyTuple_GET_ITEM(run, 2), &ledger))
        return NULL;
    Py_ssize_t start = PyLong_AsSsize_t(args[2]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t limit = PyLong_AsSsize_t(args[3]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    if (start < 0)
        start = 0;
    /* first the size of what is answered (the entryIds checked: ints, no __index__ run), then
     * the answers into one bytes object */
    Py_ssize_t n = PyList_GET_SIZE(bodies), next = start;
    size_t total = 0;
    for (; next < n && (Py_ssize_t)total < limit; next++) {
        PyObject *body = PyList_GET_ITEM(bodies, next);
        if (!PyBytes_CheckExact(body))
            break;
        long long entry;
        if (next >= PyList_GET_SIZE(entry_ids)) {
            PyErr_SetString(PyExc_IndexError, "v2_read_answers(): more bodies than reads");
            return NULL;
        }
        if (!PyLong_Check(PyList_GET_ITEM(entry_ids, next))) {
            PyErr_SetString(PyExc_TypeError, "a read run's entryIds must be ints");
            return NULL;
        }
        if (!i64_of(PyList_GET_ITEM(entry_ids, next), &entry))
            return NULL;
        if (PyBytes_GET_SIZE(body) > INT32_MAX - 24) {
            PyErr_SetString(PyExc_OverflowError, "answer too large for a frame");
            return NULL;
        }
        total += 28 + (size_t)PyBytes_GET_SIZE(body);
        if (total > (size_t)PY_SSIZE_T_MAX / 2) {
            PyErr_SetString(PyExc_OverflowError, "answers too large");
            return NULL;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (out == NULL)
        return NULL;
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t k = start; k < next; k++) { /* as checked above: nothing ran in between */
        PyObject *body = PyList_GET_ITEM(bodies, k);
        Py_ssize_t size = PyBytes_GET_SIZE(body);
        put_be32(o, (uint32_t)(24 + size)); /* frame length | header | rc EOK | ledgerId | entryId | body */
        put_be32(o + 4, V2_READ_ANSWER_HEADER);
        put_be32(o + 8, 0);
        put_be64(o + 12, (uint64_t)ledger);
        put_be64(o + 20, (uint64_t)PyLong_AsLongLong(PyList_GET_ITEM(entry_ids, k)));
        memcpy(o + 28, PyBytes_AS_STRING(body), (size_t)size);
        o += 28 + size;
    }
    return Py_BuildValue("(Nn)", out, next);
}

static PyMethodDef run_methods[] = {
    {"add_run", (PyCFunction)(void (*)(void))add_run, METH_FASTCALL, add_run_doc},
    {"v2_add_run", (PyCFunction)(void (*)(void))v2_add_run, METH_FASTCALL, v2_add_run_doc},
    {"add_answers", (PyCFunction)(void (*)(void))add_answers, METH_FASTCALL, add_answers_doc},
    {"v2_add_answers", (PyCFunction)(void (*)(void))v2_add_answers, METH_FASTCALL, v2_add_answers_doc},
    {"read_run", (PyCFunction)(void (*)(void))read_run, METH_FASTCALL, read_run_doc},
    {"v2_read_run", (PyCFunction)(void (*)(void))v2_read_run, METH_FASTCALL, v2_read_run_doc},
    {"v2_read_answers", (PyCFunction)(void (*)(void))v2_read_answers, METH_FASTCALL, v2_read_answers_doc},
    {NULL},
};

int bk_plain_add_runs(PyObject *m)
{
    if (AddRunType == NULL)
        AddRunType = PyStructSequence_NewType(&add_run_desc);
    if (ReadRunType == NULL)
        ReadRunType = PyStructSequence_NewType(&read_run_desc);
    if (AddRunType == NULL || ReadRunType == NULL || PyModule_AddFunctions(m, run_methods) < 0 ||
        PyModule_AddObjectRef(m, "AddRun", (PyObject *)AddRunType) < 0)
        return -1;
    return PyModule_AddObjectRef(m, "ReadRun", (PyObject *)ReadRunType);
}
