/*
 * bkctl.wire.pulsar._packed: a Pulsar batch's messages appended straight to
 * Arrow-layout column buffers (the fast path of ``bkctl export --topic``).
 *
 * Splitting a batch in Python costs a protobuf parse, a dozen list appends
 * and later a pyarrow conversion per message: about 4 us a message, ten times
 * what the Parquet writer needs for the row.  Here one pass over the batch
 * walks each SingleMessageMetadata by hand and appends the row's values to
 * growable buffers laid out as Arrow's (validity bitmaps, int32 offsets,
 * little-endian values), which the export wraps without copying again.
 *
 * The general path (bkctl.wire.pulsar.entry) stays the reference: whenever a
 * batch is anything but well formed and plainly decodable here (a truncated
 * message, a missing payload_size, a wire type we do not expect, text that
 * is not UTF-8, a value that does not fit a column) add_batch appends nothing
 * and returns None, and the caller decodes the entry the general way, which
 * says what is wrong.  Both are checked against each other by the tests.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------ buffers */

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra)
{
    Py_ssize_t want = b->len + extra;
    if (want <= b->cap)
        return 0;
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

static int buf_put(Buf *b, const void *src, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, 4); }
static int buf_i64(Buf *b, int64_t v) { return buf_put(b, &v, 8); }

static void buf_free(Buf *b)
{
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* A validity bitmap (bit set = value present); handed over as None when no
 * row is null, as Arrow allows. */
typedef struct {
    Buf bits;
    int any_null;
    Py_ssize_t nulls;
} Validity;

static int reserve_validity(Validity *v, Py_ssize_t rows)
{
    Py_ssize_t need = (rows + 7) / 8;
    if (need > v->bits.len) {
        Py_ssize_t grow = need - v->bits.len;
        if (buf_reserve(&v->bits, grow) < 0)
            return -1;
        memset(v->bits.data + v->bits.len, 0, (size_t)grow);
        v->bits.len = need;
    }
    return 0;
}

static inline void mark_valid(Validity *v, Py_ssize_t row, int present)
{
    if (present)
        v->bits.data[row / 8] |= (char)(1 << (row % 8));
    else {
        v->any_null = 1;
        v->nulls++;
    }
}

static int validity_set(Validity *v, Py_ssize_t row, int present)
{
    if (reserve_validity(v, row + 1) < 0)
        return -1;
    mark_valid(v, row, present);
    return 0;
}

/* A variable-width column (Arrow binary/string): offsets and data. */
typedef struct {
    Buf offsets; /* int32, rows + 1 */
    Buf data;
    Validity valid;
} VarCol;

static int varcol_init(VarCol *c) { return buf_i32(&c->offsets, 0); }

static int varcol_add(VarCol *c, Py_ssize_t row, const char *p, Py_ssize_t n, int present)
{
    if (present && buf_put(&c->data, p, n) < 0)
        return -1;
    if (c->data.len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "more than 2 GiB in one column of a set of rows");
        return -1;
    }
    if (buf_i32(&c->offsets, (int32_t)c->data.len) < 0)
        return -1;
    return validity_set(&c->valid, row, present);
}

static void varcol_free(VarCol *c)
{
    buf_free(&c->offsets);
    buf_free(&c->data);
    buf_free(&c->valid.bits);
    c->valid.any_null = 0;
    c->valid.nulls = 0;
}

/* A fixed-width column with a validity bitmap. */
typedef struct {
    Buf values;
    Validity valid;
} FixCol;

static void fixcol_free(FixCol *c)
{
    buf_free(&c->values);
    buf_free(&c->valid.bits);
    c->valid.any_null = 0;
    c->valid.nulls = 0;
}

/* ------------------------------------------------------------ checks */

/* Strict UTF-8, as Python's decoder and Arrow's string type want it: no
 * overlong forms, no surrogates, nothing above U+10FFFF. */
static int utf8_valid(const unsigned char *s, Py_ssize_t n)
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

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Reader;

/* 0 on success; -1 when the varint runs past the end or over 10 bytes. */
static int read_varint(Reader *r, uint64_t *out)
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
static int skip_field(Reader *r, unsigned wire_type)
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

static int read_bytes(Reader *r, const unsigned char **p, Py_ssize_t *n)
{
    uint64_t len;
    if (read_varint(r, &len) < 0 || len > (uint64_t)(r->end - r->p))
        return -1;
    *p = r->p;
    *n = (Py_ssize_t)len;
    r->p += len;
    return 0;
}

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
} Slice;

