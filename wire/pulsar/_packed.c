/*
 * bkctl.wire.pulsar._packed: the C twin of the Pulsar batch splitter.
 *
 * A Pulsar batch's messages appended straight to Arrow-layout column
 * buffers (the fast path of ``bkctl export --topic``).  Splitting a batch in
 * Python costs a protobuf parse, a dozen list appends and later a pyarrow
 * conversion per message: about 4 us a message, ten times what the Parquet
 * writer needs for the row.  Here one pass over the batch walks each
 * SingleMessageMetadata by hand and appends the row's values to growable
 * buffers laid out as Arrow's (uint8_t validity bitmaps, int32 offsets,
 * little-endian values), which the export wraps without copying again.
 *
 * PackedRows and bkctl.wire.pulsar.rows.PyMessageRows are twins: the same
 * interface (add_batch, add_entries, takes, take, rows, payload_bytes), the
 * same columns, the same rules; which one splits is chosen in one place,
 * Twins.batch_rows of bkctl.wire.fastpath.  The Python twin is the
 * reference: add_batch here appends nothing and returns None for anything
 * but a well-formed batch it decodes plainly (a truncated message, a missing
 * payload_size, a wire type protobuf would keep as unknown, text that is
 * not UTF-8, a value that does not fit its column), and the caller hands the
 * entry to the Python twin, which says what is wrong.  add_entries takes
 * whole stored entries (read by _packed_entry.c) as long as each is a plain
 * message or batch (rows.plain_entry's rule), and stops at the first that is
 * not: the caller hands that one to the general path.
 *
 * The columns are ROW_COLUMNS below, one line each; the rules for a
 * message's own values are message_values(), once.  Reading a message's
 * SingleMessageMetadata, and the UTF-8 check, are _packed_single.c's; a
 * whole stored entry, and add_entries' limits, _packed_entry.c's; the column
 * buffers in Arrow's layout _packed_arrow.c's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <limits.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "_packed writes Arrow's little-endian buffers with native stores: not built on a big-endian machine"
#endif

#include "_packed_arrow.h"
#include "_packed_single.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------ the columns */

/* Every column a split batch fills, in the row's order: X(name, kind, made_by).
 *   kind: INT64 (long; timestamp in microseconds), INT32, STRING (UTF-8),
 *         BINARY, BOOL (boolean: its values a bitmap, as Arrow's), MAP
 *         (map<string,string>, never null; at most one);
 *   made_by: ENTRY -- the same for every message of the batch, handed to
 *         add_batch as the ``entry`` tuple, in this order, already in the
 *         column's units; MESSAGE -- each message's own (message_values()).
 * bkctl.wire.pulsar.columns.MESSAGE_COLUMNS is the reference: this list is
 * its ``entry`` and ``message`` columns, in order (COLUMNS in the module;
 * tests/unit/test_pulsar_packed.py fails when the two differ). */
#define ROW_COLUMNS(X)                   \
    X(ledger_id, INT64, ENTRY)           \
    X(entry_id, INT64, ENTRY)            \
    X(batch_index, INT32, MESSAGE)       \
    X(message_id, STRING, MESSAGE)       \
    X(publish_time, INT64, ENTRY)        \
    X(event_time, INT64, MESSAGE)        \
    X(producer_name, STRING, ENTRY)      \
    X(sequence_id, INT64, MESSAGE)       \
    X(key, STRING, MESSAGE)              \
    X(key_base64_encoded, BOOL, MESSAGE) \
    X(ordering_key, BINARY, MESSAGE)     \
    X(properties, MAP, MESSAGE)          \
    X(schema_version, BINARY, ENTRY)     \
    X(payload, BINARY, MESSAGE)          \
    X(payload_size, INT32, MESSAGE)      \
    X(index, INT64, ENTRY)               \
    X(broker_timestamp, INT64, ENTRY)    \
    X(replicated_from, STRING, ENTRY)    \
    X(deliver_at_time, INT64, ENTRY)     \
    X(txn_id, STRING, ENTRY)             \
    X(pending, BOOL, ENTRY)

