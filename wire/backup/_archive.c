/*
 * bkctl.wire.backup._archive: the C twins of a backup's data objects, written
 * and read.  archive_parts makes a batch's heads and payloads as a backup writes
 * them (its Python owner: bkctl.wire.backup.archive: ArchiveParts and the Python
 * twin, py_archive_parts, the reference: tests/unit/test_archive_parts.py);
 * entry_run decodes them (bkctl.wire.backup.data_read: the interface, DecodeRun,
 * and the Python twin, py_entry_run, the reference: tests/unit/test_archive_runs.py).
 *
 * A backup checksums every entry it copies; a restore reads every entry of
 * every data object back.  In Python each is a struct pack or unpack, a CRC32C
 * call and a tuple or two.  Here a batch's heads, or a buffer's run of entries,
 * is one pass, its checksums made without the GIL (for 64 KiB and more, so that
 * the client's thread and the other copy or writer threads keep their cores),
 * then its objects made under it.
 * Used only with fast paths on (bkctl.wire.fastpath: Twins.archive_parts and
 * Twins.archive_reader).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../codecs/_crc32c.h"
#include "../codecs/_twins.h"

/* below this many bytes of buffer the GIL is kept: handing it over costs more than the work */
#define ARCHIVE_RELEASE_GIL 65536
/* an entry's head: [u64 entry id][u32 length][u32 CRC32C of the payload], big-endian */
#define HEAD 16

/* what data_read.RUN_NEEDS_BYTES, RUN_BAD_ID and RUN_BAD_CRC are */
enum { RUN_NEEDS_BYTES = 0, RUN_BAD_ID = 1, RUN_BAD_CRC = 2 };

static PyTypeObject *EntryRunType;

static PyStructSequence_Field entry_run_fields[] = {
    {"payloads", "the payloads of the entries in the run, in order"},
    {"heads", "their heads, joined"},
    {"size", "their payloads' bytes"},
    {"end", "the position after the last"},
    {"next_id", "the id the next entry must have"},
    {"stop", "why the run ended (data_read.RUN_NEEDS_BYTES, RUN_BAD_ID, RUN_BAD_CRC)"},
    {"need", "the bytes from end that would hold the next entry (RUN_NEEDS_BYTES), else 0"},
    {"found", "the id the next entry's head has (RUN_BAD_ID), else 0"},
    {NULL, NULL},
};

static PyStructSequence_Desc entry_run_desc = {
    "bkctl.wire.backup._archive.EntryRun",
    "A run of a data object's entries (entry_run): bkctl.wire.backup.data_read.EntryRun.",
    entry_run_fields,
    8,
};

/* What the walk over a buffer found (no Python object: made without the GIL). */
typedef struct {
    Py_ssize_t taken;   /* entries in the run */
    size_t end;         /* the position after the last */
    size_t size;        /* their payloads' bytes */
    int stop;
    uint64_t need;
    uint64_t found;
} Walk;

/* The run of entries of b (n bytes) from pos, the first expected to have id expected (wrapped:
 * it is 2**64, which no head holds): each entry's head position into at[] (room for
 * (n - pos) / HEAD + 1 of them). */
static void walk(const unsigned char *b, size_t n, size_t pos, uint64_t expected, int wrapped, size_t *at, Walk *w)
{
    Py_ssize_t k = 0;
    size_t size = 0;
    w->stop = RUN_NEEDS_BYTES;
    w->need = 0;
    w->found = 0;
    for (;;) {
        if (n - pos < HEAD) {
            w->need = HEAD;
            break;
        }
        uint64_t id = get_be64(b + pos);
        if (wrapped || id != expected) {
            w->stop = RUN_BAD_ID;
            w->found = id;
            break;
        }
        uint32_t length = get_be32(b + pos + 8);
        if ((uint64_t)length > (uint64_t)(n - pos - HEAD)) {
            w->need = (uint64_t)HEAD + length;
            break;
        }
        const unsigned char *payload = b + pos + HEAD;
        if (crc32c_two(payload, length, payload + length, 0) != get_be32(b + pos + 12)) {
            w->stop = RUN_BAD_CRC;
            break;
        }
        at[k++] = pos;
        size += length;
        pos += HEAD + (size_t)length;
        if (expected == UINT64_MAX)
            wrapped = 1;
        expected++;
    }
    w->taken = k;
    w->end = pos;
    w->size = size;
}

PyDoc_STRVAR(entry_run_doc,
"entry_run(fallback, buf, pos, expected) -> EntryRun\n\n"
"The run of a data object's entries buf holds from position pos, the first\n"
"expected to have entry id expected (data_read.DecodeRun): the payloads of those\n"
"whose ids run on and whose CRC32Cs match, their heads joined, where and why it\n"
"stopped (data_read.EntryRun).  What it does not cover (buf not bytes, pos not in\n"
"0..len(buf), expected not an int in 0..2**64-1) it hands to fallback, its\n"
"Python twin.  The heads and checksums are walked without the GIL for a buffer\n"
"of 64 KiB or more.");

