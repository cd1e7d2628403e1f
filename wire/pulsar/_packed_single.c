/*
 * bkctl.wire.pulsar._packed, its reader: a SingleMessageMetadata walked by hand, as far
 * as the export needs it, and the strict UTF-8 check of its text (the row is appended by
 * _packed.c; both build one extension module).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

#include "_packed_single.h"

/* ------------------------------------------------------------ checks */

/* Strict UTF-8, as Python's decoder and Arrow's string type want it: no
 * overlong forms, no surrogates, nothing above U+10FFFF. */
int utf8_valid(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            if (c == 0xE0 && s[i + 1] < 0xA0)
                return 0; /* overlong */
            if (c == 0xED && s[i + 1] >= 0xA0)
                return 0; /* surrogate */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && s[i + 1] < 0x90)
                return 0; /* overlong */
            if (c == 0xF4 && s[i + 1] >= 0x90)
                return 0; /* above U+10FFFF */
            i += 4;
        } else
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------ protobuf */

/* 0 on success; -1 when the varint runs past the end or over 10 bytes. */
int read_varint(Reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end)
            return -1;
        unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Skip a field of an unknown number; -1 for a wire type protobuf would not
 * skip quietly here (groups) or a truncated field. */
int skip_field(Reader *r, unsigned wire_type)
{
    uint64_t n;
    switch (wire_type) {
    case 0:
        return read_varint(r, &n);
    case 1:
        if (r->end - r->p < 8)
            return -1;
        r->p += 8;
        return 0;
    case 2:
        if (read_varint(r, &n) < 0 || n > (uint64_t)(r->end - r->p))
            return -1;
        r->p += n;
        return 0;
    case 5:
        if (r->end - r->p < 4)
            return -1;
        r->p += 4;
        return 0;
    default:
        return -1;
    }
}

int read_bytes(Reader *r, const unsigned char **p, Py_ssize_t *n)
{
    uint64_t len;
    if (read_varint(r, &len) < 0 || len > (uint64_t)(r->end - r->p))
        return -1;
    *p = r->p;
    *n = (Py_ssize_t)len;
    r->p += len;
    return 0;
}



/* KeyValue {required string key = 1; required string value = 2;} */
int parse_property(const unsigned char *p, Py_ssize_t n, Slice *key, Slice *value)
{
    Reader r = {p, p + n};
    int has_key = 0, has_value = 0;
    while (r.p < r.end) {
        uint64_t tag;
        if (read_varint(&r, &tag) < 0)
            return -1;
        if ((tag >> 3) > 0x1FFFFFFF)
            return -1; /* no such field number */
        unsigned field = (unsigned)(tag >> 3), wt = (unsigned)(tag & 7);
        if ((field == 1 || field == 2) && wt == 2) {
            Slice *s = field == 1 ? key : value;
            if (read_bytes(&r, &s->p, &s->n) < 0)
                return -1;
            if (field == 1)
                has_key = 1;
            else
                has_value = 1;
        } else if (field == 0 || field == 1 || field == 2 || skip_field(&r, wt) < 0)
            return -1;
    }
    if (!has_key || !has_value)
        return -1;
    if (!utf8_valid(key->p, key->n) || !utf8_valid(value->p, value->n))
        return -1;
    return 0;
}

int parse_single(const unsigned char *p, Py_ssize_t n, Single *m)
{
    Reader r = {p, p + n};
    memset(m, 0, offsetof(Single, props_key));
    while (r.p < r.end) {
        uint64_t tag, v;
        if (read_varint(&r, &tag) < 0)
            return -1;
        if ((tag >> 3) > 0x1FFFFFFF)
            return -1; /* no such field number */
        unsigned field = (unsigned)(tag >> 3), wt = (unsigned)(tag & 7);
        if (field >= 1 && field <= 10) {
            int length_delimited = field == 1 || field == 2 || field == 7;
            if (wt != (length_delimited ? 2u : 0u))
                return -1; /* protobuf keeps such a field as unknown: let it judge */
        }
        if (field == 0)
            return -1;
        if (wt == 0) { /* the varints; 4 (compacted_out) and unknown ones are not kept */
            if (read_varint(&r, &v) < 0)
                return -1;
            switch (field) {
            case 3:
                m->payload_size = v;
                m->has_payload_size = 1;
                break;
            case 5:
                m->event_time = v;
                break;
            case 8:
                m->sequence_id = v;
                m->has_sequence_id = 1;
                break;
            case 9:
                m->null_value = v != 0;
                break;
            case 6:
                m->key_b64 = v != 0;
                break;
            case 10:
                m->null_key = v != 0;
                break;
            }
        } else if (field == 1) {
            const unsigned char *q;
            Py_ssize_t qn;
            if (m->nprops == MAX_PROPERTIES || read_bytes(&r, &q, &qn) < 0 ||
                parse_property(q, qn, &m->props_key[m->nprops], &m->props_value[m->nprops]) < 0)
                return -1;
            m->nprops++;
        } else if (field == 2) {
            if (read_bytes(&r, &m->key.p, &m->key.n) < 0 || !utf8_valid(m->key.p, m->key.n))
                return -1;
            m->has_key = 1;
        } else if (field == 7) {
            if (read_bytes(&r, &m->ordering_key.p, &m->ordering_key.n) < 0)
                return -1;
            m->has_ordering_key = 1;
        } else if (skip_field(&r, wt) < 0)
            return -1;
    }
    return m->has_payload_size ? 0 : -1;
}