#define MAX_PROPERTIES 64

/* SingleMessageMetadata, as far as the export needs it. */
typedef struct {
    int nprops;
    int has_key;
    Slice key;
    int has_payload_size;
    uint64_t payload_size;
    uint64_t event_time;
    int has_ordering_key;
    Slice ordering_key;
    int has_sequence_id;
    uint64_t sequence_id;
    int null_value;
    int null_key;
    /* only the first nprops are set: parse_single clears the fields above, not these */
    Slice props_key[MAX_PROPERTIES];
    Slice props_value[MAX_PROPERTIES];
} Single;

/* KeyValue {required string key = 1; required string value = 2;} */
static int parse_property(const unsigned char *p, Py_ssize_t n, Slice *key, Slice *value)
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

static int parse_single(const unsigned char *p, Py_ssize_t n, Single *m)
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
        if (wt == 0) { /* the varints; 4 (compacted_out), 6 (key_b64) and unknown ones are not kept */
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

/* ------------------------------------------------------------ PackedRows */

typedef struct {
    PyObject_HEAD
    int32_t partition;
    Py_ssize_t rows;
    Buf ledger_id, entry_id, batch_index, publish_time, sequence_id;
    FixCol event_time, index, broker_timestamp; /* int64 */
    FixCol payload_size;                        /* int32 */
    VarCol message_id, producer_name, key, ordering_key, schema_version, payload;
    Buf prop_offsets; /* int32 per row + 1: where a row's properties start */
    VarCol prop_keys, prop_values;
} PackedRows;

static int packed_start(PackedRows *self)
{
    self->rows = 0;
    if (varcol_init(&self->message_id) < 0 || varcol_init(&self->producer_name) < 0 ||
        varcol_init(&self->key) < 0 || varcol_init(&self->ordering_key) < 0 ||
        varcol_init(&self->schema_version) < 0 || varcol_init(&self->payload) < 0 ||
        varcol_init(&self->prop_keys) < 0 || varcol_init(&self->prop_values) < 0 ||
        buf_i32(&self->prop_offsets, 0) < 0)
        return -1;
    return 0;
}

static void packed_clear(PackedRows *self)
{
    buf_free(&self->ledger_id);
    buf_free(&self->entry_id);
    buf_free(&self->batch_index);
    buf_free(&self->publish_time);
    buf_free(&self->sequence_id);
    fixcol_free(&self->event_time);
    fixcol_free(&self->payload_size);
    fixcol_free(&self->index);
    fixcol_free(&self->broker_timestamp);
    varcol_free(&self->message_id);
    varcol_free(&self->producer_name);
    varcol_free(&self->key);
    varcol_free(&self->ordering_key);
    varcol_free(&self->schema_version);
    varcol_free(&self->payload);
    buf_free(&self->prop_offsets);
    varcol_free(&self->prop_keys);
    varcol_free(&self->prop_values);
    self->rows = 0;
}

static int PackedRows_init(PackedRows *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"partition", NULL};
    int partition = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|i", kwlist, &partition))
        return -1;
    packed_clear(self);
    self->partition = partition;
    return packed_start(self);
}

static void PackedRows_dealloc(PackedRows *self)
{
    packed_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Lengths of every buffer, to undo a batch that turned out not to decode here. */
typedef struct {
    Py_ssize_t rows, fix[5], fixcol[4], fixvalid[4], var_off[6], var_data[6], var_valid[6], prop_off, pk_off,
        pk_data, pv_off, pv_data;
    Py_ssize_t fix_nulls[4], var_nulls[6];
    int fix_any[4], var_any[6];
} Mark;

#define FIXES(s) {&(s)->ledger_id, &(s)->entry_id, &(s)->batch_index, &(s)->publish_time, &(s)->sequence_id}
#define FIXCOLS(s) {&(s)->event_time, &(s)->payload_size, &(s)->index, &(s)->broker_timestamp}
#define VARCOLS(s) {&(s)->message_id, &(s)->producer_name, &(s)->key, &(s)->ordering_key, &(s)->schema_version, \
                    &(s)->payload}

