/* The C twin of decoding ledger metadata (format 3: the header, the length prefix and
 * LedgerMetadataFormat, wire/proto/formats.proto).  Its one Python owner is
 * bkctl.wire.metadata.ledger: metadata(fallback, build, value, znode_ctime) is its
 * LedgerMetadataTwins.parse once twins_of has bound fallback (parse_ledger_metadata, the
 * general path) and build (_from_checked).  It decodes a znode's value and checks it as
 * LedgerMetadata's own checks would (quorums, state, segments, ensembles), and gives
 * build(values, znode_ctime), the values in ledger.CheckedMetadata's layout; anything it
 * does not cover or finds wrong (another format, a malformed or unusual value: missing
 * required fields, an enum value the schema lacks, a string that is not UTF-8, groups, a
 * broken invariant, a value that is not bytes) it hands to fallback(value, znode_ctime),
 * which decodes and judges, so that both twins give the same object or the same error.
 * A walk over a million ledgers decodes each one here: upb's lazy field access, then the
 * dataclass's checks in Python, cost more than the rest of it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Reader;

static int read_varint(Reader *r, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end)
            return 0;
        uint8_t b = *r->p++;
        if (shift == 63 && b > 1)
            return 0;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

static int read_len(Reader *r, Reader *sub) {
    uint64_t n;
    if (!read_varint(r, &n) || n > (uint64_t)(r->end - r->p))
        return 0;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return 1;
}

/* skip a field of an unknown number; 0 for a group or a cut value */
static int skip(Reader *r, int wire_type) {
    uint64_t v;
    Reader sub;
    switch (wire_type) {
    case 0:
        return read_varint(r, &v);
    case 1:
        if (r->end - r->p < 8)
            return 0;
        r->p += 8;
        return 1;
    case 2:
        return read_len(r, &sub);
    case 5:
        if (r->end - r->p < 4)
            return 0;
        r->p += 4;
        return 1;
    default:
        return 0;
    }
}

static PyObject *utf8(Reader *s) {
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s->p, s->end - s->p, "strict");
    if (text == NULL)
        PyErr_Clear();
    return text;
}

/* one Segment: (firstEntryId, (member, ...)); NULL without an error set: not covered */
static PyObject *segment(Reader *r) {
    PyObject *members = PyList_New(0), *tuple = NULL, *result = NULL;
    int64_t first = 0;
    int have_first = 0;
    if (members == NULL)
        return NULL;
    while (r->p < r->end) {
        uint64_t key, v;
        if (!read_varint(r, &key))
            goto done;
        int field = (int)(key >> 3), wt = (int)(key & 7);
        if (field == 1 && wt == 2) {
            Reader s;
            if (!read_len(r, &s))
                goto done;
            PyObject *name = utf8(&s);
            if (name == NULL || PyList_Append(members, name) < 0) {
                Py_XDECREF(name);
                goto done;
            }
            Py_DECREF(name);
        } else if (field == 2 && wt == 0) {
            if (!read_varint(r, &v))
                goto done;
            first = (int64_t)v;
            have_first = 1;
        } else if ((field == 1 || field == 2) || !skip(r, wt)) {
            goto done;
        }
    }
    if (!have_first)
        goto done;
    tuple = PyList_AsTuple(members);
    if (tuple != NULL)
        result = Py_BuildValue("(LN)", (long long)first, tuple);
done:
    Py_DECREF(members);
    if (result == NULL)
        PyErr_Clear();
    return result;
}

