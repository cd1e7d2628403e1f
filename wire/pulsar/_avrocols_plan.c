/*
 * bkctl.wire.pulsar._avrocols, its plan: a Decoder's ops built from the plan tuples
 * bkctl.wire.pulsar.avro_plan makes, each checked against the columns (the reading is
 * _avrocols.c's; both build one extension module).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_avrocols.h"

/* ------------------------------------------------------------ building a plan */

void op_free(Op *op)
{
    if (op->sub) {
        for (int i = 0; i < op->n; i++)
            op_free(&op->sub[i]);
        PyMem_Free(op->sub);
    }
    PyMem_Free(op->sym);
    PyMem_Free(op->symlen);
    PyMem_Free(op->def_col);
    PyMem_Free(op->def_val);
}

int bad_plan(const char *why)
{
    PyErr_Format(PyExc_ValueError, "bad Avro column plan: %s", why);
    return -1;
}

int op_build(Decoder *d, Op *op, PyObject *t)
{
    memset(op, 0, sizeof(*op));
    int kind, col;
    PyObject *arg;
    if (!PyTuple_Check(t) || !PyArg_ParseTuple(t, "iiO", &kind, &col, &arg))
        return PyErr_Occurred() ? -1 : bad_plan("a plan is (kind, column, arg)");
    if (kind < 0 || kind >= OP_COUNT || col < -1 || col >= d->ncols)
        return bad_plan("kind or column out of range");
    op->kind = kind;
    op->col = col;
    switch (kind) {
    case OP_STRING:
        op->utf8 = PyObject_IsTrue(arg);
        break;
    case OP_FIXED:
        op->size = PyLong_AsSsize_t(arg);
        if (op->size < 0)
            return PyErr_Occurred() ? -1 : bad_plan("fixed size");
        break;
    case OP_DEC_BYTES:
        op->precision = (int)PyLong_AsLong(arg);
        break;
    case OP_DEC_FIXED:
        if (!PyArg_ParseTuple(arg, "ni", &op->size, &op->precision))
            return -1;
        break;
    case OP_ENUM: {
        if (!PyTuple_Check(arg))
            return bad_plan("enum symbols");
        op->n = (int)PyTuple_GET_SIZE(arg);
        op->sym = PyMem_Calloc(op->n + 1, sizeof(char *));
        op->symlen = PyMem_Calloc(op->n + 1, sizeof(Py_ssize_t));
        if (!op->sym || !op->symlen)
            return PyErr_NoMemory(), -1;
        for (int i = 0; i < op->n; i++) {
            PyObject *s = PyTuple_GET_ITEM(arg, i);
            if (s == Py_None)
                continue;
            if (!PyBytes_Check(s))
                return bad_plan("enum symbol");
            op->sym[i] = PyBytes_AS_STRING(s);
            op->symlen[i] = PyBytes_GET_SIZE(s);
        }
        break;
    }
    case OP_RECORD: case OP_UNION: case OP_ARRAY: case OP_MAP: {
        PyObject *subs = arg, *defs = NULL;
        if (kind == OP_RECORD) {
            if (!PyArg_ParseTuple(arg, "O!O!", &PyTuple_Type, &subs, &PyTuple_Type, &defs))
                return -1;
        } else if (kind == OP_MAP) {
            PyObject *value;
            if (!PyArg_ParseTuple(arg, "iO", &op->key_col, &value))
                return -1;
            if (op->key_col < 0 || op->key_col >= d->ncols)
                return bad_plan("map key column");
            subs = NULL;
            op->n = 1;
            op->sub = PyMem_Calloc(1, sizeof(Op));
            if (!op->sub)
                return PyErr_NoMemory(), -1;
            if (op_build(d, &op->sub[0], value) < 0)
                return -1;
        } else if (kind == OP_ARRAY) {
            op->n = 1;
            op->sub = PyMem_Calloc(1, sizeof(Op));
            if (!op->sub)
                return PyErr_NoMemory(), -1;
            if (op_build(d, &op->sub[0], arg) < 0)
                return -1;
            subs = NULL;
        }
        if (subs != NULL) {
            if (!PyTuple_Check(subs))
                return bad_plan("sub-plans");
            op->n = (int)PyTuple_GET_SIZE(subs);
            op->sub = PyMem_Calloc(op->n + 1, sizeof(Op));
            if (!op->sub)
                return PyErr_NoMemory(), -1;
            for (int i = 0; i < op->n; i++)
                if (op_build(d, &op->sub[i], PyTuple_GET_ITEM(subs, i)) < 0)
                    return -1;
        }
        if (defs != NULL) {
            op->ndef = (int)PyTuple_GET_SIZE(defs);
            op->def_col = PyMem_Calloc(op->ndef + 1, sizeof(int));
            op->def_val = PyMem_Calloc(op->ndef + 1, sizeof(PyObject *));
            if (!op->def_col || !op->def_val)
                return PyErr_NoMemory(), -1;
            for (int i = 0; i < op->ndef; i++) {
                PyObject *pair = PyTuple_GET_ITEM(defs, i), *v;
                if (!PyArg_ParseTuple(pair, "iO", &op->def_col[i], &v))
                    return -1;
                if (op->def_col[i] < 0 || op->def_col[i] >= d->ncols)
                    return bad_plan("default column");
                int k = d->cols[op->def_col[i]].kind;
                int fits = v == Py_None || (k == C_BOOL && PyBool_Check(v)) ||
                           ((k == C_I32 || k == C_I64) && PyLong_Check(v)) ||
                           ((k == C_F32 || k == C_F64) && PyFloat_Check(v)) || (k == C_BIN && PyBytes_Check(v)) ||
                           ((k == C_LIST || k == C_MAP) && PyTuple_Check(v) && PyTuple_GET_SIZE(v) == 0);
                if (!fits)
                    return bad_plan("a default that does not fit its column");
                op->def_val[i] = v; /* borrowed: the plans are kept */
            }
        }
        break;
    }
    }
    return 0;
}
