/*
 * What the C twins of the codecs share (_plain.c: the bookie's request
 * parsers and ADD answer; _fastcodec.c: the client's per-entry codecs): the
 * argument count check of their fast-call functions, and the protobuf
 * base-128 varint.  Each caller decides what a varint past 64 bits means to
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

#endif
