/*
 * What the two sources of bkctl.wire.pulsar._packed share: _packed_single.c reads a
 * SingleMessageMetadata (and checks UTF-8) for _packed.c, which appends the row.
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

/* Strict UTF-8, as Python's decoder and Arrow's string type want it: 1 or 0. */
int utf8_valid(const unsigned char *s, Py_ssize_t n);

/* The SingleMessageMetadata of p[0:n] into *m: 0, or -1 for anything Python's protobuf would
 * read otherwise (the Python twin then says what is wrong). */
int parse_single(const unsigned char *p, Py_ssize_t n, Single *m);

#endif