typedef enum { INT64, INT32, STRING, BINARY, BOOL, MAP } Kind;
typedef enum { ENTRY, MESSAGE } MadeBy;
static const char *const KIND_NAMES[] = {"int64", "int32", "string", "binary", "bool", "map"};
static const char *const MADE_BY_NAMES[] = {"entry", "message"};

#define AS_ENUM(name, kind, made_by) COL_##name,
enum { ROW_COLUMNS(AS_ENUM) NCOLUMNS };
#define AS_ENTRY_COUNT(name, kind, made_by) +((made_by) == ENTRY)
enum { NENTRY = 0 ROW_COLUMNS(AS_ENTRY_COUNT) };
#define AS_MAP_COUNT(name, kind, made_by) +((kind) == MAP)
_Static_assert(0 ROW_COLUMNS(AS_MAP_COUNT) <= 1, "one MAP column at most: its keys and values are map_keys/map_values");

typedef struct {
    const char *name;
    Kind kind;
    MadeBy made_by;
} ColumnSpec;

#define AS_SPEC(name, kind, made_by) {#name, kind, made_by},
static const ColumnSpec COLUMN_SPECS[NCOLUMNS] = {ROW_COLUMNS(AS_SPEC)};

/* ------------------------------------------------------------ PackedRows */

typedef struct {
    PyObject_HEAD
    int32_t partition;
    Py_ssize_t rows;
    long long payload_bytes; /* of the messages appended since the last take() */
    Column col[NCOLUMNS];
    Column map_keys, map_values; /* the MAP column's entries */
} PackedRows;

/* Every column's storage, the map's entries last: what marks and rewinds walk. */
#define NSTORED (NCOLUMNS + 2)

static void stored_columns(PackedRows *s, Column *out[NSTORED])
{
    for (int i = 0; i < NCOLUMNS; i++)
        out[i] = &s->col[i];
    out[NCOLUMNS] = &s->map_keys;
    out[NCOLUMNS + 1] = &s->map_values;
}

static int has_offsets(int stored)
{
    return stored >= NCOLUMNS || COLUMN_SPECS[stored].kind == STRING || COLUMN_SPECS[stored].kind == BINARY ||
           COLUMN_SPECS[stored].kind == MAP;
}

/* Empty columns: a variable-width one starts with its first offset, 0. */
static int packed_start(PackedRows *self)
{
    Column *cols[NSTORED];
    stored_columns(self, cols);
    self->rows = 0;
    self->payload_bytes = 0;
    for (size_t i = 0; i < ARRAY_LEN(cols); i++) {
        cols[i]->values.len = cols[i]->data.len = cols[i]->valid.len = 0;
        cols[i]->nulls = 0;
        if (has_offsets((int)i)) {
            if (buf_reserve(&cols[i]->values, 4) < 0)
                return -1;
            put_i32(&cols[i]->values, 0);
        }
    }
    return 0;
}

static void packed_clear(PackedRows *self)
{
    Column *cols[NSTORED];
    stored_columns(self, cols);
    for (size_t i = 0; i < ARRAY_LEN(cols); i++)
        column_free(cols[i]);
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
    Py_ssize_t values, data, valid, nulls;
} ColumnMark;

typedef struct {
    ColumnMark col[NSTORED];
} Mark;

static void mark_lengths(PackedRows *s, Mark *m)
{
    Column *cols[NSTORED];
    stored_columns(s, cols);
    for (size_t i = 0; i < ARRAY_LEN(cols); i++)
        m->col[i] = (ColumnMark){cols[i]->values.len, cols[i]->data.len, cols[i]->valid.len, cols[i]->nulls};
}

/* Back to a mark.  Bits set past the mark's last row are cleared (validity,
 * and a BOOL column's values), so that the "or" of mark_valid and
 * append_BOOL starts from zero again. */