static PyObject *entry_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("entry_run", nargs, 4))
        return NULL;
    PyObject *fallback = args[0], *buf = args[1];
    long long pos;
    unsigned long long expected;
    if (!PyBytes_CheckExact(buf) || !as_i64(args[2], &pos) || pos < 0 || pos > PyBytes_GET_SIZE(buf)
            || !as_u64(args[3], &expected))
        return PyObject_Vectorcall(fallback, args + 1, 3, NULL);
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(buf);
    size_t n = (size_t)PyBytes_GET_SIZE(buf);
    size_t *at = PyMem_RawMalloc(sizeof(size_t) * ((n - (size_t)pos) / HEAD + 1));
    if (at == NULL)
        return PyErr_NoMemory();
    Walk w;
    /* buf is bytes, which nothing changes, and the caller's argument holds it */
    if (n - (size_t)pos >= ARCHIVE_RELEASE_GIL) {
        Py_BEGIN_ALLOW_THREADS
        walk(b, n, (size_t)pos, expected, 0, at, &w);
        Py_END_ALLOW_THREADS
    } else {
        walk(b, n, (size_t)pos, expected, 0, at, &w);
    }
    PyObject *run = NULL;
    PyObject *payloads = PyList_New(w.taken);
    PyObject *heads = payloads == NULL ? NULL : PyBytes_FromStringAndSize(NULL, HEAD * w.taken);
    if (heads != NULL) {
        char *h = PyBytes_AS_STRING(heads);
        Py_ssize_t i = 0;
        for (; i < w.taken; i++) {
            size_t p = at[i];
            memcpy(h + HEAD * i, b + p, HEAD);
            PyObject *payload = PyBytes_FromStringAndSize((const char *)b + p + HEAD, (Py_ssize_t)get_be32(b + p + 8));
            if (payload == NULL)
                break;
            PyList_SET_ITEM(payloads, i, payload);
        }
        PyObject *size = NULL, *end = NULL, *next_id = NULL, *stop = NULL, *need = NULL, *found = NULL;
        if (i == w.taken) {
            PyObject *taken = PyLong_FromSsize_t(w.taken);
            next_id = taken == NULL ? NULL : PyNumber_Add(args[3], taken);
            Py_XDECREF(taken);
            size = PyLong_FromSize_t(w.size);
            end = PyLong_FromSize_t(w.end);
            stop = PyLong_FromLong(w.stop);
            need = PyLong_FromUnsignedLongLong(w.need);
            found = PyLong_FromUnsignedLongLong(w.found);
        }
        if (next_id != NULL && size != NULL && end != NULL && stop != NULL && need != NULL && found != NULL)
            run = PyStructSequence_New(EntryRunType);
        if (run != NULL) {
            PyStructSequence_SET_ITEM(run, 0, payloads);
            PyStructSequence_SET_ITEM(run, 1, heads);
            PyStructSequence_SET_ITEM(run, 2, size);
            PyStructSequence_SET_ITEM(run, 3, end);
            PyStructSequence_SET_ITEM(run, 4, next_id);
            PyStructSequence_SET_ITEM(run, 5, stop);
            PyStructSequence_SET_ITEM(run, 6, need);
            PyStructSequence_SET_ITEM(run, 7, found);
            payloads = heads = NULL; /* the run holds them now */
        } else {
            Py_XDECREF(size);
            Py_XDECREF(end);
            Py_XDECREF(next_id);
            Py_XDECREF(stop);
            Py_XDECREF(need);
            Py_XDECREF(found);
        }
    }
    Py_XDECREF(payloads); /* (a list cut short: its empty slots are NULL, which it frees as such) */
    Py_XDECREF(heads);
    PyMem_RawFree(at);
    return run;
}

/* ------------------------------------------------------------ writing: a batch's parts */

PyDoc_STRVAR(archive_parts_doc,
"archive_parts(fallback, batch, expected) -> (parts, payload_bytes)\n\n"
"What DataWriter.add_batch writes of batch, a list of (entry_id, payload):\n"
"for each entry in order from entry id expected, its head (entry id as u64,\n"
"the payload's length and CRC32C as u32, big-endian) and its payload, in one\n"
"list, and the bytes of those payloads.  It stops before the first entry\n"
"whose id is not the next one, as its Python twin does (the writer says\n"
"why).  Anything else it does not cover (batch not a list of 2-tuples of an\n"
"int and bytes, expected negative) it hands to fallback, its Python twin.\n"
"The checksums are made without the GIL for 64 KiB of payloads or more, so\n"
"that the client's thread is not kept waiting for them.");