static void mark_lengths(PackedRows *s, Mark *m)
{
    Buf *fixes[] = FIXES(s);
    FixCol *fixcols[] = FIXCOLS(s);
    VarCol *varcols[] = VARCOLS(s);
    m->rows = s->rows;
    for (int i = 0; i < 5; i++)
        m->fix[i] = fixes[i]->len;
    for (int i = 0; i < 4; i++) {
        m->fixcol[i] = fixcols[i]->values.len;
        m->fixvalid[i] = fixcols[i]->valid.bits.len;
        m->fix_nulls[i] = fixcols[i]->valid.nulls;
        m->fix_any[i] = fixcols[i]->valid.any_null;
    }
    for (int i = 0; i < 6; i++) {
        m->var_off[i] = varcols[i]->offsets.len;
        m->var_data[i] = varcols[i]->data.len;
        m->var_valid[i] = varcols[i]->valid.bits.len;
        m->var_nulls[i] = varcols[i]->valid.nulls;
        m->var_any[i] = varcols[i]->valid.any_null;
    }
    m->prop_off = s->prop_offsets.len;
    m->pk_off = s->prop_keys.offsets.len;
    m->pk_data = s->prop_keys.data.len;
    m->pv_off = s->prop_values.offsets.len;
    m->pv_data = s->prop_values.data.len;
}

/* Back to a mark.  Bits set past the mark's last row are cleared, so that
 * validity_set's "or" starts from zero again. */
static void clear_bits_from(Validity *v, Py_ssize_t row, Py_ssize_t len)
{
    v->bits.len = len;
    if (row % 8 && row / 8 < len)
        v->bits.data[row / 8] &= (char)((1 << (row % 8)) - 1);
}

static void rewind_to(PackedRows *s, const Mark *m)
{
    Buf *fixes[] = FIXES(s);
    FixCol *fixcols[] = FIXCOLS(s);
    VarCol *varcols[] = VARCOLS(s);
    for (int i = 0; i < 5; i++)
        fixes[i]->len = m->fix[i];
    for (int i = 0; i < 4; i++) {
        fixcols[i]->values.len = m->fixcol[i];
        clear_bits_from(&fixcols[i]->valid, m->rows, m->fixvalid[i]);
        fixcols[i]->valid.nulls = m->fix_nulls[i];
        fixcols[i]->valid.any_null = m->fix_any[i];
    }
    for (int i = 0; i < 6; i++) {
        varcols[i]->offsets.len = m->var_off[i];
        varcols[i]->data.len = m->var_data[i];
        clear_bits_from(&varcols[i]->valid, m->rows, m->var_valid[i]);
        varcols[i]->valid.nulls = m->var_nulls[i];
        varcols[i]->valid.any_null = m->var_any[i];
    }
    s->prop_offsets.len = m->prop_off;
    s->prop_keys.offsets.len = m->pk_off;
    s->prop_keys.data.len = m->pk_data;
    s->prop_values.offsets.len = m->pv_off;
    s->prop_values.data.len = m->pv_data;
    s->rows = m->rows;
}

/* Appends that the caller has reserved room for (reserve_batch). */
static inline void put(Buf *b, const void *src, Py_ssize_t n)
{
    memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
}

static inline void put_i32(Buf *b, int32_t v) { put(b, &v, 4); }
static inline void put_i64(Buf *b, int64_t v) { put(b, &v, 8); }

static inline void fix_put64(FixCol *c, Py_ssize_t row, int64_t v, int present)
{
    put_i64(&c->values, present ? v : 0);
    mark_valid(&c->valid, row, present);
}

static inline void var_put(VarCol *c, Py_ssize_t row, const void *p, Py_ssize_t n, int present)
{
    if (present)
        put(&c->data, p, n);
    put_i32(&c->offsets, (int32_t)c->data.len);
    mark_valid(&c->valid, row, present);
}

/* Room for ``rows`` more rows: ``bytes`` more in the variable-width data of
 * each column that takes slices of the batch; bitmaps grown and zeroed. */
static int reserve_var(VarCol *c, Py_ssize_t total_rows, Py_ssize_t count, Py_ssize_t bytes)
{
    if (buf_reserve(&c->offsets, 4 * count) < 0 || buf_reserve(&c->data, bytes) < 0)
        return -1;
    return reserve_validity(&c->valid, total_rows);
}

static int reserve_fix(FixCol *c, Py_ssize_t total_rows, Py_ssize_t count, int width)
{
    if (buf_reserve(&c->values, width * count) < 0)
        return -1;
    return reserve_validity(&c->valid, total_rows);
}

