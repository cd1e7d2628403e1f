/*
 * What the two sources of bkctl.wire.client._addpath share: _addpath.c (the connection's
 * copies and their answer loop, and the module) adds the writer's side, _addpath_entries.c
 * (Entry, Entries, address_run, Acks), to the module it creates.
 */
#ifndef BKCTL_ADDPATH_H
#define BKCTL_ADDPATH_H

#include <Python.h>

/* Readies the writer's side's types and adds them and address_run to ``module``: 0, or -1
 * with an exception set. */
int addpath_entries_init(PyObject *module);

#endif