static void rewind_to(PackedRows *s, const Mark *m, Py_ssize_t rows)
{
    Column *cols[NSTORED];
    stored_columns(s, cols);
    for (size_t i = 0; i < ARRAY_LEN(cols); i++) {
        Column *c = cols[i];
        const ColumnMark *cm = &m->col[i];
        /* a column's own rows at the mark: the batch's, or for the map's entries their count */
        Py_ssize_t row = i < NCOLUMNS ? rows : cm->values / 4 - 1;
        c->values.len = cm->values;
        c->data.len = cm->data;
        c->valid.len = cm->valid;
        c->nulls = cm->nulls;
        clear_bits_after(&c->valid, row);
        if (i < NCOLUMNS && COLUMN_SPECS[i].kind == BOOL)
            clear_bits_after(&c->values, row);
    }
    s->rows = rows;
}

/* ------------------------------------------------------------ a row's values */

typedef struct {
    int present;
    int64_t i;          /* INT64, INT32, BOOL (0 or 1) */
    const char *p;      /* STRING, BINARY */
    Py_ssize_t n;
    const Single *map;  /* MAP: the message whose properties they are */
} Value;

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

/* The rules for a message of a batch, stated once on this side (the Python
 * twin's: bkctl.wire.pulsar.rows.message_values): no key when it is unset or
 * null_partition_key says so, and whether it is base64 as stored; the sequence id is the message's own, else the
 * entry's plus the message's index; no event time when it is 0 (unset);
 * no payload (and no size) when null_value says so.  0 when a value does
 * not fit its column. */
static int message_values(Value row[NCOLUMNS], const Single *m, long long i, int64_t base_sequence,
                          const unsigned char *payload, char *id, int id_prefix)
{
    if (m->event_time > (uint64_t)(INT64_MAX / 1000))
        return 0;
    int64_t sequence;
    if (m->has_sequence_id) {
        if (m->sequence_id > (uint64_t)INT64_MAX)
            return 0;
        sequence = (int64_t)m->sequence_id;
    } else {
        if (base_sequence > INT64_MAX - i)
            return 0;
        sequence = base_sequence + (int64_t)i;
    }
    int has_payload = !m->null_value;
    row[COL_batch_index] = (Value){.present = 1, .i = i};
    /* a single message (index -1) is L:E:P, the prefix less its colon */
    row[COL_message_id] = (Value){.present = 1, .p = id, .n = i < 0 ? id_prefix - 1 : id_prefix + put_decimal(id + id_prefix, i)};
    row[COL_event_time] = (Value){.present = m->event_time != 0, .i = (int64_t)m->event_time * 1000};
    row[COL_sequence_id] = (Value){.present = 1, .i = sequence};
    row[COL_key] = (Value){.present = m->has_key && !m->null_key, .p = (const char *)m->key.p, .n = m->key.n};
    row[COL_key_base64_encoded] = (Value){.present = 1, .i = m->key_b64};
    row[COL_ordering_key] = (Value){.present = m->has_ordering_key, .p = (const char *)m->ordering_key.p,
                                    .n = m->ordering_key.n};
    row[COL_properties] = (Value){.present = 1, .map = m};
    row[COL_payload] = (Value){.present = has_payload, .p = (const char *)payload, .n = (Py_ssize_t)m->payload_size};
    row[COL_payload_size] = (Value){.present = has_payload, .i = (int64_t)m->payload_size};
    return 1;
}

/* Appending a value, one function per kind (room reserved by reserve_rows,
 * but for the map's entries); -1 with an exception set (out of memory). */
static inline int append_INT64(PackedRows *self, Column *col, const Value *v)
{
    put_i64(&col->values, v->present ? v->i : 0);
    return 0;
}

static inline int append_INT32(PackedRows *self, Column *col, const Value *v)
{
    put_i32(&col->values, v->present ? (int32_t)v->i : 0);
    return 0;
}