/* one cMetadataMapEntry into *custom (a later key replaces an earlier one); 0: not covered */
static int custom_entry(Reader *r, PyObject *custom) {
    PyObject *key = NULL, *value = NULL;
    int ok = 0;
    while (r->p < r->end) {
        uint64_t k;
        if (!read_varint(r, &k))
            goto done;
        int field = (int)(k >> 3), wt = (int)(k & 7);
        Reader s;
        if (field == 1 && wt == 2) {
            if (!read_len(r, &s))
                goto done;
            Py_XDECREF(key);
            if ((key = utf8(&s)) == NULL)
                goto done;
        } else if (field == 2 && wt == 2) {
            if (!read_len(r, &s))
                goto done;
            Py_XDECREF(value);
            if ((value = PyBytes_FromStringAndSize((const char *)s.p, s.end - s.p)) == NULL)
                goto done;
        } else if ((field == 1 || field == 2) || !skip(r, wt)) {
            goto done;
        }
    }
    if (key == NULL && (key = PyUnicode_FromStringAndSize("", 0)) == NULL)
        goto done;
    if (value == NULL && (value = PyBytes_FromStringAndSize("", 0)) == NULL)
        goto done;
    ok = PyDict_SetItem(custom, key, value) == 0;
done:
    Py_XDECREF(key);
    Py_XDECREF(value);
    if (!ok)
        PyErr_Clear();
    return ok;
}

static const char HEADER[] = "BookieMetadataFormatVersion\t3\n";
#define HEADER_LEN (sizeof(HEADER) - 1)
#define STATE_CLOSED 3
#define MAX_CHECKED_ENSEMBLE 64

/* LedgerMetadata's checks of one segment's ensemble: ensemble_size non-empty, distinct
 * bookie ids (the strings are the decoder's own, so compared by value) */
static int ensemble_ok(PyObject *members, Py_ssize_t ensemble_size) {
    Py_ssize_t n = PyTuple_GET_SIZE(members);
    if (n != ensemble_size)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(members, i);
        if (PyUnicode_GET_LENGTH(a) == 0)
            return 0;
        for (Py_ssize_t j = 0; j < i; j++) {
            int cmp = PyUnicode_Compare(a, PyTuple_GET_ITEM(members, j));
            if (cmp == -1 && PyErr_Occurred())
                return 0;
            if (cmp == 0)
                return 0;
        }
    }
    return 1;
}

/* The values of a covered format-3 value (CheckedMetadata's layout), or NULL: not covered
 * (no error set), or out of memory (MemoryError set). */
