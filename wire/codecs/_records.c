/*
 * bkctl.wire.codecs._records: the C twins of the bookie's disk records.
 *
 * bookied writes every entry twice, once into its journal and once into an
 * entry log at checkpoint, and reads entry log records back with one pread
 * per span: each record a CRC32C over a small head and the entry's bytes.
 * In Python each is a struct pack, a checksum call and a join per entry;
 * here a run of them is one allocation and one pass, and for 64 KiB and
 * more without the GIL, so that the thread that flushes leaves the others
 * their cores.
 *
 * The disk records' Python owner is bkctl.wire.bookie_disk.records: the records'
 * format, the interface these implement (RecordTwins) and the Python twins,
 * which are the reference (tests/unit/test_entry_log_records.py,
 * test_journal_entries_c.py).  journal_entries and log_records take that
 * Python twin as their first argument (records.twins_of binds it) and hand
 * it what they do not cover, so that their callers take what they return,
 * whole; span_records stops where its Python twin stops, and the reader
 * says why.  Used only with fast paths on (bkctl.wire.fastpath:
 * Twins.records).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_crc32c.h"
#include "_twins.h"

/* ------------------------------------------------------------ entry log records */

/* below this many bytes of records the GIL is kept: handing it over costs more than the work */
#define RECORDS_RELEASE_GIL 65536

PyDoc_STRVAR(log_records_doc,
"log_records(fallback, ledger_id, entry_ids, bodies, start, pos, limit, budget) -> (chunk, starts)\n\n"
"The records LogWriter.append writes for one ledger's entries entry_ids[start:]\n"
"(bodies pairwise) into an entry log from offset pos: chunk is their bytes\n"
"(encode_log_record's, one after the other), starts the offset of each record\n"
"(a big-endian u32 each): no object per entry, so that a flush's index rows are\n"
"made a run at a time.  It stops before a record that would end past limit (but\n"
"always takes the first, which the caller placed), after the record that makes\n"
"chunk at least budget bytes, and before an entry it does not cover (an id not\n"
"an int64, a body not bytes, an offset or length past 32 bits).  When\n"
"entry_ids[start] is one, there is none, or the arguments are not two lists of\n"
"one length, it returns what fallback, its Python twin, returns for the same\n"
"arguments.  The checksums and the copies of the data are made without the GIL\n"
"(for a chunk of 64 KiB or more), so that the thread that flushes leaves the\n"
"others their cores.");

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
    if (!bk_nargs("log_records", nargs, 8))
        return NULL;
    PyObject *fallback = args[0];
    args++;
    nargs--;
    long long ledger = 0, start, pos0, limit, budget;
    PyObject *ids = args[1], *bodies = args[2];
    if (!as_i64(args[3], &start) || !as_i64(args[4], &pos0) || !as_i64(args[5], &limit) || !as_i64(args[6], &budget)
            || start < 0 || pos0 < 0)
        return PyErr_Format(PyExc_ValueError, "log_records: the offsets must be 64-bit ints");
    /* not two lists of one length, or a ledger id that is not an int64: no record covered
     * (the Python path says what is wrong) */
    Py_ssize_t avail = 0;
    if (PyList_CheckExact(ids) && PyList_CheckExact(bodies) && PyList_GET_SIZE(ids) == PyList_GET_SIZE(bodies)
            && as_i64(args[0], &ledger))
        avail = PyList_GET_SIZE(ids) - (Py_ssize_t)start;
    if (budget / 24 + 1 < avail) /* a record has 24 bytes at least: no more fill the budget */
        avail = budget > 0 ? (Py_ssize_t)(budget / 24 + 1) : 1;
    RecordSource *src = PyMem_Malloc(sizeof(RecordSource) * (size_t)(avail > 0 ? avail : 1));
    if (src == NULL)
        return PyErr_NoMemory();
    /* which records: under the GIL, holding each one's data until its copy is made */
    Py_ssize_t k = 0;
    long long pos = pos0, total = 0;
    for (; k < avail; k++) {
        long long entry;
        if (!as_i64(PyList_GET_ITEM(ids, (Py_ssize_t)start + k), &entry))
            break;
        PyObject *data = PyList_GET_ITEM(bodies, (Py_ssize_t)start + k);
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
    PyObject *chunk = k > 0 ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total) : NULL;
    PyObject *starts = chunk != NULL ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)k * 4) : NULL;
    if (starts != NULL) {
        unsigned char *at = (unsigned char *)PyBytes_AS_STRING(starts);
        pos = pos0;
        for (Py_ssize_t i = 0; i < k; i++) {
            put_be32(at + 4 * i, (uint32_t)pos);
            pos += (long long)PyBytes_GET_SIZE(src[i].data) + 24;
        }
        /* the chunk is not shared yet and each data is held: no Python object changes here */
        write_records((unsigned char *)PyBytes_AS_STRING(chunk), src, k, ledger, -1, (size_t)total);
    }
    for (Py_ssize_t i = 0; i < k; i++)
        Py_DECREF(src[i].data);
    PyMem_Free(src);
    if (k == 0) /* not covered: the Python twin's */
        return PyObject_Vectorcall(fallback, args, (size_t)nargs, NULL);
    if (starts == NULL) {
        Py_XDECREF(chunk);
        return NULL;
    }
    return pair(chunk, starts);
}

