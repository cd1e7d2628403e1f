/*
 * What the C twins of the codecs share (_plain.c: the bookie's request
 * parsers and ADD answer; _fastcodec.c: the client's per-entry codecs): the
 * argument count check of their fast-call functions, the protobuf
 * base-128 varint, big-endian fields, and Python ints taken as C ones.  Each caller decides what a varint past 64 bits means to
 * it: the reader only says that it was one.
 */
#ifndef BKCTL_TWINS_H
#define BKCTL_TWINS_H

#include <Python.h>
#include <stdint.h>

/* 1 when a METH_FASTCALL function got ``want`` arguments; else 0, with the
 * TypeError "<name> takes <want> arguments" set. */
static inline int bk_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t want)
{
    if (nargs == want)
        return 1;
    PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, want);
    return 0;
}

/* The varint at b[*pos] (b holds end bytes): 1 with *out set and *pos moved
 * past it; 0 when it runs past the end or over ten bytes (*pos unchanged);
 * -1 when its tenth byte carries bits beyond 64 (*pos moved past it, *out
 * unset). */
static inline int bk_varint(const uint8_t *b, Py_ssize_t end, Py_ssize_t *pos, uint64_t *out)
{
    Py_ssize_t p = *pos;
    if (p >= end)
        return 0;
    uint8_t x = b[p];
    if (x < 0x80) { /* most ids, lengths and tags: one byte */
        *out = x;
        *pos = p + 1;
        return 1;
    }
    uint64_t value = x & 0x7f;
    int shift = 7;
    for (;;) {
        if (++p >= end)
            return 0;
        x = b[p];
        if (shift == 63) { /* the tenth byte: one bit left for the value, no continuation */
            if (x & 0x80)
                return 0;
            *pos = p + 1;
            if (x > 1)
                return -1;
            *out = value | ((uint64_t)x << 63);
            return 1;
        }
        value |= (uint64_t)(x & 0x7f) << shift;
        if (x < 0x80)
            break;
        shift += 7;
    }
    *out = value;
    *pos = p + 1;
    return 1;
}

/* The bytes bk_put_varint writes for v. */
static inline size_t bk_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* v as a varint at p; the byte after it. */
static inline uint8_t *bk_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* ---- big-endian fields, Python ints as C ones, tuples */

static inline void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

static inline uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* a Python int (exactly int) as a signed 64-bit value; 0 when it is not one */
static inline int as_i64(PyObject *o, long long *out)
{
    if (!PyLong_CheckExact(o))
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

/* a Python int (exactly int) in 0 .. 2**64-1; 0 when it is not one */
static inline int as_u64(PyObject *o, unsigned long long *out)
{
    if (!PyLong_CheckExact(o))
        return 0;
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

/* (a, b), stealing both references; NULL (and nothing leaked) when either is NULL */
static inline PyObject *pair(PyObject *a, PyObject *b)
{
    PyObject *out = (a != NULL && b != NULL) ? PyTuple_New(2) : NULL;
    if (out == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, a);
    PyTuple_SET_ITEM(out, 1, b);
    return out;
}

#endif
