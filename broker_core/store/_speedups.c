/*
 * Optional C versions of the store's hottest pure functions.
 *
 * broker_core/store/hashcode.py holds the reference implementations and falls back to
 * them when this module was not built (no compiler); tests check both agree.
 *
 *   java_hash_code(s: str) -> int
 *       Java's String.hashCode(): h = 31*h + unit over the UTF-16 code units of s,
 *       wrapped to a signed 32-bit int.  Code points above U+FFFF count as their two
 *       surrogate units, as in Java.
 *
 *   index_put_many(buf, slots, index_num, count, slot_count, begin_ts, items, start)
 *       -> (count, slot_count, next)
 *       The inner loop of IndexFile.put_items: for items[start:] = (topic, key, phy, ts)
 *       puts an entry for "topic#key" exactly as IndexFile.put_key does (see the layout
 *       in indexfile.py), until the file is full.  Returns the new indexCount and
 *       hashSlotCount and the position of the first item not put.  The header itself is
 *       left to the caller.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *
java_hash_code(PyObject *module, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "java_hash_code() wants str, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    uint32_t h = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            h = 31u * h + p[i];
        }
    }
    else {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c >= 0x10000) {
                c -= 0x10000;
                h = 31u * h + (0xD800u + (c >> 10));
                h = 31u * h + (0xDC00u + (c & 0x3FFu));
            }
            else {
                h = 31u * h + c;
            }
        }
    }
    return PyLong_FromLong((long)(int32_t)h);
}

static int
hash_str(PyObject *s, uint32_t *h)
{
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "index keys must be str");
        return -1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    uint32_t v = *h;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0x10000) {
            c -= 0x10000;
            v = 31u * v + (0xD800u + (c >> 10));
            v = 31u * v + (0xDC00u + (c & 0x3FFu));
        }
        else {
            v = 31u * v + c;
        }
    }
    *h = v;
    return 0;
}

static inline void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static inline uint32_t get_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static PyObject *
index_put_many(PyObject *module, PyObject *args)
{
    PyObject *buffer_obj, *items;
    long long slots, index_num, count, slot_count, begin_ts;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "OLLLLLOn", &buffer_obj, &slots, &index_num, &count, &slot_count, &begin_ts,
                          &items, &start)) {
        return NULL;
    }
    if (!PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "items must be a list");
        return NULL;
    }
    if (slots <= 0 || index_num <= 0) {
        PyErr_SetString(PyExc_ValueError, "slots and index_num must be positive");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(buffer_obj, &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    long long entries_pos = 40 + slots * 4;
    if (view.len < entries_pos + index_num * 20) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "buffer is smaller than the index file layout");
        return NULL;
    }
    unsigned char *base = (unsigned char *)view.buf;
    Py_ssize_t n = PyList_GET_SIZE(items);
    Py_ssize_t i = start;
    for (; i < n && count < index_num; i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_TypeError, "items must be (topic, key, phy, ts) tuples");
            return NULL;
        }
        uint32_t h = 0;
        if (hash_str(PyTuple_GET_ITEM(item, 0), &h) < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
        h = 31u * h + (uint32_t)'#';
        if (hash_str(PyTuple_GET_ITEM(item, 1), &h) < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
        long long phy = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2));
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 3));
        if (PyErr_Occurred()) {
            PyBuffer_Release(&view);
            return NULL;
        }
        int32_t signed_h = (int32_t)h;
        uint32_t key_hash = signed_h == INT32_MIN ? 0u : (uint32_t)(signed_h < 0 ? -signed_h : signed_h);
        unsigned char *slot = base + 40 + (long long)(key_hash % (uint64_t)slots) * 4;
        int32_t prev = (int32_t)get_be32(slot);
        if (prev <= 0 || prev >= count) {
            if (prev == 0) {
                slot_count++;
            }
            prev = 0;
        }
        long long diff = (ts - begin_ts) / 1000;
        if (ts < begin_ts) {
            diff = 0;
        }
        else if (diff > INT32_MAX) {
            diff = INT32_MAX;
        }
        unsigned char *entry = base + entries_pos + count * 20;
        put_be32(entry, key_hash);
        put_be32(entry + 4, (uint32_t)((uint64_t)phy >> 32));
        put_be32(entry + 8, (uint32_t)phy);
        put_be32(entry + 12, (uint32_t)diff);
        put_be32(entry + 16, (uint32_t)prev);
        put_be32(slot, (uint32_t)count);
        count++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("LLn", count, slot_count, i);
}

static PyMethodDef speedups_methods[] = {
    {"java_hash_code", java_hash_code, METH_O, "Java String.hashCode() of a str, as a signed 32-bit int."},
    {"index_put_many", index_put_many, METH_VARARGS, "Put (topic, key, phy, ts) items into an index file buffer."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "broker_core.store._speedups", "C versions of hot store functions.", -1, speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&speedups_module);
}