static inline int append_STRING(PackedRows *self, Column *col, const Value *v)
{
    if (v->present)
        put(&col->data, v->p, v->n);
    put_i32(&col->values, (int32_t)col->data.len);
    return 0;
}

#define append_BINARY append_STRING

static inline int append_BOOL(PackedRows *self, Column *col, const Value *v)
{
    if (v->present && v->i)
        ((uint8_t *)col->values.data)[self->rows / 8] |= (uint8_t)(1u << (self->rows % 8));
    return 0;
}

static inline int append_MAP(PackedRows *self, Column *col, const Value *v)
{
    for (int k = 0; k < v->map->nprops; k++) {
        Py_ssize_t entry = self->map_keys.values.len / 4 - 1;
        if (column_add_var(&self->map_keys, entry, v->map->props_key[k].p, v->map->props_key[k].n) < 0 ||
            column_add_var(&self->map_values, entry, v->map->props_value[k].p, v->map->props_value[k].n) < 0)
            return -1;
    }
    put_i32(&col->values, (int32_t)(self->map_keys.values.len / 4 - 1));
    return 0;
}

/* One row: each column's value appended by its kind's function (the table
 * unrolled at compile time). */
static int append_row(PackedRows *self, const Value row[NCOLUMNS])
{
    Py_ssize_t r = self->rows;
#define APPEND(name, kind, made_by)                                                        \
    if (append_##kind(self, &self->col[COL_##name], &row[COL_##name]) < 0)                 \
        return -1;                                                                         \
    mark_valid(&self->col[COL_##name], r, row[COL_##name].present);
    ROW_COLUMNS(APPEND)
#undef APPEND
    self->rows++;
    return 0;
}

/* Room for ``count`` more rows: ``var_bytes[c]`` more data in each
 * variable-width column (a map's: in its keys and in its values); 0 when an
 * offset could pass int32 (not handled here). */
static int reserve_rows(PackedRows *self, Py_ssize_t count, const Py_ssize_t var_bytes[NCOLUMNS])
{
    for (int c = 0; c < NCOLUMNS; c++) {
        Column *col = &self->col[c];
        Kind kind = COLUMN_SPECS[c].kind;
        if ((kind == STRING || kind == BINARY) && col->data.len + var_bytes[c] > INT32_MAX)
            return 0;
        if (kind == MAP && (self->map_keys.data.len + var_bytes[c] > INT32_MAX ||
                            self->map_values.data.len + var_bytes[c] > INT32_MAX))
            return 0;
        if ((kind == BOOL ? reserve_bits(&col->values, self->rows + count)
                          : buf_reserve(&col->values, (kind == INT64 ? 8 : 4) * count)) < 0 ||
            ((kind == STRING || kind == BINARY) && buf_reserve(&col->data, var_bytes[c]) < 0) ||
            reserve_validity(col, self->rows + count) < 0)
            return -1;
    }
    return 1;
}

/* Room for the rows of ``count`` messages whose own values are slices of ``n``
 * bytes (a batch, or a whole entry: every message's slices together are
 * shorter), the entry's values repeated per message; the message ids' prefix
 * ``L:E:P:`` into ``id``.  1, 0 when an offset could pass int32 (not handled
 * here), -1 with an exception set. */
static int reserve_messages(PackedRows *self, const Value row[NCOLUMNS], long long count, Py_ssize_t n, char id[96],
                            int *id_prefix)
{
    *id_prefix = snprintf(id, 72, "%lld:%lld:%d:", (long long)row[COL_ledger_id].i, (long long)row[COL_entry_id].i,
                          (int)self->partition);
    Py_ssize_t var_bytes[NCOLUMNS] = {0};
    for (int c = 0; c < NCOLUMNS; c++)
        if (COLUMN_SPECS[c].kind == STRING || COLUMN_SPECS[c].kind == BINARY || COLUMN_SPECS[c].kind == MAP)
            var_bytes[c] = COLUMN_SPECS[c].made_by == ENTRY ? (Py_ssize_t)count * row[c].n : n;
    var_bytes[COL_message_id] = (Py_ssize_t)count * (*id_prefix + 20);
    return reserve_rows(self, (Py_ssize_t)count, var_bytes);
}

/* -1 with an exception set (out of memory), 0 if the batch does not decode
 * here (the caller rewinds: what was appended is dropped), 1 when its rows
 * were appended. */
static int add_rows(PackedRows *self, const unsigned char *batch, Py_ssize_t n, long long count,
                    int64_t base_sequence, Value row[NCOLUMNS], long long *payload_bytes)
{
    if (count <= 0 || count > n / 4)
        return 0; /* every message takes at least its 4-byte size */
    char id[96];
    int id_prefix;
    int room = reserve_messages(self, row, count, n, id, &id_prefix);
    if (room <= 0)
        return room;
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
        if (!message_values(row, &m, i, base_sequence, batch + off, id, id_prefix))
            return 0;
        if (append_row(self, row) < 0)
            return -1;
        if (!m.null_value)
            total += (long long)m.payload_size;
        off += (Py_ssize_t)m.payload_size;
    }
    if (off != n)
        return 0;
    *payload_bytes = total;
    return 1;
}

/* The ``entry`` tuple into the ENTRY columns' values: 1, 0 when a value does
 * not fit its column (not handled here), -1 with an exception for a wrong
 * argument.  The pointers stay valid while the tuple lives. */
static int entry_values(PyObject *entry, Value row[NCOLUMNS])
{
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != NENTRY) {
        PyErr_Format(PyExc_TypeError, "entry must be a tuple of the %d entry columns' values", (int)NENTRY);
        return -1;
    }
    Py_ssize_t k = 0;
    for (int c = 0; c < NCOLUMNS; c++) {
        if (COLUMN_SPECS[c].made_by != ENTRY)
            continue;
        PyObject *obj = PyTuple_GET_ITEM(entry, k++);
        Value *v = &row[c];
        *v = (Value){.present = obj != Py_None};
        if (!v->present)
            continue;
        switch (COLUMN_SPECS[c].kind) {
        case INT64:
        case INT32: {
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(obj, &overflow);
            if (x == -1 && PyErr_Occurred())
                return -1;
            if (overflow || (COLUMN_SPECS[c].kind == INT32 && (x < INT32_MIN || x > INT32_MAX)))
                return 0;
            v->i = x;
            break;
        }
        case BOOL: {
            int truth = PyObject_IsTrue(obj);
            if (truth < 0)
                return -1;
            v->i = truth;
            break;
        }
        case STRING:
        case BINARY:
            if (COLUMN_SPECS[c].kind == STRING && PyUnicode_Check(obj)) {
                v->p = PyUnicode_AsUTF8AndSize(obj, &v->n);
                if (v->p == NULL) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeError))
                        return -1;
                    PyErr_Clear(); /* lone surrogates: not text a column takes */
                    return 0;
                }
            } else {
                char *p;
                if (PyBytes_AsStringAndSize(obj, &p, &v->n) < 0)
                    return -1;
                v->p = p;
                if (COLUMN_SPECS[c].kind == STRING && !utf8_valid((const unsigned char *)p, v->n))
                    return 0;
            }
            break;
        case MAP:
            PyErr_SetString(PyExc_TypeError, "a map column is no entry column");
            return -1;
        }
    }
    return 1;
}

