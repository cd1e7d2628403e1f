/* The C twin of the protobuf decoding of ledger metadata (format 3's LedgerMetadataFormat,
 * wire/proto/formats.proto): fields(body) gives the tuple that
 * bkctl.wire.metadata.ledger._proto_fields gives from the decoded message -- the layout
 * of ledger.ProtoFields -- or None for anything it does not cover (a malformed or
 * unusual value: missing required fields, an enum value the schema lacks, a string that
 * is not UTF-8, groups), which the Python path then decodes and judges, so that both
 * paths raise the same errors.  A walk over a million ledgers decodes each one here:
 * upb's lazy field access cost more than the rest of the decoding.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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

static PyObject *fields(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Reader r = {(const uint8_t *)view.buf, (const uint8_t *)view.buf + view.len};
    int64_t quorum = 0, ensemble = 0, length = 0, last = 0, state = 0, digest = 1, ack = 0, ctime = 0, ctoken = 0;
    int have_quorum = 0, have_ensemble = 0, have_length = 0, have_state = 0, have_ack = 0, have_ctime = 0;
    PyObject *segments = PyList_New(0), *custom = PyDict_New(), *password = NULL, *result = NULL;
    if (segments == NULL || custom == NULL)
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
                    goto done; /* an enum value the schema lacks: the Python path judges */
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
    {
        PyObject *segs = PyList_AsTuple(segments);
        if (segs == NULL)
            goto done;
        PyObject *ack_obj = have_ack ? PyLong_FromLongLong(ack) : Py_NewRef(Py_None);
        PyObject *ctime_obj = have_ctime ? PyLong_FromLongLong(ctime) : Py_NewRef(Py_None);
        PyObject *pw = password != NULL ? Py_NewRef(password) : Py_NewRef(Py_None);
        if (ack_obj == NULL || ctime_obj == NULL) {
            Py_DECREF(segs);
            Py_XDECREF(ack_obj);
            Py_XDECREF(ctime_obj);
            Py_DECREF(pw);
            goto done;
        }
        result = Py_BuildValue("(LLNLLLNLNNOL)", (long long)ensemble, (long long)quorum, ack_obj, (long long)state,
                               (long long)last, (long long)length, segs, (long long)digest, pw, ctime_obj, custom,
                               (long long)ctoken);
    }
done:
    PyBuffer_Release(&view);
    Py_XDECREF(segments);
    Py_XDECREF(custom);
    Py_XDECREF(password);
    if (result == NULL) {
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_MemoryError))
            PyErr_Clear();
        if (!PyErr_Occurred())
            Py_RETURN_NONE;
    }
    return result;
}

static PyMethodDef methods[] = {
    {"fields", fields, METH_O,
     "fields(body) -> the ProtoFields tuple of a LedgerMetadataFormat, or None where the Python path decodes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ledgerpb", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ledgerpb(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "API", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
