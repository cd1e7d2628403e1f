/*
 * bkctl.wire.pulsar._avrocols: the C twin of a typed topic export's AVRO values.
 *
 * The general path reads each message's Avro binary with fastavro into
 * Python dicts (about 4.5 us a record) and pyarrow then turns those dicts
 * into the ``value`` column (as much again).  Here one pass over a batch's
 * payloads decodes Avro binary straight into Arrow-layout column buffers
 * (uint8_t validity bitmaps, int32 offsets, little-endian values), which the
 * export wraps without copying again.
 *
 * What to read is a *plan* made in Python (bkctl.wire.pulsar.avro_plan): for
 * each schema version met in the topic, how its writer's bytes land in the
 * reader's columns -- fields the reader lacks skipped, fields the writer lacks
 * filled with their defaults, promotions, enum symbols mapped, unions with
 * null.  The plan is only made for what this decoder reads exactly as
 * fastavro and pyarrow would; anything else (and any batch in which a payload
 * does not decode: truncated, a bad union or enum index, text that is not
 * UTF-8, a number that does not fit its column, a decimal beyond its
 * precision) is left to the general path, which says what is wrong:
 * Decoder.decode returns the failing row instead of columns.
 *
 * Plan tuples (kind, col, arg); col -1: skip the writer's bytes.
 *   NUL: append null.  FAIL: no reading (fastavro raises).  BOOL INT LONG
 *   FLOAT DOUBLE: the writer's primitive, stored as the column's kind (the
 *   promotions).  BYTES STRING: length-prefixed (STRING checks UTF-8 when
 *   the column is text, arg 1).  FIXED: arg its size.  ENUM: arg a tuple of
 *   the reader's symbol (bytes) by writer index, None: fail.  DEC_BYTES:
 *   arg precision; DEC_FIXED: arg (size, precision).  RECORD: arg (field
 *   plans in writer order, ((col, default), ...) for the reader's fields the
 *   writer lacks).  ARRAY: arg the item plan.  MAP: arg (key column, value
 *   plan).  UNION: arg the branch plans by writer index.
 * Columns: ((kind, (child column, ...)), ...), column 0 the value.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_avrocols.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "_avrocols writes Arrow's little-endian buffers with native stores: not built on a big-endian machine"
#endif

/* the API version the Python side checks (bkctl.wire.fastpath) */
#define API 1

/* ------------------------------------------------------------ buffers */