PyDoc_STRVAR(add_batch_doc,
"add_batch(batch, count, base_sequence, entry) -> int | None\n\n"
"Append the rows of a batch's ``count`` messages (the decompressed payload of a\n"
"batched entry); ``base_sequence`` is the entry's sequence id, ``entry`` the\n"
"values of the ``entry`` columns of COLUMNS, in order (None: null).  Returns the\n"
"messages' payload bytes, or None -- nothing appended -- when the batch is not\n"
"one this splitter decodes (the Python twin then says what is wrong).");

static PyObject *PackedRows_add_batch(PackedRows *self, PyObject *args)
{
    Py_buffer batch;
    long long count;
    PyObject *base_obj, *entry;
    if (!PyArg_ParseTuple(args, "y*LOO", &batch, &count, &base_obj, &entry))
        return NULL;
    PyObject *result = NULL;
    Value row[NCOLUMNS];
    int overflow = 0;
    long long base_sequence = PyLong_AsLongLongAndOverflow(base_obj, &overflow);
    if (base_sequence == -1 && PyErr_Occurred())
        goto done;
    int fits = overflow == 0 && base_sequence >= 0 ? entry_values(entry, row) : 0;
    if (fits < 0)
        goto done;
    if (fits == 0) { /* the Python twin says what is out of range */
        result = Py_NewRef(Py_None);
        goto done;
    }
    Mark m;
    Py_ssize_t rows = self->rows;
    mark_lengths(self, &m);
    long long payload_bytes = 0;
    int rc = add_rows(self, batch.buf, batch.len, count, (int64_t)base_sequence, row, &payload_bytes);
    if (rc <= 0)
        rewind_to(self, &m, rows);
    if (rc > 0)
        self->payload_bytes += payload_bytes;
    if (rc >= 0)
        result = rc ? PyLong_FromLongLong(payload_bytes) : Py_NewRef(Py_None);
done:
    PyBuffer_Release(&batch);
    return result;
}