typedef struct {
    PyObject *data;
    long long entry;
} PartSource;

static PyObject *archive_parts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!bk_nargs("archive_parts", nargs, 3))
        return NULL;
    PyObject *fallback = args[0];
    PyObject *batch = args[1];
    long long expected;
    if (!PyList_CheckExact(batch) || !as_i64(args[2], &expected) || expected < 0)
        return PyObject_Vectorcall(fallback, args + 1, 2, NULL);
    Py_ssize_t k = PyList_GET_SIZE(batch);
    PartSource *src = PyMem_Malloc(sizeof(PartSource) * (size_t)(k > 0 ? k : 1));
    if (src == NULL)
        return PyErr_NoMemory();
    /* under the GIL: each entry checked, its payload held while its checksum is made */
    Py_ssize_t taken = 0;
    size_t total = 0;
    int covered = 1;
    for (; taken < k; taken++) {
        PyObject *item = PyList_GET_ITEM(batch, taken);
        long long entry;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 || !as_i64(PyTuple_GET_ITEM(item, 0), &entry)
                || !PyBytes_CheckExact(PyTuple_GET_ITEM(item, 1))
                || (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 1)) > 0xFFFFFFFFu) {
            covered = 0;
            break;
        }
        /* (unsigned: past 2**63-1 the next id is one no i64 entry id has, as in Python) */
        if (entry < 0 || (unsigned long long)entry != (unsigned long long)expected + (unsigned long long)taken)
            break; /* out of order: the entries before it are what it gives */
        PyObject *data = PyTuple_GET_ITEM(item, 1);
        Py_INCREF(data);
        src[taken].data = data;
        src[taken].entry = entry;
        total += (size_t)PyBytes_GET_SIZE(data);
    }
    PyObject *result = NULL;
    unsigned char *heads = covered ? PyMem_Malloc(16 * (size_t)(taken > 0 ? taken : 1)) : NULL;
    if (covered && heads == NULL)
        PyErr_NoMemory();
    if (heads != NULL) {
        PyThreadState *saved = total >= ARCHIVE_RELEASE_GIL ? PyEval_SaveThread() : NULL;
        for (Py_ssize_t i = 0; i < taken; i++) {
            const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(src[i].data);
            size_t dn = (size_t)PyBytes_GET_SIZE(src[i].data);
            unsigned char *h = heads + 16 * i;
            put_be64(h, (uint64_t)src[i].entry);
            put_be32(h + 8, (uint32_t)dn);
            put_be32(h + 12, crc32c_two(data, dn, data + dn, 0));
        }
        if (saved != NULL)
            PyEval_RestoreThread(saved);
        PyObject *parts = PyList_New(2 * taken);
        PyObject *size = parts != NULL ? PyLong_FromSize_t(total) : NULL;
        Py_ssize_t i = 0;
        for (; size != NULL && i < taken; i++) {
            PyObject *head = PyBytes_FromStringAndSize((const char *)(heads + 16 * i), 16);
            if (head == NULL)
                break;
            PyList_SET_ITEM(parts, 2 * i, head);
            PyList_SET_ITEM(parts, 2 * i + 1, src[i].data); /* the reference held moves into the list */
            src[i].data = NULL;
        }
        if (size != NULL && i == taken)
            result = PyTuple_Pack(2, parts, size);
        Py_XDECREF(parts); /* (a list cut short: its empty slots are NULL, which it frees as such) */
        Py_XDECREF(size);
        PyMem_Free(heads);
    }
    for (Py_ssize_t i = 0; i < taken; i++)
        Py_XDECREF(src[i].data);
    PyMem_Free(src);
    if (!covered && !PyErr_Occurred()) /* not covered: the Python twin's */
        return PyObject_Vectorcall(fallback, args + 1, 2, NULL);
    return result;
}

/* ------------------------------------------------------------ the module */

static PyMethodDef methods[] = {
    {"archive_parts", (PyCFunction)(void (*)(void))archive_parts, METH_FASTCALL, archive_parts_doc},
    {"entry_run", (PyCFunction)(void (*)(void))entry_run, METH_FASTCALL, entry_run_doc},
    {"hardware_crc32c", hardware_crc32c, METH_O, hardware_crc32c_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_archive",
    "The C twins of a backup's data objects (see bkctl.wire.backup.archive and data_read).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__archive(void)
{
    bk_crc_init();
    if (EntryRunType == NULL)
        EntryRunType = PyStructSequence_NewType(&entry_run_desc);
    if (EntryRunType == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* what bkctl.wire.fastpath's ARCHIVE_API must be: a build older than the sources is not used */
    if (PyModule_AddObjectRef(m, "EntryRun", (PyObject *)EntryRunType) < 0 || PyModule_AddIntConstant(m, "API", 2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
