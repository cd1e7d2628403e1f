/*
 * bkctl.wire.pulsar._packed's column buffers, laid out as Arrow's: growable byte buffers, a
 * column's values (or offsets), data and validity bitmap, and their hand-over to Python as
 * bytes.  What every row appender of _packed.c writes into, apart from the rules of the rows
 * themselves.  The appends called once a value are inline here; the rest is _packed_arrow.c's.
 */
#ifndef BKCTL_PACKED_ARROW_H
#define BKCTL_PACKED_ARROW_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

/* Room for ``extra`` more bytes (0, or -1 with MemoryError set): the growth is _packed_arrow.c's. */
int buf_grow(Buf *b, Py_ssize_t want);

static inline int buf_reserve(Buf *b, Py_ssize_t extra)
{
    Py_ssize_t want = b->len + extra;
    return want <= b->cap ? 0 : buf_grow(b, want);
}

void buf_free(Buf *b);

/* Appends that the caller has reserved room for. */
static inline void put(Buf *b, const void *src, Py_ssize_t n)
{
    if (n)
        memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
}

static inline void put_i32(Buf *b, int32_t v) { put(b, &v, 4); }
static inline void put_i64(Buf *b, int64_t v) { put(b, &v, 8); }

/* One column in Arrow's layout: ``values`` holds the values of a fixed-width
 * column (a bitmap for BOOL), or the int32 offsets (rows + 1) of a variable-width or map column;
 * ``data`` the bytes of a variable-width one; ``valid`` the validity bitmap
 * (bit set = value present), handed over as None when no row is null. */
typedef struct {
    Buf values;
    Buf data;
    Buf valid;
    Py_ssize_t nulls;
} Column;

/* Room in a bitmap for ``rows`` rows, the new bytes zeroed. */
int reserve_bits(Buf *b, Py_ssize_t rows);

static inline int reserve_validity(Column *c, Py_ssize_t rows) { return reserve_bits(&c->valid, rows); }

/* Bits past ``rows`` cleared (a bitmap rewound), so that setting bits with "or" starts from zero again. */
void clear_bits_after(Buf *b, Py_ssize_t rows);

static inline void mark_valid(Column *c, Py_ssize_t row, int present)
{
    if (present)
        ((uint8_t *)c->valid.data)[row / 8] |= (uint8_t)(1u << (row % 8));
    else
        c->nulls++;
}

/* A value of a variable-width column, room not reserved (the map's keys and values). */
static inline int column_add_var(Column *c, Py_ssize_t row, const void *p, Py_ssize_t n)
{
    if (buf_reserve(&c->data, n) < 0 || buf_reserve(&c->values, 4) < 0 || reserve_validity(c, row + 1) < 0)
        return -1;
    if (c->data.len + n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "more than 2 GiB in one column of a set of rows");
        return -1;
    }
    put(&c->data, p, n);
    put_i32(&c->values, (int32_t)c->data.len);
    mark_valid(c, row, 1);
    return 0;
}

void column_free(Column *c);

/* A buffer's bytes (a new reference, or NULL). */
PyObject *bytes_of(Buf *b);

/* ``(validity | None, null_count, values[, data])`` of a stored column (a new reference, or NULL). */
PyObject *buffers_of(Column *c, int with_data);

#endif