/* ------------------------------------------------------------ whole entries */

_Static_assert(NENTRY == 11, "entry_row sets every entry column of ROW_COLUMNS");

/* The entry columns' values of a plain entry (columns.entry_values' rules). */
static void entry_row(Value row[NCOLUMNS], const PlainEntry *e, long long ledger_id, long long entry_id)
{
    row[COL_ledger_id] = (Value){.present = 1, .i = ledger_id};
    row[COL_entry_id] = (Value){.present = 1, .i = entry_id};
    row[COL_publish_time] = (Value){.present = 1, .i = (int64_t)e->publish_time * 1000};
    row[COL_producer_name] = (Value){.present = 1, .p = (const char *)e->producer_name.p, .n = e->producer_name.n};
    row[COL_schema_version] = (Value){.present = e->has_schema_version, .p = (const char *)e->schema_version.p,
                                      .n = e->schema_version.n};
    row[COL_index] = (Value){.present = e->has_index, .i = (int64_t)e->index};
    row[COL_broker_timestamp] = (Value){.present = e->has_broker_timestamp, .i = (int64_t)e->broker_timestamp * 1000};
    row[COL_replicated_from] = (Value){.present = e->has_replicated_from, .p = (const char *)e->replicated_from.p,
                                       .n = e->replicated_from.n};
    row[COL_deliver_at_time] = (Value){.present = e->has_deliver_at_time, .i = e->deliver_at_time * 1000};
    row[COL_txn_id] = (Value){.present = 0};  /* a transaction's entry is not plain */
    row[COL_pending] = (Value){.present = 1}; /* false: nothing is held back where add_entries is used */
}

/* The row of a single (not batched) message: 1, 0 not handled here, -1 with an exception. */
static int add_single(PackedRows *self, const PlainEntry *e, Py_ssize_t n, Value row[NCOLUMNS], long long *payload_bytes)
{
    char id[96];
    int id_prefix;
    int room = reserve_messages(self, row, 1, n, id, &id_prefix);
    if (room <= 0)
        return room;
    if (!message_values(row, &e->message, -1, (int64_t)e->sequence_id, e->payload, id, id_prefix))
        return 0;
    if (append_row(self, row) < 0)
        return -1;
    *payload_bytes = e->message.null_value ? 0 : (long long)e->payload_n;
    return 1;
}