static PyObject *checked(PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear(); /* not bytes: the general path says what it is */
        return NULL;
    }
    const uint8_t *start = (const uint8_t *)view.buf;
    Reader r = {start, start + view.len};
    int64_t quorum = 0, ensemble = 0, length = 0, last = 0, state = 0, digest = 1, ack = 0, ctime = 0, ctoken = 0;
    int have_quorum = 0, have_ensemble = 0, have_length = 0, have_state = 0, have_ack = 0, have_ctime = 0;
    PyObject *segments = PyList_New(0), *custom = PyDict_New(), *password = NULL, *result = NULL;
    uint64_t size;
    if (segments == NULL || custom == NULL)
        goto done;
    /* the header and the length prefix: exactly format 3's, the length all that follows */
    if (view.len < (Py_ssize_t)HEADER_LEN || memcmp(start, HEADER, HEADER_LEN) != 0)
        goto done;
    r.p += HEADER_LEN;
    if (!read_varint(&r, &size) || size != (uint64_t)(r.end - r.p))
        goto done;
    while (r.p < r.end) {
        uint64_t key, v;
        Reader s;
        if (!read_varint(&r, &key))
            goto done;
        int field = (int)(key >> 3), wt = (int)(key & 7);
        int varint_field = field == 1 || field == 2 || field == 3 || field == 4 || field == 5 || field == 7 ||
                           field == 9 || field == 10 || field == 12;
        int len_field = field == 6 || field == 8 || field == 11;
        if (varint_field) {
            if (wt != 0 || !read_varint(&r, &v))
                goto done;
            switch (field) {
            case 1: quorum = (int32_t)(uint32_t)v; have_quorum = 1; break;
            case 2: ensemble = (int32_t)(uint32_t)v; have_ensemble = 1; break;
            case 3: length = (int64_t)v; have_length = 1; break;
            case 4: last = (int64_t)v; break;
            case 5:
                if (v < 1 || v > 3)
                    goto done; /* an enum value the schema lacks: the general path judges */
                state = (int64_t)v;
                have_state = 1;
                break;
            case 7:
                if (v < 1 || v > 4)
                    goto done;
                digest = (int64_t)v;
                break;
            case 9: ack = (int32_t)(uint32_t)v; have_ack = 1; break;
            case 10: ctime = (int64_t)v; have_ctime = 1; break;
            case 12: ctoken = (int64_t)v; break;
            }
        } else if (len_field) {
            if (wt != 2 || !read_len(&r, &s))
                goto done;
            if (field == 6) {
                PyObject *seg = segment(&s);
                if (seg == NULL || PyList_Append(segments, seg) < 0) {
                    Py_XDECREF(seg);
                    goto done;
                }
                Py_DECREF(seg);
            } else if (field == 8) {
                Py_XDECREF(password);
                if ((password = PyBytes_FromStringAndSize((const char *)s.p, s.end - s.p)) == NULL)
                    goto done;
            } else if (!custom_entry(&s, custom)) {
                goto done;
            }
        } else if (!skip(&r, wt)) {
            goto done;
        }
    }
    if (!(have_quorum && have_ensemble && have_length && have_state))
        goto done;
    /* LedgerMetadata's checks, as the general path makes them of what _from_fields gives */
    if (!have_ack)
        ack = quorum;
    if (!(ensemble >= quorum && quorum >= ack && ack >= 1) || ensemble > MAX_CHECKED_ENSEMBLE)
        goto done;
    if (state == STATE_CLOSED) {
        if (last < -1 || length < 0)
            goto done;
    } else { /* like Java, lastEntryId and length only count for a closed ledger */
        last = -1;
        length = 0;
    }
    Py_ssize_t nsegs = PyList_GET_SIZE(segments);
    if (nsegs == 0)
        goto done;
    for (Py_ssize_t i = 0; i < nsegs; i++) {
        PyObject *seg = PyList_GET_ITEM(segments, i);
        long long first = PyLong_AsLongLong(PyTuple_GET_ITEM(seg, 0));
        if (first < 0 || (i == 0 && first != 0))
            goto done;
        if (i > 0 && first <= PyLong_AsLongLong(PyTuple_GET_ITEM(PyList_GET_ITEM(segments, i - 1), 0)))
            goto done;
        if (!ensemble_ok(PyTuple_GET_ITEM(seg, 1), (Py_ssize_t)ensemble))
            goto done;
    }
    {
        PyObject *segs = PyList_AsTuple(segments);
        if (segs == NULL)
            goto done;
        PyObject *ctime_obj = have_ctime ? PyLong_FromLongLong(ctime) : Py_NewRef(Py_None);
        PyObject *pw = password != NULL ? Py_NewRef(password) : Py_NewRef(Py_None);
        if (ctime_obj == NULL) {
            Py_DECREF(segs);
            Py_DECREF(pw);
            goto done;
        }
        /* digestType is read only when a password is present */
        result = Py_BuildValue("(LLLLLLNLNNOL)", (long long)ensemble, (long long)quorum, (long long)ack,
                               (long long)state, (long long)last, (long long)length, segs,
                               (long long)(password != NULL ? digest : 0), pw, ctime_obj, custom, (long long)ctoken);
    }
done:
    PyBuffer_Release(&view);
    Py_XDECREF(segments);
    Py_XDECREF(custom);
    Py_XDECREF(password);
    if (result == NULL && PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_MemoryError))
        PyErr_Clear();
    return result;
}

static PyObject *metadata(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "metadata takes 4 arguments");
    /* args: fallback, build, value, znode_ctime */
    PyObject *values = checked(args[2]);
    if (values == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return PyObject_Vectorcall(args[0], args + 2, 2, NULL); /* the general path's */
    }
    PyObject *build_args[2] = {values, args[3]};
    PyObject *md = PyObject_Vectorcall(args[1], build_args, 2, NULL);
    Py_DECREF(values);
    return md;
}

static PyMethodDef methods[] = {
    {"metadata", (PyCFunction)(void (*)(void))metadata, METH_FASTCALL,
     "metadata(fallback, build, value, znode_ctime) -> build(values, znode_ctime) of a format-3 "
     "znode value's LedgerMetadata values, decoded and checked (ledger.CheckedMetadata's layout), "
     "or fallback(value, znode_ctime) where the general path decodes and judges"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ledgerpb", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ledgerpb(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", 3) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