/* ------------------------------------------------------------ journal records */

PyDoc_STRVAR(journal_entries_doc,
"journal_entries(fallback, ledger_id, entry_ids, bodies, record_type) -> bytes\n\n"
"The bookie journal's records of one ledger's entries, one after the other\n"
"(bookied.journal's _encode_entry of each): the CRC32C of head and body (4\n"
"bytes), the head (len(body) + 17 as u32, record_type as a byte, ledger_id\n"
"and the entry id as i64, big-endian) and the body.  When an id is not an\n"
"int64, a body not bytes or the lists differ in length it returns what\n"
"fallback, its Python twin, returns for the same arguments.  The checksums\n"
"and copies are made without the GIL for 64 KiB of records or more.");

static PyObject *journal_entries(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("journal_entries", nargs, 5))
        return NULL;
    PyObject *fallback = args[0];
    args++;
    nargs--;
    long long ledger, type;
    PyObject *ids = args[1], *bodies = args[2];
    if (!PyList_CheckExact(ids) || !PyList_CheckExact(bodies) || PyList_GET_SIZE(ids) != PyList_GET_SIZE(bodies)
            || !as_i64(args[0], &ledger) || !as_i64(args[3], &type) || type < 0 || type > 255)
        return PyObject_Vectorcall(fallback, args, (size_t)nargs, NULL);
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
    if (out == NULL && !PyErr_Occurred()) /* not covered: the Python twin's */
        return PyObject_Vectorcall(fallback, args, (size_t)nargs, NULL);
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
"returns its index (end when it took them all), as its Python twin does: the\n"
"reader checks that one again (saying why) and goes on after it.");

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

/* ------------------------------------------------------------ the module */

static PyMethodDef methods[] = {
    {"log_records", (PyCFunction)(void (*)(void))log_records, METH_FASTCALL, log_records_doc},
    {"span_records", (PyCFunction)(void (*)(void))span_records, METH_FASTCALL, span_records_doc},
    {"journal_entries", (PyCFunction)(void (*)(void))journal_entries, METH_FASTCALL, journal_entries_doc},
    {"hardware_crc32c", hardware_crc32c, METH_O, hardware_crc32c_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records",
    "The C twins of the bookie's disk records (see bkctl.wire.bookie_disk.records).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__records(void)
{
    bk_crc_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* what bkctl.wire.fastpath's RECORDS_API must be: a build older than the sources is not used */
    if (PyModule_AddIntConstant(m, "API", 5) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
