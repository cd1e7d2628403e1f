/*
 * bkctl.wire.pulsar._packed's column buffers (_packed_arrow.h says what they are): their growth,
 * bitmaps, release, and their hand-over to Python as bytes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_packed_arrow.h"

int buf_grow(Buf *b, Py_ssize_t want)
{
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < want)
        cap *= 2;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

void buf_free(Buf *b)
{
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int reserve_bits(Buf *b, Py_ssize_t rows)
{
    Py_ssize_t need = (rows + 7) / 8;
    if (need > b->len) {
        Py_ssize_t grow = need - b->len;
        if (buf_reserve(b, grow) < 0)
            return -1;
        memset(b->data + b->len, 0, (size_t)grow);
        b->len = need;
    }
    return 0;
}

void clear_bits_after(Buf *b, Py_ssize_t rows)
{
    if (rows % 8 && rows / 8 < b->len)
        ((uint8_t *)b->data)[rows / 8] &= (uint8_t)((1u << (rows % 8)) - 1);
}

void column_free(Column *c)
{
    buf_free(&c->values);
    buf_free(&c->data);
    buf_free(&c->valid);
    c->nulls = 0;
}

PyObject *bytes_of(Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", b->len); }

PyObject *buffers_of(Column *c, int with_data)
{
    PyObject *validity = c->nulls ? bytes_of(&c->valid) : Py_NewRef(Py_None);
    if (with_data)
        return Py_BuildValue("(NnNN)", validity, c->nulls, bytes_of(&c->values), bytes_of(&c->data));
    return Py_BuildValue("(NnN)", validity, c->nulls, bytes_of(&c->values));
}