/* Decimal digits of a non-negative number, without snprintf's cost per message. */
static int put_decimal(char *out, long long v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* -1 with an exception set (out of memory), 0 if the batch does not decode
 * here (the caller rewinds: what was appended is dropped), 1 when its rows
 * were appended. */
static int add_rows(PackedRows *self, const unsigned char *batch, Py_ssize_t n, long long count,
                    unsigned long long base_sequence, long long ledger_id, long long entry_id, long long publish_ms,
                    const char *producer, Py_ssize_t producer_len, const char *schema, Py_ssize_t schema_len,
                    int has_schema, long long index, int has_index, long long broker_ms, int has_broker,
                    long long *payload_bytes)
{
    if (count <= 0 || count > n / 4)
        return 0; /* every message takes at least its 4-byte size */
    if (publish_ms > INT64_MAX / 1000 || publish_ms < INT64_MIN / 1000 ||
        (has_broker && (broker_ms > INT64_MAX / 1000 || broker_ms < INT64_MIN / 1000)))
        return 0;
    char prefix[96];
    int prefix_len = snprintf(prefix, 72, "%lld:%lld:%d:", ledger_id, entry_id, (int)self->partition);
    Py_ssize_t rows = self->rows + (Py_ssize_t)count;
    /* every Arrow offset must stay within int32 */
    if (self->payload.data.len + n > INT32_MAX || self->key.data.len + n > INT32_MAX ||
        self->ordering_key.data.len + n > INT32_MAX || self->prop_keys.data.len + n > INT32_MAX ||
        self->prop_values.data.len + n > INT32_MAX ||
        self->message_id.data.len + count * (prefix_len + 20) > INT32_MAX ||
        self->producer_name.data.len + count * producer_len > INT32_MAX ||
        self->schema_version.data.len + count * schema_len > INT32_MAX)
        return 0;
    if (buf_reserve(&self->ledger_id, 8 * count) < 0 || buf_reserve(&self->entry_id, 8 * count) < 0 ||
        buf_reserve(&self->batch_index, 4 * count) < 0 || buf_reserve(&self->publish_time, 8 * count) < 0 ||
        buf_reserve(&self->sequence_id, 8 * count) < 0 || buf_reserve(&self->prop_offsets, 4 * count) < 0 ||
        reserve_fix(&self->event_time, rows, count, 8) < 0 || reserve_fix(&self->payload_size, rows, count, 4) < 0 ||
        reserve_fix(&self->index, rows, count, 8) < 0 || reserve_fix(&self->broker_timestamp, rows, count, 8) < 0 ||
        reserve_var(&self->message_id, rows, count, count * (prefix_len + 20)) < 0 ||
        reserve_var(&self->producer_name, rows, count, count * producer_len) < 0 ||
        reserve_var(&self->key, rows, count, n) < 0 || reserve_var(&self->ordering_key, rows, count, n) < 0 ||
        reserve_var(&self->schema_version, rows, count, count * schema_len) < 0 ||
        reserve_var(&self->payload, rows, count, n) < 0)
        return -1;
    int64_t publish_us = publish_ms * 1000, broker_us = broker_ms * 1000;
    Py_ssize_t off = 0;
    long long total = 0;
    Single m;
    for (long long i = 0; i < count; i++) {
        if (off + 4 > n)
            return 0;
        uint32_t size = ((uint32_t)batch[off] << 24) | ((uint32_t)batch[off + 1] << 16) |
                        ((uint32_t)batch[off + 2] << 8) | (uint32_t)batch[off + 3];
        off += 4;
        if ((Py_ssize_t)size > n - off)
            return 0;
        if (parse_single(batch + off, (Py_ssize_t)size, &m) < 0)
            return 0;
        off += size;
        if (m.payload_size > (uint64_t)INT32_MAX || (Py_ssize_t)m.payload_size > n - off)
            return 0;
        if (m.event_time > (uint64_t)(INT64_MAX / 1000))
            return 0;
        if (!m.has_sequence_id && base_sequence > (unsigned long long)INT64_MAX - (unsigned long long)i)
            return 0;
        uint64_t sequence = m.has_sequence_id ? m.sequence_id : base_sequence + (uint64_t)i;
        if (sequence > (uint64_t)INT64_MAX)
            return 0;
        Py_ssize_t row = self->rows;
        int has_payload = !m.null_value;
        put_i64(&self->ledger_id, ledger_id);
        put_i64(&self->entry_id, entry_id);
        put_i32(&self->batch_index, (int32_t)i);
        put_i64(&self->publish_time, publish_us);
        put_i64(&self->sequence_id, (int64_t)sequence);
        fix_put64(&self->event_time, row, (int64_t)m.event_time * 1000, m.event_time != 0);
        put_i32(&self->payload_size.values, has_payload ? (int32_t)m.payload_size : 0);
        mark_valid(&self->payload_size.valid, row, has_payload);
        fix_put64(&self->index, row, index, has_index);
        fix_put64(&self->broker_timestamp, row, broker_us, has_broker);
        int digits = put_decimal(prefix + prefix_len, i);
        var_put(&self->message_id, row, prefix, prefix_len + digits, 1);
        var_put(&self->producer_name, row, producer, producer_len, 1);
        var_put(&self->key, row, m.key.p, m.key.n, m.has_key && !m.null_key);
        var_put(&self->ordering_key, row, m.ordering_key.p, m.ordering_key.n, m.has_ordering_key);
        var_put(&self->schema_version, row, schema, schema_len, has_schema);
        var_put(&self->payload, row, batch + off, (Py_ssize_t)m.payload_size, has_payload);
        for (int k = 0; k < m.nprops; k++) {
            Py_ssize_t prop = self->prop_keys.offsets.len / 4 - 1;
            if (varcol_add(&self->prop_keys, prop, (const char *)m.props_key[k].p, m.props_key[k].n, 1) < 0 ||
                varcol_add(&self->prop_values, prop, (const char *)m.props_value[k].p, m.props_value[k].n, 1) < 0)
                return -1;
        }
        put_i32(&self->prop_offsets, (int32_t)(self->prop_keys.offsets.len / 4 - 1));
        if (has_payload)
            total += (long long)m.payload_size;
        off += (Py_ssize_t)m.payload_size;
        self->rows++;
    }
    if (off != n)
        return 0;
    *payload_bytes = total;
    return 1;
}

PyDoc_STRVAR(add_batch_doc,
"add_batch(batch, count, base_sequence, ledger_id, entry_id, publish_time, producer_name,\n"
"          schema_version, index, broker_timestamp) -> int | None\n\n"
"Append the rows of a batch's ``count`` messages (the decompressed payload of a\n"
"batched entry).  Times are milliseconds; ``producer_name`` UTF-8 bytes;\n"
"``schema_version``, ``index`` and ``broker_timestamp`` may be None.  Returns the\n"
"messages' payload bytes, or None -- nothing appended -- when the batch is not\n"
"one this fast path decodes (the general path then says what is wrong).");

/* An int argument as int64: 1, or 0 when it does not fit one, -1 with an
 * exception for anything else; ``present`` 0 (None) leaves *out alone. */
static int as_int64(PyObject *obj, int present, long long *out)
{
    if (!present)
        return 1;
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    *out = v;
    return 1;
}

static PyObject *PackedRows_add_batch(PackedRows *self, PyObject *args)
{
    Py_buffer batch, producer;
    long long count, ledger_id, entry_id, publish_ms, index = 0, broker_ms = 0;
    unsigned long long base_sequence;
    PyObject *publish_obj, *schema_obj, *index_obj, *broker_obj;
    if (!PyArg_ParseTuple(args, "y*LKLLOy*OOO", &batch, &count, &base_sequence, &ledger_id, &entry_id,
                          &publish_obj, &producer, &schema_obj, &index_obj, &broker_obj))
        return NULL;
    PyObject *result = NULL;
    Py_buffer schema = {0};
    int has_schema = schema_obj != Py_None, has_index = index_obj != Py_None, has_broker = broker_obj != Py_None;
    if (has_schema && PyObject_GetBuffer(schema_obj, &schema, PyBUF_SIMPLE) < 0)
        goto done;
    int fits = as_int64(publish_obj, 1, &publish_ms);
    if (fits > 0)
        fits = as_int64(index_obj, has_index, &index);
    if (fits > 0)
        fits = as_int64(broker_obj, has_broker, &broker_ms);
    if (fits < 0)
        goto done;
    if (fits == 0) { /* the general path says it is out of range */
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (!utf8_valid(producer.buf, producer.len)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Mark m;
    mark_lengths(self, &m);
    long long payload_bytes = 0;
    int rc = add_rows(self, batch.buf, batch.len, count, base_sequence, ledger_id, entry_id, publish_ms,
                      producer.buf, producer.len, has_schema ? schema.buf : NULL, has_schema ? schema.len : 0,
                      has_schema, index, has_index, broker_ms, has_broker, &payload_bytes);
    if (rc <= 0)
        rewind_to(self, &m);
    if (rc < 0)
        goto done;
    result = rc ? PyLong_FromLongLong(payload_bytes) : Py_NewRef(Py_None);
done:
    if (has_schema && schema.obj)
        PyBuffer_Release(&schema);
    PyBuffer_Release(&batch);
    PyBuffer_Release(&producer);
    return result;
}

static PyObject *bytes_of(Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", b->len); }

static PyObject *validity_of(Validity *v)
{
    if (!v->any_null)
        return Py_NewRef(Py_None);
    return bytes_of(&v->bits);
}

static PyObject *fix_tuple(FixCol *c)
{
    return Py_BuildValue("(NnN)", validity_of(&c->valid), c->valid.nulls, bytes_of(&c->values));
}

static PyObject *var_tuple(VarCol *c)
{
    return Py_BuildValue("(NnNN)", validity_of(&c->valid), c->valid.nulls, bytes_of(&c->offsets),
                         bytes_of(&c->data));
}

static PyObject *plain_tuple(Buf *b) { return Py_BuildValue("(OnN)", Py_None, (Py_ssize_t)0, bytes_of(b)); }

PyDoc_STRVAR(take_doc,
"take() -> (rows, columns)\n\n"
"The rows appended so far, and start again empty.  ``columns`` maps a column\n"
"name to its Arrow buffers: ``(validity | None, null_count, values)`` for a\n"
"fixed-width column, ``(validity | None, null_count, offsets, data)`` for a\n"
"binary or string one, and for ``properties`` (a map of strings, never null)\n"
"``(offsets, key_offsets, key_data, value_offsets, value_data)``.");

static PyObject *PackedRows_take(PackedRows *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *cols = Py_BuildValue(
        "{sNsNsNsNsNsNsNsNsNsNsNsNsNsNsNsN}",
        "ledger_id", plain_tuple(&self->ledger_id), "entry_id", plain_tuple(&self->entry_id),
        "batch_index", plain_tuple(&self->batch_index), "publish_time", plain_tuple(&self->publish_time),
        "sequence_id", plain_tuple(&self->sequence_id), "event_time", fix_tuple(&self->event_time),
        "payload_size", fix_tuple(&self->payload_size), "index", fix_tuple(&self->index),
        "broker_timestamp", fix_tuple(&self->broker_timestamp), "message_id", var_tuple(&self->message_id),
        "producer_name", var_tuple(&self->producer_name), "key", var_tuple(&self->key),
        "ordering_key", var_tuple(&self->ordering_key), "schema_version", var_tuple(&self->schema_version),
        "payload", var_tuple(&self->payload),
        "properties", Py_BuildValue("(NNNNN)", bytes_of(&self->prop_offsets), bytes_of(&self->prop_keys.offsets),
                                    bytes_of(&self->prop_keys.data), bytes_of(&self->prop_values.offsets),
                                    bytes_of(&self->prop_values.data)));
    if (cols == NULL)
        return NULL;
    PyObject *out = Py_BuildValue("(nN)", self->rows, cols);
    Mark empty;
    memset(&empty, 0, sizeof empty);
    rewind_to(self, &empty); /* the buffers keep their room for the next rows */
    if (out == NULL || packed_start(self) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *PackedRows_get_rows(PackedRows *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->rows);
}

static PyMethodDef PackedRows_methods[] = {
    {"add_batch", (PyCFunction)PackedRows_add_batch, METH_VARARGS, add_batch_doc},
    {"take", (PyCFunction)PackedRows_take, METH_NOARGS, take_doc},
    {NULL},
};

static PyGetSetDef PackedRows_getset[] = {
    {"rows", (getter)PackedRows_get_rows, NULL, "rows appended since the last take()", NULL},
    {NULL},
};

static PyTypeObject PackedRowsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bkctl.wire.pulsar._packed.PackedRows",
    .tp_doc = PyDoc_STR("A topic's message rows in Arrow-layout buffers (PackedRows(partition=-1))."),
    .tp_basicsize = sizeof(PackedRows),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)PackedRows_init,
    .tp_dealloc = (destructor)PackedRows_dealloc,
    .tp_methods = PackedRows_methods,
    .tp_getset = PackedRows_getset,
};

static struct PyModuleDef packed_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bkctl.wire.pulsar._packed",
    .m_doc = "A Pulsar batch's messages appended straight to Arrow-layout column buffers.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__packed(void)
{
    if (PyType_Ready(&PackedRowsType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&packed_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "PackedRows", (PyObject *)&PackedRowsType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
