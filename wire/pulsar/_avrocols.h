/*
 * What the two sources of bkctl.wire.pulsar._avrocols share: the plan's ops and the
 * columns they fill.  _avrocols_plan.c builds a Decoder's ops from the Python plan;
 * _avrocols.c reads Avro binary by them into the columns (both build one module).
 */
#ifndef BKCTL_AVROCOLS_H
#define BKCTL_AVROCOLS_H

#include <Python.h>

enum { OP_NUL, OP_FAIL, OP_BOOL, OP_INT, OP_LONG, OP_FLOAT, OP_DOUBLE, OP_BYTES, OP_STRING, OP_FIXED, OP_ENUM,
       OP_DEC_BYTES, OP_DEC_FIXED, OP_RECORD, OP_ARRAY, OP_MAP, OP_UNION, OP_COUNT };
enum { C_BOOL, C_I32, C_I64, C_F32, C_F64, C_BIN, C_DEC, C_STRUCT, C_LIST, C_MAP, C_COUNT };

/* A growable buffer in Arrow's layout. */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

/* A column: validity, values or offsets, and its children. */
typedef struct Col {
    int kind;
    Py_ssize_t len, nulls;
    Buf valid; /* bits, one per slot */
    Buf data;  /* values (bits for C_BOOL), or the bytes of C_BIN */
    Buf offs;  /* int32 offsets: C_BIN, C_LIST, C_MAP (starting with 0) */
    Py_ssize_t bits; /* C_BOOL: values appended */
    int nchild;
    int *child;
} Col;

typedef struct {
    PyObject_HEAD
    int ncols;
    Col *cols;
    PyObject *plans; /* the plans, kept alive: ops point into them */
    struct Op **slots;
    int nslots;
} Decoder;

typedef struct Op {
    int kind, col;
    Py_ssize_t size;
    int precision;
    int n;
    struct Op *sub; /* record fields, union branches, [item], [value] */
    int key_col;
    /* ENUM: the reader's symbols by writer index (NULL: fail) */
    const char **sym;
    Py_ssize_t *symlen;
    /* RECORD: defaults */
    int ndef;
    int *def_col;
    PyObject **def_val;
    int utf8;
} Op;

/* ``op`` from the plan tuple ``t`` (its columns checked against ``d``'s): 0, or -1 with an
 * exception set (a plan this decoder cannot read exactly as the general path would). */
int op_build(Decoder *d, Op *op, PyObject *t);

/* -1, with ValueError "bad Avro column plan: <why>" set. */
int bad_plan(const char *why);

/* What op_build allocated under ``op`` (not ``op`` itself). */
void op_free(Op *op);

#endif
