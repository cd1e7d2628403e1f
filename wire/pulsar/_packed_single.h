/*
 * What the sources of bkctl.wire.pulsar._packed share: _packed_single.c reads a
 * SingleMessageMetadata (and checks UTF-8), _packed_entry.c a whole stored entry of a plain
 * message or batch (framing, checksum, MessageMetadata) and add_entries' limits, for _packed.c,
 * which appends the rows (into _packed_arrow.h's column buffers).
 */
#ifndef BKCTL_PACKED_SINGLE_H
#define BKCTL_PACKED_SINGLE_H

#include <Python.h>
#include <stdint.h>

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
    int key_b64;
    /* only the first nprops are set: parse_single clears the fields above, not these */
    Slice props_key[MAX_PROPERTIES];
    Slice props_value[MAX_PROPERTIES];
} Single;

/* A protobuf message being read: the next byte and the end. */
typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Reader;

/* Protobuf's pieces (0, or -1 when truncated or not what protobuf reads quietly). */
int read_varint(Reader *r, uint64_t *out);
int skip_field(Reader *r, unsigned wire_type);
int read_bytes(Reader *r, const unsigned char **p, Py_ssize_t *n);
/* A KeyValue {required string key = 1; required string value = 2;}, both UTF-8. */
int parse_property(const unsigned char *p, Py_ssize_t n, Slice *key, Slice *value);

/* A stored entry of a plain message or batch (rows.plain_entry's rule in Python): the broker's
 * metadata, the producer's MessageMetadata as far as the row needs it, the payload. */
typedef struct {
    Slice producer_name;
    uint64_t sequence_id;
    uint64_t publish_time;
    int has_replicated_from;
    Slice replicated_from;
    int has_schema_version;
    Slice schema_version;
    int has_deliver_at_time;
    int64_t deliver_at_time;
    int has_broker_timestamp;
    uint64_t broker_timestamp;
    int has_index;
    uint64_t index;
    int is_batch;
    int32_t count;           /* num_messages_in_batch */
    Single message;          /* a single message's own fields (MessageMetadata's, same rules) */
    const unsigned char *payload;
    Py_ssize_t payload_n;
} PlainEntry;

/* Prepares the checksum (once, at the module's import). */
void plain_entry_init(void);

/* The entry p[0:n] into *e: 0 when it is a plain message or batch whose metadata and
 * checksum (when ``verify``) are good; -1 for anything else (the Python twin takes it). */
int parse_plain_entry(const unsigned char *p, Py_ssize_t n, int verify, PlainEntry *e);

/* add_entries' limits (rows.PlainLimits): the checksum checked, the publish-time window, and
 * when to stop (rows and payload bytes appended by the call). */
typedef struct {
    int verify, has_from, has_to;
    long long from_ms, to_ms, rows, payload_bytes;
} Limits;

/* A rows.PlainLimits tuple into *l: 0, or -1 with an exception set. */
int limits_of(PyObject *t, Limits *l);

/* Whether an entry's rows are in the publish-time window (its time fits an int64: checked). */
static inline int in_window(const Limits *l, uint64_t publish_ms)
{
    long long t = (long long)publish_ms;
    return !((l->has_from && t < l->from_ms) || (l->has_to && t >= l->to_ms));
}

/* Strict UTF-8, as Python's decoder and Arrow's string type want it: 1 or 0. */
int utf8_valid(const unsigned char *s, Py_ssize_t n);

/* The SingleMessageMetadata of p[0:n] into *m: 0, or -1 for anything Python's protobuf would
 * read otherwise (the Python twin then says what is wrong). */
int parse_single(const unsigned char *p, Py_ssize_t n, Single *m);

#endif