static int buf_reserve(Buf *b, Py_ssize_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = PyMem_Realloc(b->data, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

static inline int put(Buf *b, const void *src, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static int set_bit(Buf *b, Py_ssize_t i, int on)
{
    if ((i & 7) == 0) {
        char z = 0;
        if (put(b, &z, 1) < 0)
            return -1;
    }
    if (on)
        b->data[i >> 3] |= (char)(1 << (i & 7));
    return 0;
}

/* ------------------------------------------------------------ appending */

static int col_offset(Col *c, Py_ssize_t value)
{
    if (value > INT32_MAX)
        return 1; /* too big for int32 offsets: the general path */
    int32_t v = (int32_t)value;
    return put(&c->offs, &v, 4);
}

static int append_null(Decoder *d, Col *c);

/* A slot's validity: the bitmap is only written from a column's first null on
 * (then every slot before it is set valid at once); most columns have none. */
static inline int slot_valid(Col *c, int on)
{
    if (on && c->nulls == 0) {
        c->len++;
        return 0;
    }
    if (!on && c->nulls == 0) {
        Py_ssize_t full = (c->len + 7) / 8;
        if (buf_reserve(&c->valid, full + 1) < 0)
            return -1;
        memset(c->valid.data, 0xff, full);
        if (c->len % 8)
            c->valid.data[full - 1] = (char)((1 << (c->len % 8)) - 1);
        c->valid.len = full;
    }
    if ((c->nulls || !on) && set_bit(&c->valid, c->len, on) < 0)
        return -1;
    c->len++;
    if (!on)
        c->nulls++;
    return 0;
}

static int append_null(Decoder *d, Col *c)
{
    static const char zero[16] = {0};
    int rc;
    switch (c->kind) {
    case C_BOOL:
        if (set_bit(&c->data, c->bits++, 0) < 0)
            return -1;
        break;
    case C_I32: case C_F32:
        if (put(&c->data, zero, 4) < 0) return -1;
        break;
    case C_I64: case C_F64:
        if (put(&c->data, zero, 8) < 0) return -1;
        break;
    case C_DEC:
        if (put(&c->data, zero, 16) < 0) return -1;
        break;
    case C_BIN:
        if ((rc = col_offset(c, c->data.len)) != 0) return rc;
        break;
    case C_LIST: case C_MAP: {
        Col *item = &d->cols[c->child[0]];
        if ((rc = col_offset(c, item->len)) != 0) return rc;
        break;
    }
    case C_STRUCT:
        for (int i = 0; i < c->nchild; i++)
            if ((rc = append_null(d, &d->cols[c->child[i]])) != 0)
                return rc;
        break;
    }
    return slot_valid(c, 0);
}

/* ------------------------------------------------------------ reading Avro binary */

typedef struct {
    const uint8_t *p, *end;
} In;

/* 1: truncated or too long (the general path says why) */
static inline int read_long(In *in, int64_t *out)
{
    uint64_t v = 0;
    int shift = 0;
    while (in->p < in->end) {
        uint8_t b = *in->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 0;
        }
        shift += 7;
        if (shift > 63)
            return 1;
    }
    return 1;
}

static int utf8_ok(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            uint64_t w;
            while (i + 8 <= n && (memcpy(&w, s + i, 8), (w & 0x8080808080808080ULL) == 0))
                i += 8;
            if (i < n && s[i] < 0x80)
                i++;
            continue;
        }
        int len;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
        else return 0;
        if (i + len > n)
            return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

static inline int put_number(Col *c, double dv, int64_t iv, int is_int)
{
    switch (c->kind) {
    case C_I32: {
        if (!is_int || iv < INT32_MIN || iv > INT32_MAX) return 1;
        int32_t v = (int32_t)iv;
        return put(&c->data, &v, 4);
    }
    case C_I64:
        if (!is_int) return 1;
        return put(&c->data, &iv, 8);
    case C_F32: {
        /* as Python's float() then Arrow's cast to float32 */
        float v = (float)(is_int ? (double)iv : dv);
        return put(&c->data, &v, 4);
    }
    case C_F64: {
        double v = is_int ? (double)iv : dv;
        return put(&c->data, &v, 8);
    }
    }
    return 1;
}

static inline int put_bin(Col *c, const void *src, Py_ssize_t n)
{
    if (put(&c->data, src, n) < 0)
        return -1;
    return col_offset(c, c->data.len);
}

#ifdef __SIZEOF_INT128__
static int put_decimal(Col *c, const uint8_t *s, Py_ssize_t n, int precision)
{
    if (n > 16)
        return 1;
    __int128 v = 0;
    if (n > 0) {
        v = (s[0] & 0x80) ? -1 : 0;
        for (Py_ssize_t i = 0; i < n; i++)
            v = (__int128)(((unsigned __int128)v << 8) | s[i]);
    }
    unsigned __int128 mag = v < 0 ? (unsigned __int128)(-(v + 1)) + 1 : (unsigned __int128)v;
    unsigned __int128 limit = 1;
    for (int i = 0; i < precision; i++)
        limit *= 10;
    if (mag >= limit)
        return 1;
    return put(&c->data, &v, 16);
}
#else
static int put_decimal(Col *c, const uint8_t *s, Py_ssize_t n, int precision) { return 1; }
#endif

/* 0: read (and appended unless skipping); 1: the general path must read it; -1: a Python error */
static int read_op(Decoder *d, Op *op, In *in)
{
    Col *c = op->col >= 0 ? &d->cols[op->col] : NULL;
    int64_t n;
    int rc;
    switch (op->kind) {
    case OP_NUL:
        return c ? append_null(d, c) : 0;
    case OP_FAIL:
        return 1;
    case OP_BOOL: {
        if (in->p >= in->end)
            return 1;
        uint8_t b = *in->p++;
        if (!c)
            return 0;
        if (set_bit(&c->data, c->bits++, b != 0) < 0)
            return -1;
        return slot_valid(c, 1);
    }
    case OP_INT: case OP_LONG:
        if (read_long(in, &n))
            return 1;
        if (op->kind == OP_INT && (n < INT32_MIN || n > INT32_MAX))
            return 1;
        if (!c)
            return 0;
        if ((rc = put_number(c, 0, n, 1)) != 0)
            return rc;
        return slot_valid(c, 1);
    case OP_FLOAT: case OP_DOUBLE: {
        Py_ssize_t size = op->kind == OP_FLOAT ? 4 : 8;
        if (in->end - in->p < size)
            return 1;
        double v;
        if (size == 4) {
            float f;
            memcpy(&f, in->p, 4);
            v = (double)f;
        } else
            memcpy(&v, in->p, 8);
        in->p += size;
        if (!c)
            return 0;
        if ((rc = put_number(c, v, 0, 0)) != 0)
            return rc;
        return slot_valid(c, 1);
    }
    case OP_BYTES: case OP_STRING: case OP_DEC_BYTES: case OP_FIXED: case OP_DEC_FIXED: {
        const uint8_t *s;
        if (op->kind == OP_FIXED || op->kind == OP_DEC_FIXED)
            n = op->size;
        else if (read_long(in, &n) || n < 0)
            return 1;
        if (in->end - in->p < n)
            return 1;
        s = in->p;
        in->p += n;
        /* fastavro decodes every string, read or skipped */
        if (op->kind == OP_STRING && op->utf8 && !utf8_ok(s, (Py_ssize_t)n))
            return 1;
        if (!c)
            return 0;
        if (op->kind == OP_DEC_BYTES || op->kind == OP_DEC_FIXED)
            rc = put_decimal(c, s, (Py_ssize_t)n, op->precision);
        else
            rc = put_bin(c, s, (Py_ssize_t)n);
        if (rc != 0)
            return rc;
        return slot_valid(c, 1);
    }
    case OP_ENUM:
        if (read_long(in, &n) || n < 0 || n >= op->n)
            return 1;
        if (!c)
            return 0;
        if (op->sym[n] == NULL)
            return 1;
        if ((rc = put_bin(c, op->sym[n], op->symlen[n])) != 0)
            return rc;
        return slot_valid(c, 1);
    case OP_RECORD:
        for (int i = 0; i < op->n; i++)
            if ((rc = read_op(d, &op->sub[i], in)) != 0)
                return rc;
        if (!c)
            return 0;
        for (int i = 0; i < op->ndef; i++) {
            Col *f = &d->cols[op->def_col[i]];
            PyObject *v = op->def_val[i];
            if (v == Py_None)
                rc = append_null(d, f);
            else if (f->kind == C_BOOL) {
                if (set_bit(&f->data, f->bits++, v == Py_True) < 0 || slot_valid(f, 1) < 0)
                    return -1;
                continue;
            } else if (f->kind == C_I32 || f->kind == C_I64) {
                rc = put_number(f, 0, PyLong_AsLongLong(v), 1);
            } else if (f->kind == C_F32 || f->kind == C_F64) {
                rc = put_number(f, PyFloat_AS_DOUBLE(v), 0, 0);
            } else if (f->kind == C_BIN) {
                rc = put_bin(f, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
            } else if (f->kind == C_LIST || f->kind == C_MAP) { /* an empty array or map */
                rc = col_offset(f, d->cols[f->child[0]].len);
            } else
                rc = 1;
            if (rc != 0)
                return rc;
            if (v != Py_None && (rc = slot_valid(f, 1)) != 0)
                return rc;
        }
        return slot_valid(c, 1);
    case OP_ARRAY: case OP_MAP: {
        Col *item = c ? &d->cols[c->child[0]] : NULL;
        for (;;) {
            int64_t count;
            if (read_long(in, &count))
                return 1;
            if (count == 0)
                break;
            if (count < 0) {
                int64_t size;
                if (count == INT64_MIN || read_long(in, &size))
                    return 1;
                count = -count;
            }
            /* each item takes a byte at least, but for a zero-width one (null, an empty record,
             * fixed(0)): more items than bytes left is the general path's to judge */
            if (count > in->end - in->p)
                return 1;
            for (int64_t i = 0; i < count; i++) {
                if (op->kind == OP_MAP) {
                    int64_t klen;
                    if (read_long(in, &klen) || klen < 0 || in->end - in->p < klen)
                        return 1;
                    const uint8_t *k = in->p;
                    in->p += klen;
                    if (!utf8_ok(k, (Py_ssize_t)klen))
                        return 1;
                    if (c) {
                        Col *kc = &d->cols[op->key_col];
                        if ((rc = put_bin(kc, k, (Py_ssize_t)klen)) != 0 || (rc = slot_valid(kc, 1)) != 0)
                            return rc;
                    }
                }
                if ((rc = read_op(d, &op->sub[0], in)) != 0)
                    return rc;
            }
        }
        if (!c)
            return 0;
        if ((rc = col_offset(c, item->len)) != 0)
            return rc;
        return slot_valid(c, 1);
    }
    case OP_UNION:
        if (read_long(in, &n) || n < 0 || n >= op->n)
            return 1;
        return read_op(d, &op->sub[n], in);
    }
    return 1;
}

/* ------------------------------------------------------------ the Decoder type */

static void cols_reset(Decoder *d)
{
    for (int i = 0; i < d->ncols; i++) {
        Col *c = &d->cols[i];
        c->len = c->nulls = c->bits = 0;
        c->valid.len = c->data.len = c->offs.len = 0;
        if (c->kind == C_BIN || c->kind == C_LIST || c->kind == C_MAP) {
            int32_t z = 0;
            put(&c->offs, &z, 4);
        }
    }
}

static void Decoder_dealloc(Decoder *d)
{
    if (d->slots) {
        for (int i = 0; i < d->nslots; i++)
            if (d->slots[i]) {
                op_free(d->slots[i]);
                PyMem_Free(d->slots[i]);
            }
        PyMem_Free(d->slots);
    }
    if (d->cols) {
        for (int i = 0; i < d->ncols; i++) {
            PyMem_Free(d->cols[i].valid.data);
            PyMem_Free(d->cols[i].data.data);
            PyMem_Free(d->cols[i].offs.data);
            PyMem_Free(d->cols[i].child);
        }
        PyMem_Free(d->cols);
    }
    Py_XDECREF(d->plans);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static int Decoder_init(Decoder *d, PyObject *args, PyObject *kwds)
{
    PyObject *cols, *plans;
    static char *kwlist[] = {"columns", "plans", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!", kwlist, &PyTuple_Type, &cols, &PyTuple_Type, &plans))
        return -1;
    if (d->cols != NULL)
        return bad_plan("a Decoder is made once");
    d->ncols = (int)PyTuple_GET_SIZE(cols);
    if (d->ncols < 1)
        return bad_plan("no columns");
    d->cols = PyMem_Calloc(d->ncols, sizeof(Col));
    if (!d->cols)
        return PyErr_NoMemory(), -1;
    for (int i = 0; i < d->ncols; i++) {
        PyObject *children;
        Col *c = &d->cols[i];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(cols, i), "iO!", &c->kind, &PyTuple_Type, &children))
            return -1;
        if (c->kind < 0 || c->kind >= C_COUNT)
            return bad_plan("column kind");
        c->nchild = (int)PyTuple_GET_SIZE(children);
        if ((c->kind == C_LIST && c->nchild != 1) || (c->kind == C_MAP && c->nchild != 2) ||
            (c->kind != C_STRUCT && c->kind != C_LIST && c->kind != C_MAP && c->nchild != 0))
            return bad_plan("column children");
        c->child = PyMem_Calloc(c->nchild + 1, sizeof(int));
        if (!c->child)
            return PyErr_NoMemory(), -1;
        for (int k = 0; k < c->nchild; k++) {
            c->child[k] = (int)PyLong_AsLong(PyTuple_GET_ITEM(children, k));
            if (c->child[k] <= i || c->child[k] >= d->ncols)
                return PyErr_Occurred() ? -1 : bad_plan("a child column comes after its parent");
        }
    }
    d->plans = Py_NewRef(plans);
    d->nslots = (int)PyTuple_GET_SIZE(plans);
    d->slots = PyMem_Calloc(d->nslots + 1, sizeof(Op *));
    if (!d->slots)
        return PyErr_NoMemory(), -1;
    for (int i = 0; i < d->nslots; i++) {
        PyObject *p = PyTuple_GET_ITEM(plans, i);
        if (p == Py_None)
            continue;
        d->slots[i] = PyMem_Calloc(1, sizeof(Op));
        if (!d->slots[i])
            return PyErr_NoMemory(), -1;
        if (op_build(d, d->slots[i], p) < 0)
            return -1;
        if (d->slots[i]->col != 0)
            return bad_plan("a version's plan writes column 0");
    }
    cols_reset(d);
    return 0;
}

static PyObject *bytes_of(Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", b->len); }

/* (length, null_count, validity | None, (buffers...)) by column */
static PyObject *columns_out(Decoder *d)
{
    PyObject *out = PyTuple_New(d->ncols);
    if (!out)
        return NULL;
    for (int i = 0; i < d->ncols; i++) {
        Col *c = &d->cols[i];
        PyObject *valid = c->nulls ? bytes_of(&c->valid) : Py_NewRef(Py_None), *bufs;
        if (c->kind == C_STRUCT)
            bufs = PyTuple_New(0);
        else if (c->kind == C_BIN)
            bufs = Py_BuildValue("(NN)", bytes_of(&c->offs), bytes_of(&c->data));
        else if (c->kind == C_LIST || c->kind == C_MAP)
            bufs = Py_BuildValue("(N)", bytes_of(&c->offs));
        else
            bufs = Py_BuildValue("(N)", bytes_of(&c->data));
        PyObject *item = valid && bufs ? Py_BuildValue("(nnNN)", c->len, c->nulls, valid, bufs) : NULL;
        if (!item) {
            Py_XDECREF(valid);
            Py_XDECREF(bufs);
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, item);
    }
    return out;
}

PyDoc_STRVAR(decode_doc,
"decode(slots, offsets, data, first) -> columns | int\n\n"
"The values of a batch's rows: ``slots`` one byte a row, the index of the plan\n"
"its payload is read by (255: no value, null); ``offsets`` and ``data`` the\n"
"payload column's int32 offsets and bytes (an Arrow binary array's buffers),\n"
"``first`` its offset into them.  Returns each column's (length, null_count,\n"
"validity | None, buffers), or the first row the general path must read (a\n"
"payload that does not decode here), the columns then discarded.");

static PyObject *Decoder_decode(Decoder *d, PyObject *args)
{
    Py_buffer slots, offs, data;
    Py_ssize_t first;
    if (d->cols == NULL)
        return PyErr_Format(PyExc_ValueError, "the Decoder is not initialised");
    if (!PyArg_ParseTuple(args, "y*y*y*n", &slots, &offs, &data, &first))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t rows = slots.len;
    const uint8_t *slot = slots.buf;
    const int32_t *off = offs.buf;
    if (first < 0 || (first + rows + 1) * 4 > offs.len) {
        PyErr_SetString(PyExc_ValueError, "offsets shorter than the rows");
        goto done;
    }
    cols_reset(d);
    Col *top = &d->cols[0];
    for (Py_ssize_t r = 0; r < rows; r++) {
        int rc;
        if (slot[r] == 255) {
            rc = append_null(d, top);
        } else {
            int32_t a = off[first + r], b = off[first + r + 1];
            if (slot[r] >= d->nslots || d->slots[slot[r]] == NULL || a < 0 || b < a || b > data.len)
                rc = 1;
            else {
                In in = {(const uint8_t *)data.buf + a, (const uint8_t *)data.buf + b};
                rc = read_op(d, d->slots[slot[r]], &in);
            }
        }
        if (rc < 0)
            goto done;
        if (rc > 0) {
            result = PyLong_FromSsize_t(r);
            goto done;
        }
    }
    result = columns_out(d);
done:
    cols_reset(d);
    PyBuffer_Release(&slots);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef Decoder_methods[] = {
    {"decode", (PyCFunction)Decoder_decode, METH_VARARGS, decode_doc},
    {NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bkctl.wire.pulsar._avrocols.Decoder",
    .tp_doc = PyDoc_STR("Avro binary payloads into Arrow-layout column buffers (Decoder(columns, plans))."),
    .tp_basicsize = sizeof(Decoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Decoder_init,
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_methods = Decoder_methods,
};

static struct PyModuleDef avrocols_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bkctl.wire.pulsar._avrocols",
    .m_doc = "The C twin of the typed export's AVRO values: Avro binary straight into Arrow-layout buffers.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__avrocols(void)
{
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "bkctl.wire.pulsar._avrocols needs a little-endian machine");
        return NULL;
    }
    if (PyType_Ready(&DecoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&avrocols_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Decoder", (PyObject *)&DecoderType) < 0 || PyModule_AddIntConstant(m, "API", API) < 0
#ifdef __SIZEOF_INT128__
        || PyModule_AddIntConstant(m, "DECIMALS", 1) < 0
#else
        || PyModule_AddIntConstant(m, "DECIMALS", 0) < 0
#endif
    ) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