/* The rows of one stored entry: 1 appended, 0 not a plain entry in the window (nothing
 * appended), -1 with an exception set. */
static int add_entry(PackedRows *self, long long ledger_id, long long entry_id, const unsigned char *p,
                     Py_ssize_t n, const Limits *l, long long *payload_bytes)
{
    PlainEntry e;
    if (parse_plain_entry(p, n, l->verify, &e) < 0 || !in_window(l, e.publish_time))
        return 0;
    Value row[NCOLUMNS];
    entry_row(row, &e, ledger_id, entry_id);
    Mark m;
    Py_ssize_t rows = self->rows;
    mark_lengths(self, &m);
    int rc = e.is_batch ? add_rows(self, e.payload, e.payload_n, e.count, (int64_t)e.sequence_id, row, payload_bytes)
                        : add_single(self, &e, n, row, payload_bytes);
    if (rc <= 0)
        rewind_to(self, &m, rows);
    return rc;
}

PyDoc_STRVAR(add_entries_doc,
"add_entries(ledger_id, entries, start, limits) -> int\n\n"
"Append the rows of ``entries[start:]`` (a list of ``(entry_id, stored entry)``)\n"
"while each is a plain message or batch in the window (rows.plain_entry) and the\n"
"call has appended fewer than ``limits.rows`` rows and ``limits.payload_bytes``\n"
"payload bytes; returns the index of the first entry not taken.");

static PyObject *PackedRows_add_entries(PackedRows *self, PyObject *args)
{
    long long ledger_id;
    PyObject *entries, *limits;
    Py_ssize_t i;
    Limits l;
    if (!PyArg_ParseTuple(args, "LO!nO", &ledger_id, &PyList_Type, &entries, &i, &limits) || limits_of(limits, &l) < 0)
        return NULL;
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "start must not be negative");
        return NULL;
    }
    Py_ssize_t rows = self->rows;
    long long added = 0;
    while (i < PyList_GET_SIZE(entries) && self->rows - rows < l.rows && added < l.payload_bytes) {
        PyObject *item = PyList_GET_ITEM(entries, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2)
            break;
        int overflow = 0;
        long long entry_id = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(item, 0), &overflow);
        if (entry_id == -1 && PyErr_Occurred())
            return NULL;
        Py_buffer buf;
        if (overflow || PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &buf, PyBUF_SIMPLE) < 0) {
            PyErr_Clear(); /* not an entry this twin reads: the Python one says what it is */
            break;
        }
        long long payload = 0;
        int rc = add_entry(self, ledger_id, entry_id, buf.buf, buf.len, &l, &payload);
        PyBuffer_Release(&buf);
        if (rc < 0)
            return NULL;
        if (rc == 0)
            break;
        added += payload;
        self->payload_bytes += payload;
        i++;
    }
    return PyLong_FromSsize_t(i);
}

PyDoc_STRVAR(takes_doc,
"takes(entry, limits) -> bool\n\n"
"Whether add_entries would take this stored entry, by its metadata and publish time\n"
"(its checksum is not checked here).");

static PyObject *PackedRows_takes(PackedRows *self, PyObject *args)
{
    Py_buffer buf;
    PyObject *limits;
    Limits l;
    PlainEntry e;
    if (!PyArg_ParseTuple(args, "y*O", &buf, &limits))
        return NULL;
    int ok = limits_of(limits, &l);
    int takes = ok == 0 && parse_plain_entry(buf.buf, buf.len, 0, &e) == 0 && in_window(&l, e.publish_time);
    PyBuffer_Release(&buf);
    return ok < 0 ? NULL : PyBool_FromLong(takes);
}

PyDoc_STRVAR(take_doc,
"take() -> (rows, columns)\n\n"
"The rows appended so far, and start again empty.  ``columns`` maps each name\n"
"of COLUMNS to its Arrow buffers: ``(validity | None, null_count, values)`` for\n"
"a fixed-width column, ``(validity | None, null_count, offsets, data)`` for a\n"
"binary or string one, and for a map ``(validity | None, null_count, offsets,\n"
"keys, values)`` where keys and values are string columns' buffers.");

static PyObject *PackedRows_take(PackedRows *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *cols = PyDict_New();
    if (cols == NULL)
        return NULL;
    for (int c = 0; c < NCOLUMNS; c++) {
        Kind kind = COLUMN_SPECS[c].kind;
        PyObject *buffers;
        if (kind == MAP) {
            PyObject *validity = self->col[c].nulls ? bytes_of(&self->col[c].valid) : Py_NewRef(Py_None);
            buffers = Py_BuildValue("(NnNNN)", validity, self->col[c].nulls, bytes_of(&self->col[c].values),
                                    buffers_of(&self->map_keys, 1), buffers_of(&self->map_values, 1));
        } else
            buffers = buffers_of(&self->col[c], kind == STRING || kind == BINARY);
        if (buffers == NULL || PyDict_SetItemString(cols, COLUMN_SPECS[c].name, buffers) < 0) {
            Py_XDECREF(buffers);
            Py_DECREF(cols);
            return NULL;
        }
        Py_DECREF(buffers);
    }
    PyObject *out = Py_BuildValue("(nN)", self->rows, cols);
    if (out == NULL || packed_start(self) < 0) { /* the buffers keep their room for the next rows */
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *PackedRows_get_rows(PackedRows *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->rows);
}

static PyObject *PackedRows_get_payload_bytes(PackedRows *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->payload_bytes);
}

static PyMethodDef PackedRows_methods[] = {
    {"add_batch", (PyCFunction)PackedRows_add_batch, METH_VARARGS, add_batch_doc},
    {"add_entries", (PyCFunction)PackedRows_add_entries, METH_VARARGS, add_entries_doc},
    {"takes", (PyCFunction)PackedRows_takes, METH_VARARGS, takes_doc},
    {"take", (PyCFunction)PackedRows_take, METH_NOARGS, take_doc},
    {NULL},
};

static PyGetSetDef PackedRows_getset[] = {
    {"rows", (getter)PackedRows_get_rows, NULL, "rows appended since the last take()", NULL},
    {"payload_bytes", (getter)PackedRows_get_payload_bytes, NULL,
     "payload bytes of the messages appended since the last take()", NULL},
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
    .m_doc = "The C twin of the Pulsar batch splitter: a batch's messages appended straight to Arrow-layout "
             "column buffers.",
    .m_size = -1,
};

/* COLUMNS: ((name, kind, made_by), ...) in the row's order. */
static PyObject *columns_table(void)
{
    PyObject *out = PyTuple_New(NCOLUMNS);
    if (out == NULL)
        return NULL;
    for (int c = 0; c < NCOLUMNS; c++) {
        PyObject *item = Py_BuildValue("(sss)", COLUMN_SPECS[c].name, KIND_NAMES[COLUMN_SPECS[c].kind],
                                       MADE_BY_NAMES[COLUMN_SPECS[c].made_by]);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, c, item);
    }
    return out;
}

PyMODINIT_FUNC PyInit__packed(void)
{
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) { /* Arrow's buffers are little-endian: the Python twin splits here */
        PyErr_SetString(PyExc_ImportError, "bkctl.wire.pulsar._packed needs a little-endian machine");
        return NULL;
    }
    if (PyType_Ready(&PackedRowsType) < 0)
        return NULL;
    plain_entry_init();
    PyObject *m = PyModule_Create(&packed_module);
    if (m == NULL)
        return NULL;
    PyObject *table = columns_table();
    int failed = table == NULL || PyModule_AddObjectRef(m, "PackedRows", (PyObject *)&PackedRowsType) < 0 ||
                 PyModule_AddObjectRef(m, "COLUMNS", table) < 0;
    Py_XDECREF(table);
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
