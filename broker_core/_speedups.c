/*
 * Optional C versions of the hottest pure functions of the record codec, the store and the
 * remoting frame decoder.
 *
 * broker_core/model/hashcode.py and broker_core/model/message.py hold the reference
 * implementations and fall back to them when this module was not built (no compiler);
 * tests check both agree.  It sits at the top of broker_core, below both the store and
 * the clients, which both import it.
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
 *
 *   write_records(buf, pos, base_phys, store_ts, store_host, msgs, queue_offsets) -> end
 *       The inner loop of CommitLog.append_batch for IPv4 hosts: writes each prepared
 *       MessageInner (msg._prepared = (size, crc, sysflag, tail)) as a record at pos,
 *       back to back, with its queue offset, physical offset base_phys + position and
 *       store_ts (layout in message.py).  Returns the position after the last record.
 *
 *   batch_items(encoded, max_body) -> (list[(item_offset, body_len, props_len, flag)], largest)
 *       Splits a producer's encoded batch (RocketMQ MessageBatch: items of TOTALSIZE,
 *       MAGICCODE, BODYCRC, FLAG, BODYLEN, BODY, PROPLEN, PROPERTIES) and validates every
 *       length; raises ValueError naming the bad item.  largest = max(body + properties).
 *
 *   write_batch(buf, pos, base_phys, store_ts, store_host, born_host, born_ts, sys_flag,
 *               queue_id, first_queue_offset, topic_field, encoded, items, crc32)
 *       -> (end, consume_queue_entries: bytes, offsets: tuple, index_items: list)
 *       Writes each item of an encoded batch as its own record (consecutive queue
 *       offsets), computing body CRCs with the given crc32 function, and returns what
 *       the dispatcher needs: the batch's 20-byte consume-queue entries, packed, each
 *       record's commit-log offset, and its index items (topic, key, phy, ts): the
 *       UNIQ_KEY, then each distinct non-empty word of KEYS (as indexfile.record_items).
 *
 *   scan_records(buf, pos, limit, base_phys, delay_topic, delay_levels) -> (end, runs, index_items)
 *       A slave's dispatch of the records its master's bytes completed (store/replica.py):
 *       walks whole records from pos while each is a valid record that names its own
 *       offset (base_phys + position) and ends before limit, and returns where it stopped,
 *       the records grouped into runs of consecutive records of one queue, each run
 *       (topic, queue_id, first_queue_offset, count, consume_queue_entries, first_phys,
 *       end_phys, last_store_ts), and the index items of all of them (as write_batch
 *       does).  Half and rollback messages take no consume-queue slot: each is a run of
 *       count 0.  In delay_topic the entry's tags code is the due time, store_ts +
 *       delay_levels[min(queue_id, len - 1)] (dispatcher.queue_tags_code).
 *
 *   decode_records(buf, cls=None, with_body=True, pos=0, max_count=-1) -> (records, error)
 *       Decodes up to max_count (all when -1) records laid back to back in buf from pos,
 *       exactly as message.py_decode_record does, field for field: each record is a tuple
 *       of MessageExt's fields in order or, given cls (a slots class such as MessageExt), an
 *       instance of cls whose slots are filled directly (its __init__ is not called).
 *       Stops at the first bad record: error is None when every record decoded, else
 *       (pos, message) with the RecordFormatError message py_decode_record raises there.
 *
 *   decode_command(buf, start, end, cls) -> cls instance | None
 *       The frame in buf[start:end] (after its total-length prefix) as command._decode
 *       decodes it, when its header is JSON in the usual shape: cls(code, language,
 *       version, opaque, flag, remark, ext_fields, body).  None hands it to the Python
 *       decoder (see that section below for what is taken here).
 *
 *   Syncer: the SYNC_FLUSH group commit's msync worker thread (in _syncer.c, Linux only).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef _WIN32
#include <ws2tcpip.h>
#ifdef _MSC_VER
#pragma comment(lib, "ws2_32.lib") /* inet_ntop */
#endif
#else
#include <arpa/inet.h>
#include <sys/socket.h>
#endif

/* Fold the UTF-16 code units of str s into h (h = 31*h + unit), as Java's hashCode does.
   Code points above U+FFFF count as their two surrogate units. */
static int
hash_str(PyObject *s, uint32_t *h)
{
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "expected str, not %.100s", Py_TYPE(s)->tp_name);
        return -1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    uint32_t v = *h;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (Py_ssize_t i = 0; i < n; i++) {
            v = 31u * v + p[i];
        }
    }
    else {
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
    }
    *h = v;
    return 0;
}

static PyObject *
java_hash_code(PyObject *module, PyObject *arg)
{
    uint32_t h = 0;
    if (hash_str(arg, &h) < 0) {
        return NULL;
    }
    return PyLong_FromLong((long)(int32_t)h);
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

static PyObject *s_prepared, *s_queue_id, *s_flag, *s_born_timestamp, *s_born_host, *s_reconsume_times,
    *s_prepared_transaction_offset, *s_body;

static inline void put_be64(unsigned char *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static int
attr_long(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    *out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *
write_records(PyObject *module, PyObject *args)
{
    PyObject *buffer_obj, *msgs, *queue_offsets;
    Py_ssize_t pos;
    long long base_phys, store_ts;
    Py_buffer host;
    if (!PyArg_ParseTuple(args, "OnLLy*OO", &buffer_obj, &pos, &base_phys, &store_ts, &host, &msgs,
                          &queue_offsets)) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_buffer view;
    view.obj = NULL;
    if (host.len != 8) {
        PyErr_SetString(PyExc_ValueError, "write_records handles IPv4 store hosts only");
        goto done;
    }
    if (!PyList_Check(msgs) || !PyList_Check(queue_offsets) || PyList_GET_SIZE(msgs) != PyList_GET_SIZE(queue_offsets)) {
        PyErr_SetString(PyExc_TypeError, "msgs and queue_offsets must be lists of the same length");
        goto done;
    }
    if (PyObject_GetBuffer(buffer_obj, &view, PyBUF_WRITABLE) < 0) {
        view.obj = NULL;
        goto done;
    }
    unsigned char *base = (unsigned char *)view.buf;
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *msg = PyList_GET_ITEM(msgs, i);
        PyObject *prepared = PyObject_GetAttr(msg, s_prepared);
        if (prepared == NULL) {
            goto done;
        }
        if (!PyTuple_Check(prepared) || PyTuple_GET_SIZE(prepared) != 4) {
            Py_DECREF(prepared);
            PyErr_SetString(PyExc_ValueError, "message is not prepared");
            goto done;
        }
        long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(prepared, 0));
        long long crc = PyLong_AsLongLong(PyTuple_GET_ITEM(prepared, 1));
        long long sys_flag = PyLong_AsLongLong(PyTuple_GET_ITEM(prepared, 2));
        PyObject *tail = PyTuple_GET_ITEM(prepared, 3);
        long long queue_id, flag, born_ts, reconsume, prepared_offset;
        long long queue_offset = PyLong_AsLongLong(PyList_GET_ITEM(queue_offsets, i));
        if (PyErr_Occurred() || !PyBytes_Check(tail) || attr_long(msg, s_queue_id, &queue_id) < 0 ||
            attr_long(msg, s_flag, &flag) < 0 || attr_long(msg, s_born_timestamp, &born_ts) < 0 ||
            attr_long(msg, s_reconsume_times, &reconsume) < 0 ||
            attr_long(msg, s_prepared_transaction_offset, &prepared_offset) < 0) {
            Py_DECREF(prepared);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "bad prepared message");
            }
            goto done;
        }
        PyObject *born = PyObject_GetAttr(msg, s_born_host);
        PyObject *body = born ? PyObject_GetAttr(msg, s_body) : NULL;
        if (body == NULL || !PyBytes_Check(born) || PyBytes_GET_SIZE(born) != 8 || !PyBytes_Check(body)) {
            Py_XDECREF(born);
            Py_XDECREF(body);
            Py_DECREF(prepared);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "write_records handles bytes bodies and IPv4 born hosts only");
            }
            goto done;
        }
        Py_ssize_t body_len = PyBytes_GET_SIZE(body);
        Py_ssize_t tail_len = PyBytes_GET_SIZE(tail);
        if (size != 88 + body_len + tail_len || pos + size > view.len) {
            Py_DECREF(born);
            Py_DECREF(body);
            Py_DECREF(prepared);
            PyErr_SetString(PyExc_ValueError, "record does not match its prepared size or overruns the buffer");
            goto done;
        }
        unsigned char *p = base + pos;
        put_be32(p, (uint32_t)size);
        put_be32(p + 4, 0xDAA320A7u);
        put_be32(p + 8, (uint32_t)crc);
        put_be32(p + 12, (uint32_t)queue_id);
        put_be32(p + 16, (uint32_t)flag);
        put_be64(p + 20, (uint64_t)queue_offset);
        put_be64(p + 28, (uint64_t)(base_phys + pos));
        put_be32(p + 36, (uint32_t)sys_flag);
        put_be64(p + 40, (uint64_t)born_ts);
        memcpy(p + 48, PyBytes_AS_STRING(born), 8);
        put_be64(p + 56, (uint64_t)store_ts);
        memcpy(p + 64, host.buf, 8);
        put_be32(p + 72, (uint32_t)reconsume);
        put_be64(p + 76, (uint64_t)prepared_offset);
        put_be32(p + 84, (uint32_t)body_len);
        memcpy(p + 88, PyBytes_AS_STRING(body), (size_t)body_len);
        memcpy(p + 88 + body_len, PyBytes_AS_STRING(tail), (size_t)tail_len);
        pos += (Py_ssize_t)size;
        Py_DECREF(born);
        Py_DECREF(body);
        Py_DECREF(prepared);
    }
    result = PyLong_FromSsize_t(pos);
done:
    if (view.obj != NULL) {
        PyBuffer_Release(&view);
    }
    PyBuffer_Release(&host);
    return result;
}

static PyObject *
batch_items(PyObject *module, PyObject *args)
{
    Py_buffer enc;
    long long max_body;
    if (!PyArg_ParseTuple(args, "y*L", &enc, &max_body)) {
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)enc.buf;
    Py_ssize_t len = enc.len, at = 0, index = 0;
    long long largest = 0;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&enc);
        return NULL;
    }
    while (at < len) {
        if (len - at < 22) {
            PyErr_Format(PyExc_ValueError, "batch item %zd at byte %zd is truncated (%zd bytes left)", index, at, len - at);
            goto fail;
        }
        int32_t total = (int32_t)get_be32(p + at);
        int32_t flag = (int32_t)get_be32(p + at + 12);
        int32_t body_len = (int32_t)get_be32(p + at + 16);
        if (body_len < 0 || total < 22 || (Py_ssize_t)total > len - at || body_len > total - 22) {
            PyErr_Format(PyExc_ValueError, "batch item %zd at byte %zd has inconsistent sizes (total %d, body %d)",
                         index, at, (int)total, (int)body_len);
            goto fail;
        }
        int props_len = (int)((p[at + 20 + body_len] << 8) | p[at + 21 + body_len]);
        if (props_len > 32767 || 20 + body_len + 2 + props_len != total) {
            PyErr_Format(PyExc_ValueError, "batch item %zd at byte %zd: properties length %d does not fit its size %d",
                         index, at, props_len, (int)total);
            goto fail;
        }
        if (body_len == 0) {
            PyErr_Format(PyExc_ValueError, "batch item %zd has an empty body", index);
            goto fail;
        }
        if (body_len > max_body) {
            PyErr_Format(PyExc_ValueError, "batch item %zd body is %d bytes; maxMessageSize is %lld", index, (int)body_len,
                         max_body);
            goto fail;
        }
        PyObject *item = Py_BuildValue("(niii)", at, (int)body_len, props_len, (int)flag);
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            goto fail;
        }
        Py_DECREF(item);
        if ((long long)body_len + props_len > largest) {
            largest = (long long)body_len + props_len;
        }
        at += total;
        index++;
    }
    PyBuffer_Release(&enc);
    return Py_BuildValue("(NL)", out, largest);
fail:
    Py_DECREF(out);
    PyBuffer_Release(&enc);
    return NULL;
}

/* Find NAME\x01value\x02 in properties; return a new str for the value, or None.
   The last occurrence wins, as in message.decode_properties (and Java). */
static PyObject *
prop_value(const unsigned char *props, Py_ssize_t len, const char *name, Py_ssize_t name_len)
{
    Py_ssize_t at = 0;
    const unsigned char *found = NULL;
    Py_ssize_t found_len = 0;
    while (at < len) {
        Py_ssize_t end = at;
        while (end < len && props[end] != 2) {
            end++;
        }
        if (end - at > name_len && memcmp(props + at, name, (size_t)name_len) == 0 && props[at + name_len] == 1) {
            const unsigned char *v = props + at + name_len + 1;
            Py_ssize_t vlen = end - at - name_len - 1;
            if (memchr(v, 1, (size_t)vlen) == NULL) {
                found = v;
                found_len = vlen;
            }
        }
        at = end + 1;
    }
    if (found == NULL) {
        Py_RETURN_NONE;
    }
    return PyUnicode_DecodeUTF8((const char *)found, found_len, "replace");
}

/* indexfile.record_items: (topic, key, phys, ts) for the UNIQ_KEY, then for each distinct
   non-empty word of KEYS (split on space), appended to index_items; -1 on error. */
static int
add_index_items(PyObject *index_items, PyObject *topic, PyObject *uniq, PyObject *keys, PyObject *phys_obj,
                PyObject *ts_obj, PyObject *space)
{
    if (uniq != Py_None && PyUnicode_GET_LENGTH(uniq) > 0) {
        PyObject *it = PyTuple_Pack(4, topic, uniq, phys_obj, ts_obj);
        int failed = it == NULL || PyList_Append(index_items, it) < 0;
        Py_XDECREF(it);
        if (failed) {
            return -1;
        }
    }
    if (keys == Py_None || PyUnicode_GET_LENGTH(keys) == 0) {
        return 0;
    }
    PyObject *words = PyUnicode_Split(keys, space, -1);
    if (words == NULL) {
        return -1;
    }
    int failed = 0;
    Py_ssize_t nw = PyList_GET_SIZE(words);
    for (Py_ssize_t w = 0; w < nw && !failed; w++) {
        PyObject *word = PyList_GET_ITEM(words, w);
        if (PyUnicode_GET_LENGTH(word) == 0) {
            continue;
        }
        int seen = 0;
        for (Py_ssize_t v = 0; v < w && !seen; v++) {
            seen = PyUnicode_Compare(PyList_GET_ITEM(words, v), word) == 0;
        }
        if (seen) {
            continue;
        }
        PyObject *it = PyTuple_Pack(4, topic, word, phys_obj, ts_obj);
        failed = it == NULL || PyList_Append(index_items, it) < 0;
        Py_XDECREF(it);
    }
    Py_DECREF(words);
    return failed ? -1 : 0;
}

static PyObject *
write_batch(PyObject *module, PyObject *args)
{
    PyObject *buffer_obj, *items, *crc_func, *topic;
    Py_ssize_t pos;
    long long base_phys, store_ts, born_ts, sys_flag, queue_id, first_qoff;
    Py_buffer host, born, topic_field, enc;
    if (!PyArg_ParseTuple(args, "OnLLy*y*LLLLUy*y*OO", &buffer_obj, &pos, &base_phys, &store_ts, &host, &born, &born_ts,
                          &sys_flag, &queue_id, &first_qoff, &topic, &topic_field, &enc, &items, &crc_func)) {
        return NULL;
    }
    PyObject *out = NULL;
    Py_buffer view;
    view.obj = NULL;
    if (host.len != 8 || born.len != 8) {
        PyErr_SetString(PyExc_ValueError, "write_batch handles IPv4 hosts only");
        goto done;
    }
    if (!PyList_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "items must be a list");
        goto done;
    }
    if (PyObject_GetBuffer(buffer_obj, &view, PyBUF_WRITABLE) < 0) {
        view.obj = NULL;
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(items);
    PyObject *records = PyTuple_New(n);
    PyObject *cq = PyBytes_FromStringAndSize(NULL, n * 20);
    PyObject *index_items = PyList_New(0);
    PyObject *space = PyUnicode_FromString(" ");
    PyObject *ts_obj = PyLong_FromLongLong(store_ts);
    if (records == NULL || cq == NULL || index_items == NULL || space == NULL || ts_obj == NULL) {
        Py_XDECREF(records);
        Py_XDECREF(cq);
        Py_XDECREF(index_items);
        Py_XDECREF(space);
        Py_XDECREF(ts_obj);
        goto done;
    }
    unsigned char *cq_out = (unsigned char *)PyBytes_AS_STRING(cq);
    unsigned char *base = (unsigned char *)view.buf;
    const unsigned char *src = (const unsigned char *)enc.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at, body_len, props_len;
        int flag;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(items, i), "nnni", &at, &body_len, &props_len, &flag)) {
            goto fail_loop;
        }
        Py_ssize_t size = 88 + body_len + topic_field.len + 2 + props_len;
        if (pos + size > view.len || at + 22 + body_len + props_len > enc.len) {
            PyErr_SetString(PyExc_ValueError, "batch does not fit the buffer");
            goto fail_loop;
        }
        const unsigned char *body = src + at + 20;
        const unsigned char *props = body + body_len + 2;
        PyObject *body_view = PyMemoryView_FromMemory((char *)body, body_len, PyBUF_READ);
        PyObject *crc_obj = body_view ? PyObject_CallOneArg(crc_func, body_view) : NULL;
        Py_XDECREF(body_view);
        if (crc_obj == NULL) {
            goto fail_loop;
        }
        uint32_t crc = (uint32_t)PyLong_AsUnsignedLongMask(crc_obj) & 0x7FFFFFFFu;
        Py_DECREF(crc_obj);
        unsigned char *p = base + pos;
        put_be32(p, (uint32_t)size);
        put_be32(p + 4, 0xDAA320A7u);
        put_be32(p + 8, crc);
        put_be32(p + 12, (uint32_t)queue_id);
        put_be32(p + 16, (uint32_t)flag);
        put_be64(p + 20, (uint64_t)(first_qoff + i));
        put_be64(p + 28, (uint64_t)(base_phys + pos));
        put_be32(p + 36, (uint32_t)sys_flag);
        put_be64(p + 40, (uint64_t)born_ts);
        memcpy(p + 48, born.buf, 8);
        put_be64(p + 56, (uint64_t)store_ts);
        memcpy(p + 64, host.buf, 8);
        put_be32(p + 72, 0);
        put_be64(p + 76, 0);
        put_be32(p + 84, (uint32_t)body_len);
        memcpy(p + 88, body, (size_t)body_len);
        memcpy(p + 88 + body_len, topic_field.buf, (size_t)topic_field.len);
        unsigned char *pl = p + 88 + body_len + topic_field.len;
        pl[0] = (unsigned char)(props_len >> 8);
        pl[1] = (unsigned char)props_len;
        memcpy(pl + 2, props, (size_t)props_len);
        long long phys = base_phys + pos;
        pos += size;
        PyObject *tags = prop_value(props, props_len, "TAGS", 4);
        PyObject *uniq = tags ? prop_value(props, props_len, "UNIQ_KEY", 8) : NULL;
        PyObject *keys = uniq ? prop_value(props, props_len, "KEYS", 4) : NULL;
        long tags_code = 0;
        if (keys != NULL && tags != Py_None) {
            PyObject *h = java_hash_code(NULL, tags);
            if (h == NULL) {
                Py_CLEAR(keys);
            }
            else {
                tags_code = PyLong_AsLong(h);
                Py_DECREF(h);
            }
        }
        if (keys == NULL) {
            Py_XDECREF(tags);
            Py_XDECREF(uniq);
            goto fail_loop;
        }
        Py_DECREF(tags);
        unsigned char *e = cq_out + i * 20;
        put_be64(e, (uint64_t)phys);
        put_be32(e + 8, (uint32_t)size);
        put_be64(e + 12, (uint64_t)(int64_t)tags_code);
        PyObject *phys_obj = PyLong_FromLongLong(phys);
        if (phys_obj == NULL) {
            Py_DECREF(uniq);
            Py_DECREF(keys);
            goto fail_loop;
        }
        PyTuple_SET_ITEM(records, i, phys_obj);
        int failed = add_index_items(index_items, topic, uniq, keys, phys_obj, ts_obj, space) < 0;
        Py_DECREF(uniq);
        Py_DECREF(keys);
        if (failed) {
            goto fail_loop;
        }
    }
    out = Py_BuildValue("(nNNN)", pos, cq, records, index_items);
    Py_DECREF(space);
    Py_DECREF(ts_obj);
    goto done;
fail_loop:
    Py_DECREF(records);
    Py_DECREF(cq);
    Py_DECREF(index_items);
    Py_DECREF(space);
    Py_DECREF(ts_obj);
done:
    if (view.obj != NULL) {
        PyBuffer_Release(&view);
    }
    PyBuffer_Release(&host);
    PyBuffer_Release(&born);
    PyBuffer_Release(&topic_field);
    PyBuffer_Release(&enc);
    return out;
}

/* ---- decode_records: the consumer's record decoder (message.decode_record / iter_records) ---- */

#define MIN_RECORD_SIZE 92
#define RECORD_FIELDS 17
#define BORNHOST_V6_FLAG 0x10
#define STOREHOST_V6_FLAG 0x20

/* MessageExt's fields, in the order decode_records fills them (message.MessageExt). */
static const char *const record_field_names[RECORD_FIELDS] = {
    "store_size", "body_crc", "queue_id", "flag", "queue_offset", "commit_log_offset", "sys_flag",
    "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
    "prepared_transaction_offset", "body", "topic", "properties", "msg_id",
};

/* The class whose slots decode_records last filled, and each field's slot offset. */
static PyTypeObject *record_type = NULL;
static Py_ssize_t record_offsets[RECORD_FIELDS];

static inline uint64_t get_be64(const unsigned char *p)
{
    return ((uint64_t)get_be32(p) << 32) | (uint64_t)get_be32(p + 4);
}

/* Check that instances of cls keep every field in a writable object slot of their own
   (a slots dataclass such as MessageExt) and remember where: decode_records then fills
   new instances directly, without calling __init__. */
static int
use_record_type(PyTypeObject *cls)
{
    if (cls == record_type) {
        return 0;
    }
    Py_ssize_t offsets[RECORD_FIELDS];
    if (!PyType_Check(cls) || cls->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "cls must be a class with slots for the record fields");
        return -1;
    }
    for (int i = 0; i < RECORD_FIELDS; i++) {
        PyObject *descr = PyObject_GetAttrString((PyObject *)cls, record_field_names[i]);
        if (descr == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                return -1;
            }
            PyErr_Clear();
        }
        int ok = descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX &&
                 !(((PyMemberDescrObject *)descr)->d_member->flags & READONLY) &&
                 PyType_IsSubtype(cls, PyDescr_TYPE(descr));
        if (ok) {
            offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        }
        Py_XDECREF(descr);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%.100s.%s is not a writable object slot", cls->tp_name,
                         record_field_names[i]);
            return -1;
        }
    }
    memcpy(record_offsets, offsets, sizeof offsets);
    Py_INCREF(cls);
    Py_XSETREF(record_type, cls);
    return 0;
}

/* The last host decoded for one role (born / store): hosts repeat from record to record. */
typedef struct {
    unsigned char raw[20];
    Py_ssize_t len;
    PyObject *text;
} host_cache;

static host_cache born_cache, store_cache;

/* message.decode_host: 8 bytes -> "a.b.c.d:port", 20 bytes -> "[v6]:port" (inet_ntop's text,
   as socket.inet_ntop gives it; the port is a signed 32-bit int). */
static PyObject *
decode_host_text(const unsigned char *raw, Py_ssize_t len, host_cache *cache)
{
    if (cache->text != NULL && cache->len == len && memcmp(cache->raw, raw, (size_t)len) == 0) {
        return Py_NewRef(cache->text);
    }
    char ip[INET6_ADDRSTRLEN];
    char out[INET6_ADDRSTRLEN + 16];
    int port = (int)(int32_t)get_be32(raw + len - 4);
    int n;
    if (inet_ntop(len == 8 ? AF_INET : AF_INET6, raw, ip, sizeof ip) == NULL) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (len == 8) {
        n = snprintf(out, sizeof out, "%s:%d", ip, port);
    }
    else {
        n = snprintf(out, sizeof out, "[%s]:%d", ip, port);
    }
    PyObject *text = PyUnicode_DecodeASCII(out, n, NULL);
    if (text == NULL) {
        return NULL;
    }
    memcpy(cache->raw, raw, (size_t)len);
    cache->len = len;
    Py_XSETREF(cache->text, Py_NewRef(text));
    return text;
}

/* Short strings decoded from the same bytes over and over (topics, property names). */
#define TEXT_CACHE_SIZE 32
#define TEXT_CACHE_MAX_LEN 48
typedef struct {
    Py_ssize_t len;
    unsigned char raw[TEXT_CACHE_MAX_LEN];
    PyObject *text;
} text_entry;

static text_entry text_cache[TEXT_CACHE_SIZE];
static unsigned text_cache_next;

/* bytes.decode("utf-8", errors="replace"), cached for short strings. */
static PyObject *
cached_text(const unsigned char *raw, Py_ssize_t len)
{
    if (len > TEXT_CACHE_MAX_LEN || len == 0) {
        return PyUnicode_DecodeUTF8((const char *)raw, len, "replace");
    }
    for (int i = 0; i < TEXT_CACHE_SIZE; i++) {
        text_entry *e = &text_cache[i];
        if (e->len == len && e->text != NULL && memcmp(e->raw, raw, (size_t)len) == 0) {
            return Py_NewRef(e->text);
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)raw, len, "replace");
    if (text == NULL) {
        return NULL;
    }
    if (PyUnicode_IS_ASCII(text)) {
        /* Compute and keep the hash once: these strings end up as dict keys. */
        if (PyObject_Hash(text) == -1) {
            Py_DECREF(text);
            return NULL;
        }
        text_entry *e = &text_cache[text_cache_next++ % TEXT_CACHE_SIZE];
        e->len = len;
        memcpy(e->raw, raw, (size_t)len);
        Py_XSETREF(e->text, Py_NewRef(text));
    }
    return text;
}

/* message.decode_properties: name\x01value\x02 pairs; a pair counts when it has a separator,
   a non-empty name and no second separator, and the last value for a name wins.  (Splitting
   the bytes first and decoding each piece gives what decoding first and splitting gives:
   \x01 and \x02 are never part of a UTF-8 sequence, valid or replaced.) */
static PyObject *
decode_props(const unsigned char *p, Py_ssize_t len)
{
    PyObject *dict = PyDict_New();
    if (dict == NULL) {
        return NULL;
    }
    Py_ssize_t at = 0;
    while (at < len) {
        const unsigned char *pair = p + at;
        const unsigned char *stop = memchr(pair, 2, (size_t)(len - at));
        Py_ssize_t pair_len = stop ? stop - pair : len - at;
        at += pair_len + 1;
        const unsigned char *sep = memchr(pair, 1, (size_t)pair_len);
        if (sep == NULL || sep == pair) {
            continue;
        }
        const unsigned char *value = sep + 1;
        Py_ssize_t value_len = pair + pair_len - value;
        if (memchr(value, 1, (size_t)value_len) != NULL) {
            continue;
        }
        PyObject *name_obj = cached_text(pair, sep - pair);
        if (name_obj == NULL) {
            Py_DECREF(dict);
            return NULL;
        }
        PyObject *value_obj = PyUnicode_DecodeUTF8((const char *)value, value_len, "replace");
        if (value_obj == NULL || PyDict_SetItem(dict, name_obj, value_obj) < 0) {
            Py_DECREF(name_obj);
            Py_XDECREF(value_obj);
            Py_DECREF(dict);
            return NULL;
        }
        Py_DECREF(name_obj);
        Py_DECREF(value_obj);
    }
    return dict;
}

/* create_message_id: the store host's bytes and the physical offset's, as upper-case hex. */
static PyObject *
message_id(const unsigned char *host, Py_ssize_t host_len, const unsigned char *phys)
{
    static const char hex[] = "0123456789ABCDEF";
    PyObject *id = PyUnicode_New((host_len + 8) * 2, 127);
    if (id == NULL) {
        return NULL;
    }
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(id);
    for (Py_ssize_t i = 0; i < host_len; i++) {
        *out++ = (Py_UCS1)hex[host[i] >> 4];
        *out++ = (Py_UCS1)hex[host[i] & 15];
    }
    for (int i = 0; i < 8; i++) {
        *out++ = (Py_UCS1)hex[phys[i] >> 4];
        *out++ = (Py_UCS1)hex[phys[i] & 15];
    }
    return id;
}

/* Outcomes of decode_one. */
#define DECODED 0
#define BAD_RECORD 1 /* *error holds the RecordFormatError message */

static PyObject *
format_error(const char *fmt, ...)
{
    char text[160];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    return PyUnicode_FromString(text);
}

/* Decode the record at base[pos:] exactly as message.py_decode_record does: the same checks
   in the same order, with the same messages.  Returns DECODED (*out: a new tuple or cls
   instance, *size: its TOTALSIZE), BAD_RECORD, or -1 with an exception set. */
static int
decode_one(const unsigned char *base, Py_ssize_t len, Py_ssize_t pos, int with_body, PyTypeObject *cls,
           const Py_ssize_t *offsets, PyObject **out, Py_ssize_t *size, PyObject **error)
{
    Py_ssize_t left = len - pos;
    if (left < MIN_RECORD_SIZE) {
        *error = format_error("only %zd bytes left at %zd: too short for a record", left, pos);
        return *error ? BAD_RECORD : -1;
    }
    const unsigned char *r = base + pos;
    int32_t total = (int32_t)get_be32(r);
    uint32_t magic = get_be32(r + 4);
    if (magic != 0xDAA320A7u) {
        *error = format_error("bad magic code 0x%08X at %zd", (unsigned)magic, pos);
        return *error ? BAD_RECORD : -1;
    }
    if (total < MIN_RECORD_SIZE || (Py_ssize_t)total > left) {
        *error = format_error("record size %d at %zd does not fit the %zd bytes left", (int)total, pos, left);
        return *error ? BAD_RECORD : -1;
    }
    int32_t sys_flag = (int32_t)get_be32(r + 36);
    Py_ssize_t born_len = (sys_flag & BORNHOST_V6_FLAG) ? 20 : 8;
    Py_ssize_t store_len = (sys_flag & STOREHOST_V6_FLAG) ? 20 : 8;
    const unsigned char *born = r + 48;
    const unsigned char *store_ts = born + born_len;
    const unsigned char *store = store_ts + 8;
    Py_ssize_t cursor = 48 + born_len + 8 + store_len; /* relative to r from here on */
    if (cursor + 16 + 3 > total) { /* IPv6 hosts make the fixed part longer than MIN_RECORD_SIZE */
        *error = format_error("record size %d at %zd is too short for its fixed fields", (int)total, pos);
        return *error ? BAD_RECORD : -1;
    }
    int32_t body_len = (int32_t)get_be32(r + cursor + 12);
    cursor += 16;
    if (body_len < 0 || cursor + body_len + 3 > total) {
        *error = format_error("body length %d at %zd overruns the record", (int)body_len, pos);
        return *error ? BAD_RECORD : -1;
    }
    const unsigned char *body = r + cursor;
    cursor += body_len;
    int topic_len = r[cursor];
    const unsigned char *topic = r + cursor + 1;
    cursor += 1 + topic_len;
    if (cursor + 2 > total) {
        *error = format_error("topic length %d at %zd overruns the record", topic_len, pos);
        return *error ? BAD_RECORD : -1;
    }
    int props_len = (int)(int16_t)(((unsigned)r[cursor] << 8) | r[cursor + 1]);
    cursor += 2;
    if (props_len < 0 || cursor + props_len != total) {
        *error = format_error("properties length %d at %zd does not end the record", props_len, pos);
        return *error ? BAD_RECORD : -1;
    }
    const unsigned char *after_store = store + store_len;
    PyObject *v[RECORD_FIELDS];
    v[0] = PyLong_FromLong(total);
    v[1] = PyLong_FromLong((int32_t)get_be32(r + 8));
    v[2] = PyLong_FromLong((int32_t)get_be32(r + 12));
    v[3] = PyLong_FromLong((int32_t)get_be32(r + 16));
    v[4] = PyLong_FromLongLong((int64_t)get_be64(r + 20));
    v[5] = PyLong_FromLongLong((int64_t)get_be64(r + 28));
    v[6] = PyLong_FromLong(sys_flag);
    v[7] = PyLong_FromLongLong((int64_t)get_be64(r + 40));
    v[8] = decode_host_text(born, born_len, &born_cache);
    v[9] = PyLong_FromLongLong((int64_t)get_be64(store_ts));
    v[10] = decode_host_text(store, store_len, &store_cache);
    v[11] = PyLong_FromLong((int32_t)get_be32(after_store));
    v[12] = PyLong_FromLongLong((int64_t)get_be64(after_store + 4));
    v[13] = PyBytes_FromStringAndSize(with_body ? (const char *)body : NULL, with_body ? body_len : 0);
    v[14] = cached_text(topic, topic_len);
    v[15] = decode_props(r + cursor, props_len);
    v[16] = message_id(store, store_len, r + 28);
    for (int i = 0; i < RECORD_FIELDS; i++) {
        if (v[i] == NULL) {
            for (int j = 0; j < RECORD_FIELDS; j++) {
                Py_XDECREF(v[j]);
            }
            return -1;
        }
    }
    PyObject *obj;
    if (cls == NULL) {
        obj = PyTuple_New(RECORD_FIELDS);
        if (obj != NULL) {
            for (int i = 0; i < RECORD_FIELDS; i++) {
                PyTuple_SET_ITEM(obj, i, v[i]);
            }
        }
    }
    else {
        obj = cls->tp_alloc(cls, 0);
        if (obj != NULL) {
            for (int i = 0; i < RECORD_FIELDS; i++) {
                *(PyObject **)((char *)obj + offsets[i]) = v[i];
            }
        }
    }
    if (obj == NULL) {
        for (int i = 0; i < RECORD_FIELDS; i++) {
            Py_DECREF(v[i]);
        }
        return -1;
    }
    *out = obj;
    *size = total;
    return DECODED;
}

static PyObject *
decode_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 5) {
        PyErr_SetString(PyExc_TypeError, "decode_records(buf, cls=None, with_body=True, pos=0, max_count=-1)");
        return NULL;
    }
    PyTypeObject *cls = NULL;
    /* A copy: a finalizer run by the GC while we allocate could decode into another class. */
    Py_ssize_t offsets[RECORD_FIELDS];
    int with_body = 1;
    Py_ssize_t pos = 0, max_count = -1;
    if (nargs > 1 && args[1] != Py_None) {
        if (!PyType_Check(args[1])) {
            PyErr_SetString(PyExc_TypeError, "cls must be a class or None");
            return NULL;
        }
        cls = (PyTypeObject *)args[1];
        if (use_record_type(cls) < 0) {
            return NULL;
        }
        memcpy(offsets, record_offsets, sizeof offsets);
    }
    if (nargs > 2 && (with_body = PyObject_IsTrue(args[2])) < 0) {
        return NULL;
    }
    if (nargs > 3 && ((pos = PyLong_AsSsize_t(args[3])) == -1 && PyErr_Occurred())) {
        return NULL;
    }
    if (nargs > 4 && ((max_count = PyLong_AsSsize_t(args[4])) == -1 && PyErr_Occurred())) {
        return NULL;
    }
    if (pos < 0) {
        PyErr_SetString(PyExc_ValueError, "pos must not be negative");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    PyObject *records = PyList_New(0);
    PyObject *error = NULL;
    if (records == NULL) {
        goto fail;
    }
    for (Py_ssize_t count = 0; pos < view.len && count != max_count; count++) {
        PyObject *record = NULL, *message = NULL;
        Py_ssize_t size = 0;
        int outcome = decode_one(base, view.len, pos, with_body, cls, offsets, &record, &size, &message);
        if (outcome < 0) {
            goto fail;
        }
        if (outcome != DECODED) {
            error = Py_BuildValue("(nN)", pos, message);
            if (error == NULL) {
                goto fail;
            }
            break;
        }
        if (PyList_Append(records, record) < 0) {
            Py_DECREF(record);
            goto fail;
        }
        Py_DECREF(record);
        pos += size;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NN)", records, error ? error : Py_NewRef(Py_None));
fail:
    Py_XDECREF(records);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- scan_records: a slave's dispatch of its master's records (store/replica.py) ---- */

#define MAX_DELAY_LEVELS 64
#define TRANSACTION_TYPE_MASK 0xC
#define TRANSACTION_PREPARED 0x4
#define TRANSACTION_ROLLBACK 0xC

/* Close the run being built (if any) into runs; -1 on error. */
static int
close_run(PyObject *runs, PyObject **topic, long queue_id, long long first_qoff, Py_ssize_t count,
          PyObject **cq, long long first_phys, long long end_phys, long long last_ts)
{
    if (*topic == NULL) {
        return 0;
    }
    if (_PyBytes_Resize(cq, count * 20) < 0) {
        Py_CLEAR(*topic);
        return -1;
    }
    PyObject *run = Py_BuildValue("(OlLnOLLL)", *topic, queue_id, first_qoff, count, *cq, first_phys, end_phys,
                                  last_ts);
    Py_CLEAR(*topic);
    Py_CLEAR(*cq);
    if (run == NULL) {
        return -1;
    }
    int failed = PyList_Append(runs, run) < 0;
    Py_DECREF(run);
    return failed ? -1 : 0;
}

static PyObject *
scan_records(PyObject *module, PyObject *args)
{
    PyObject *buffer_obj, *levels_obj;
    Py_ssize_t pos, limit;
    long long base_phys;
    Py_buffer delay_topic;
    if (!PyArg_ParseTuple(args, "OnnLy*O", &buffer_obj, &pos, &limit, &base_phys, &delay_topic, &levels_obj)) {
        return NULL;
    }
    long long levels[MAX_DELAY_LEVELS];
    Py_ssize_t n_levels = 0;
    PyObject *out = NULL, *runs = NULL, *index_items = NULL, *space = NULL;
    PyObject *run_topic = NULL, *run_cq = NULL;
    Py_buffer view;
    view.obj = NULL;
    if (!PyTuple_Check(levels_obj) || PyTuple_GET_SIZE(levels_obj) == 0 ||
        PyTuple_GET_SIZE(levels_obj) > MAX_DELAY_LEVELS) {
        PyErr_SetString(PyExc_ValueError, "delay_levels must be a tuple of 1..64 ints");
        goto done;
    }
    n_levels = PyTuple_GET_SIZE(levels_obj);
    for (Py_ssize_t i = 0; i < n_levels; i++) {
        levels[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(levels_obj, i));
        if (levels[i] == -1 && PyErr_Occurred()) {
            goto done;
        }
    }
    if (PyObject_GetBuffer(buffer_obj, &view, PyBUF_SIMPLE) < 0) {
        view.obj = NULL;
        goto done;
    }
    if (limit > view.len || pos < 0) {
        PyErr_SetString(PyExc_ValueError, "pos/limit outside the buffer");
        goto done;
    }
    runs = PyList_New(0);
    index_items = PyList_New(0);
    space = PyUnicode_FromString(" ");
    if (runs == NULL || index_items == NULL || space == NULL) {
        goto done;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    long run_queue = 0;
    long long run_first_qoff = 0, run_next_qoff = 0, run_first_phys = 0, run_end_phys = 0, run_ts = 0;
    Py_ssize_t run_count = 0, run_cap = 0;
    while (limit - pos >= MIN_RECORD_SIZE) {
        const unsigned char *r = base + pos;
        int32_t total = (int32_t)get_be32(r);
        if (get_be32(r + 4) != 0xDAA320A7u || total < MIN_RECORD_SIZE || (Py_ssize_t)total > limit - pos) {
            break;
        }
        long long phys = base_phys + pos;
        if ((long long)get_be64(r + 28) != phys) {
            break;
        }
        int32_t sys_flag = (int32_t)get_be32(r + 36);
        Py_ssize_t born_len = (sys_flag & BORNHOST_V6_FLAG) ? 20 : 8;
        Py_ssize_t store_len = (sys_flag & STOREHOST_V6_FLAG) ? 20 : 8;
        long long store_ts = (long long)get_be64(r + 48 + born_len);
        Py_ssize_t cursor = 48 + born_len + 8 + store_len;
        if (cursor + 16 + 3 > total) {
            break;
        }
        int32_t body_len = (int32_t)get_be32(r + cursor + 12);
        cursor += 16;
        if (body_len < 0 || cursor + body_len + 3 > total) {
            break;
        }
        cursor += body_len;
        int topic_len = r[cursor];
        const unsigned char *topic_raw = r + cursor + 1;
        cursor += 1 + topic_len;
        if (cursor + 2 > total) {
            break;
        }
        int props_len = (int)(int16_t)(((unsigned)r[cursor] << 8) | r[cursor + 1]);
        const unsigned char *props = r + cursor + 2;
        if (props_len < 0 || cursor + 2 + props_len != total) {
            break;
        }
        long queue_id = (long)(int32_t)get_be32(r + 12);
        long long queue_offset = (long long)get_be64(r + 20);
        PyObject *topic = cached_text(topic_raw, topic_len);
        if (topic == NULL) {
            goto fail;
        }
        PyObject *ts_obj = PyLong_FromLongLong(store_ts);
        PyObject *phys_obj = ts_obj ? PyLong_FromLongLong(phys) : NULL;
        PyObject *uniq = phys_obj ? prop_value(props, props_len, "UNIQ_KEY", 8) : NULL;
        PyObject *keys = uniq ? prop_value(props, props_len, "KEYS", 4) : NULL;
        int failed = keys == NULL || add_index_items(index_items, topic, uniq, keys, phys_obj, ts_obj, space) < 0;
        Py_XDECREF(ts_obj);
        Py_XDECREF(phys_obj);
        Py_XDECREF(uniq);
        Py_XDECREF(keys);
        if (failed) {
            Py_DECREF(topic);
            goto fail;
        }
        int type = sys_flag & TRANSACTION_TYPE_MASK;
        int slot = type != TRANSACTION_PREPARED && type != TRANSACTION_ROLLBACK;
        int same = run_topic != NULL && slot && run_queue == queue_id && run_next_qoff == queue_offset &&
                   run_count > 0 && PyUnicode_Compare(run_topic, topic) == 0;
        if (!same) {
            if (close_run(runs, &run_topic, run_queue, run_first_qoff, run_count, &run_cq, run_first_phys,
                          run_end_phys, run_ts) < 0) {
                Py_DECREF(topic);
                goto fail;
            }
            run_topic = Py_NewRef(topic);
            run_queue = queue_id;
            run_first_qoff = queue_offset;
            run_first_phys = phys;
            run_count = 0;
            run_cap = 32;
            run_cq = PyBytes_FromStringAndSize(NULL, run_cap * 20);
            if (run_cq == NULL) {
                Py_DECREF(topic);
                goto fail;
            }
        }
        if (slot) {
            if (run_count == run_cap) {
                run_cap *= 2;
                if (_PyBytes_Resize(&run_cq, run_cap * 20) < 0) {
                    Py_DECREF(topic);
                    goto fail;
                }
            }
            long long tags_code = 0;
            if (delay_topic.len == topic_len && memcmp(delay_topic.buf, topic_raw, (size_t)topic_len) == 0) {
                tags_code = store_ts + levels[queue_id < n_levels ? (queue_id < 0 ? 0 : queue_id) : n_levels - 1];
            }
            else {
                PyObject *tags = prop_value(props, props_len, "TAGS", 4);
                if (tags == NULL) {
                    Py_DECREF(topic);
                    goto fail;
                }
                if (tags != Py_None) {
                    uint32_t h = 0;
                    if (hash_str(tags, &h) < 0) {
                        Py_DECREF(tags);
                        Py_DECREF(topic);
                        goto fail;
                    }
                    tags_code = (long long)(int32_t)h;
                }
                Py_DECREF(tags);
            }
            unsigned char *e = (unsigned char *)PyBytes_AS_STRING(run_cq) + run_count * 20;
            put_be64(e, (uint64_t)phys);
            put_be32(e + 8, (uint32_t)total);
            put_be64(e + 12, (uint64_t)tags_code);
            run_count++;
            run_next_qoff = queue_offset + 1;
        }
        Py_DECREF(topic);
        run_end_phys = phys + total;
        run_ts = store_ts;
        pos += total;
    }
    if (close_run(runs, &run_topic, run_queue, run_first_qoff, run_count, &run_cq, run_first_phys, run_end_phys,
                  run_ts) < 0) {
        goto fail;
    }
    out = Py_BuildValue("(nOO)", pos, runs, index_items);
    goto done;
fail:
    Py_XDECREF(run_topic);
    Py_XDECREF(run_cq);
done:
    Py_XDECREF(runs);
    Py_XDECREF(index_items);
    Py_XDECREF(space);
    if (view.obj != NULL) {
        PyBuffer_Release(&view);
    }
    PyBuffer_Release(&delay_topic);
    return out;
}

/* ---- Decoding a remoting frame's JSON header (remoting/command.py) ------------------------
 *
 * decode_command takes the common shape of a JSON-header frame and leaves everything else
 * to the Python decoder by returning None: a header that is not an object of the known
 * members with the usual value types, a float, an integer of 19 digits or more, a
 * duplicate key, invalid UTF-8, a lone surrogate, a binary (ROCKETMQ) header.  The Python
 * decoder then decodes it or raises the FrameError that names the fault, so every error
 * message has one home.  What both decode is the same, field for field
 * (tests/unit/remoting/test_command_speedups.py).  Encoding stays with orjson: a C writer
 * of the same bytes measured slower. */

#define JSON_MAX_DEPTH 32

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} json_cursor;

static void
json_ws(json_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) {
        c->p++;
    }
}

static int
hex4(const unsigned char *p, unsigned int *out)
{
    unsigned int v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') {
            v |= (unsigned int)(ch - '0');
        } else if (ch >= 'a' && ch <= 'f') {
            v |= (unsigned int)(ch - 'a' + 10);
        } else if (ch >= 'A' && ch <= 'F') {
            v |= (unsigned int)(ch - 'A' + 10);
        } else {
            return -1;
        }
    }
    *out = v;
    return 0;
}

/* The JSON string at the cursor (on its opening quote) as a str; NULL with no exception
   set when it is not one this decoder takes (the caller hands the frame to Python), NULL
   with an exception on a memory error. */
static PyObject *
json_string(json_cursor *c)
{
    const unsigned char *start = ++c->p, *q = start;
    int escaped = 0;
    while (q < c->end && *q != '"') {
        if (*q < 0x20) {
            return NULL;
        }
        if (*q == '\\') {
            escaped = 1;
            q++;
        }
        q++;
    }
    if (q >= c->end) {
        return NULL;
    }
    c->p = q + 1;
    PyObject *s;
    if (!escaped) {
        s = PyUnicode_DecodeUTF8((const char *)start, q - start, NULL);
    } else {
        /* Escapes shrink: the unescaped text is never longer than the escaped one. */
        char small[256];
        small[0] = 0;
        Py_ssize_t cap = q - start;
        char *buf = cap <= (Py_ssize_t)sizeof(small) ? small : PyMem_Malloc((size_t)cap);
        if (buf == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        char *w = buf;
        const unsigned char *r = start;
        int bad = 0;
        while (r < q && !bad) {
            if (*r != '\\') {
                *w++ = (char)*r++;
                continue;
            }
            r++;
            switch (*r++) {
            case '"': *w++ = '"'; break;
            case '\\': *w++ = '\\'; break;
            case '/': *w++ = '/'; break;
            case 'b': *w++ = '\b'; break;
            case 'f': *w++ = '\f'; break;
            case 'n': *w++ = '\n'; break;
            case 'r': *w++ = '\r'; break;
            case 't': *w++ = '\t'; break;
            case 'u': {
                unsigned int cp, low;
                if (q - r < 4 || hex4(r, &cp) < 0) {
                    bad = 1;
                    break;
                }
                r += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    bad = 1; /* a lone low surrogate */
                    break;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (q - r < 6 || r[0] != '\\' || r[1] != 'u' || hex4(r + 2, &low) < 0 || low < 0xDC00 ||
                        low > 0xDFFF) {
                        bad = 1; /* a lone high surrogate */
                        break;
                    }
                    r += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                }
                if (cp < 0x80) {
                    *w++ = (char)cp;
                } else if (cp < 0x800) {
                    *w++ = (char)(0xC0 | (cp >> 6));
                    *w++ = (char)(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    *w++ = (char)(0xE0 | (cp >> 12));
                    *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                    *w++ = (char)(0x80 | (cp & 0x3F));
                } else {
                    *w++ = (char)(0xF0 | (cp >> 18));
                    *w++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                    *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                    *w++ = (char)(0x80 | (cp & 0x3F));
                }
                break;
            }
            default:
                bad = 1;
            }
        }
        s = bad ? NULL : PyUnicode_DecodeUTF8(buf, w - buf, NULL);
        if (buf != small) {
            PyMem_Free(buf);
        }
        if (bad) {
            return NULL;
        }
    }
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear(); /* invalid UTF-8: the Python codec says so */
    }
    return s;
}

/* A JSON integer at the cursor into *out: 1 when it is one that fits 64 bits, 0 when the
   number is not an integer this decoder takes (a fraction, an exponent, leading zeros,
   too large) or there is no number here. */
static int
json_int(json_cursor *c, long long *out)
{
    const unsigned char *p = c->p;
    int negative = 0;
    if (p < c->end && *p == '-') {
        negative = 1;
        p++;
    }
    const unsigned char *digits = p;
    unsigned long long v = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        if (p - digits >= 18) {
            return 0; /* 19 digits or more: may not fit; Python decides */
        }
        v = v * 10 + (unsigned long long)(*p - '0');
        p++;
    }
    if (p == digits || (*digits == '0' && p - digits > 1)) {
        return 0;
    }
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E')) {
        return 0;
    }
    c->p = p;
    *out = negative ? -(long long)v : (long long)v;
    return 1;
}

static int
json_literal(json_cursor *c, const char *word, size_t len)
{
    if ((size_t)(c->end - c->p) >= len && memcmp(c->p, word, len) == 0) {
        c->p += len;
        return 1;
    }
    return 0;
}

/* Skip one JSON value of any kind (an unknown header member): 1 when skipped, 0 when
   this decoder does not take it (the caller hands the frame to Python). */
static int
json_skip(json_cursor *c, int depth)
{
    json_ws(c);
    if (c->p >= c->end || depth > JSON_MAX_DEPTH) {
        return 0;
    }
    unsigned char ch = *c->p;
    if (ch == '"') {
        /* Decoded and dropped: its escapes and UTF-8 are checked as the Python codec does. */
        PyObject *dropped = json_string(c);
        Py_XDECREF(dropped);
        return dropped != NULL;
    }
    if (ch == '{' || ch == '[') {
        unsigned char close = ch == '{' ? '}' : ']';
        c->p++;
        json_ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 1;
        }
        for (;;) {
            if (ch == '{') {
                json_ws(c);
                if (c->p >= c->end || *c->p != '"' || !json_skip(c, depth + 1)) {
                    return 0;
                }
                json_ws(c);
                if (c->p >= c->end || *c->p != ':') {
                    return 0;
                }
                c->p++;
            }
            if (!json_skip(c, depth + 1)) {
                return 0;
            }
            json_ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (c->p < c->end && *c->p == close) {
                c->p++;
                return 1;
            }
            return 0;
        }
    }
    long long ignored;
    return json_int(c, &ignored) || json_literal(c, "true", 4) || json_literal(c, "false", 5) ||
           json_literal(c, "null", 4);
}

/* The extFields object at the cursor into a new dict of str values, as the Python codec
   makes it: integers and booleans as their Java text, nulls dropped.  NULL with no
   exception: not taken here. */
static PyObject *
json_ext_fields(json_cursor *c)
{
    PyObject *fields = PyDict_New();
    if (fields == NULL) {
        return NULL;
    }
    c->p++; /* '{' */
    json_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return fields;
    }
    for (;;) {
        json_ws(c);
        if (c->p >= c->end || *c->p != '"') {
            goto refuse;
        }
        PyObject *key = json_string(c);
        if (key == NULL) {
            goto refuse;
        }
        int seen = PyDict_Contains(fields, key);
        json_ws(c);
        if (seen != 0 || c->p >= c->end || *c->p != ':') {
            Py_DECREF(key); /* a duplicate key: Python's last-one-wins order is its own */
            goto refuse;
        }
        c->p++;
        json_ws(c);
        PyObject *value = NULL;
        long long number;
        if (c->p < c->end && *c->p == '"') {
            value = json_string(c);
        } else if (json_int(c, &number)) {
            char text[24];
            int n = snprintf(text, sizeof(text), "%lld", number);
            value = PyUnicode_FromStringAndSize(text, n);
        } else if (json_literal(c, "true", 4)) {
            value = PyUnicode_FromString("true");
        } else if (json_literal(c, "false", 5)) {
            value = PyUnicode_FromString("false");
        } else if (json_literal(c, "null", 4)) {
            /* Dropped, as Python drops it; kept as a placeholder until the end so that a
               later duplicate of the key is still seen (and handed to Python). */
            value = Py_NewRef(Py_None);
        }
        if (value == NULL) {
            Py_DECREF(key);
            goto refuse;
        }
        int failed = PyDict_SetItem(fields, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (failed < 0) {
            goto refuse;
        }
        json_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            break;
        }
        goto refuse;
    }
    /* Drop the nulls (the placeholders above). */
    {
        PyObject *key, *value, *nulls = NULL;
        Py_ssize_t pos = 0;
        while (PyDict_Next(fields, &pos, &key, &value)) {
            if (value == Py_None) {
                if (nulls == NULL && (nulls = PyList_New(0)) == NULL) {
                    goto refuse;
                }
                if (PyList_Append(nulls, key) < 0) {
                    Py_DECREF(nulls);
                    goto refuse;
                }
            }
        }
        if (nulls != NULL) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nulls); i++) {
                if (PyDict_DelItem(fields, PyList_GET_ITEM(nulls, i)) < 0) {
                    Py_DECREF(nulls);
                    goto refuse;
                }
            }
            Py_DECREF(nulls);
        }
    }
    return fields;
refuse:
    Py_DECREF(fields);
    return NULL;
}

enum { H_CODE = 1, H_LANGUAGE = 2, H_VERSION = 4, H_OPAQUE = 8, H_FLAG = 16, H_REMARK = 32, H_EXT = 64 };

static int
member_bit(PyObject *key)
{
    Py_ssize_t n;
    const char *k = PyUnicode_AsUTF8AndSize(key, &n);
    if (k == NULL) {
        PyErr_Clear();
        return 0;
    }
#define MEMBER(name, bit)                                                                                    \
    if (n == (Py_ssize_t)sizeof(name) - 1 && memcmp(k, name, sizeof(name) - 1) == 0) return bit
    MEMBER("code", H_CODE);
    MEMBER("language", H_LANGUAGE);
    MEMBER("version", H_VERSION);
    MEMBER("opaque", H_OPAQUE);
    MEMBER("flag", H_FLAG);
    MEMBER("remark", H_REMARK);
    MEMBER("extFields", H_EXT);
#undef MEMBER
    return 0;
}

static PyObject *s_language_default; /* "OTHER": a header without a language */

/* decode_command(buf, start, end, cls) -> cls(code, language, version, opaque, flag,
   remark, ext_fields, body) | None.  buf[start:end] is one frame after its total-length
   prefix (the header-length word first), as command._decode takes it. */
static PyObject *
decode_command(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "decode_command(buf, start, end, cls)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
    if ((start == -1 || end == -1) && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *out = NULL, *language = NULL, *remark = NULL, *ext = NULL, *body = NULL;
    long long code = 0, version = 0, opaque = 0, flag = 0;
    int seen = 0;
    if (start < 0 || end > view.len || end - start < 4) {
        goto pass;
    }
    const unsigned char *base = (const unsigned char *)view.buf;
    uint32_t word = ((uint32_t)base[start] << 24) | ((uint32_t)base[start + 1] << 16) |
                    ((uint32_t)base[start + 2] << 8) | base[start + 3];
    Py_ssize_t header_start = start + 4, header_end = header_start + (Py_ssize_t)(word & 0xFFFFFF);
    if ((word >> 24) != 0 || header_end > end) {
        goto pass;
    }
    json_cursor c = {base + header_start, base + header_end};
    json_ws(&c);
    if (c.p >= c.end || *c.p != '{') {
        goto pass;
    }
    c.p++;
    json_ws(&c);
    if (c.p < c.end && *c.p == '}') {
        goto pass; /* no code: Python names the fault */
    }
    for (;;) {
        json_ws(&c);
        if (c.p >= c.end || *c.p != '"') {
            goto pass;
        }
        PyObject *key = json_string(&c);
        if (key == NULL) {
            goto pass;
        }
        int bit = member_bit(key);
        Py_DECREF(key);
        json_ws(&c);
        if (c.p >= c.end || *c.p != ':' || (bit & seen)) {
            goto pass;
        }
        seen |= bit;
        c.p++;
        json_ws(&c);
        switch (bit) {
        case H_CODE:
            if (!json_int(&c, &code)) goto pass;
            break;
        case H_OPAQUE:
            if (!json_int(&c, &opaque)) goto pass;
            break;
        case H_FLAG:
            if (!json_int(&c, &flag)) goto pass;
            break;
        case H_VERSION:
            if (!json_int(&c, &version)) goto pass; /* Python reads a non-integer as 0 */
            break;
        case H_LANGUAGE:
            if (c.p >= c.end || *c.p != '"' || (language = json_string(&c)) == NULL) goto pass;
            break;
        case H_REMARK:
            if (json_literal(&c, "null", 4)) {
                break;
            }
            if (c.p >= c.end || *c.p != '"' || (remark = json_string(&c)) == NULL) goto pass;
            break;
        case H_EXT:
            if (json_literal(&c, "null", 4)) {
                break;
            }
            if (c.p >= c.end || *c.p != '{' || (ext = json_ext_fields(&c)) == NULL) goto pass;
            break;
        default:
            if (!json_skip(&c, 1)) goto pass;
        }
        json_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        goto pass;
    }
    json_ws(&c);
    if (c.p != c.end || !(seen & H_CODE)) {
        goto pass;
    }
    if (ext == NULL && (ext = PyDict_New()) == NULL) {
        goto done;
    }
    body = header_end < end ? PyBytes_FromStringAndSize((const char *)base + header_end, end - header_end)
                            : PyBytes_FromStringAndSize(NULL, 0);
    if (body == NULL) {
        goto done;
    }
    {
        PyObject *values[8] = {NULL};
        values[0] = PyLong_FromLongLong(code);
        values[1] = language != NULL ? Py_NewRef(language) : Py_NewRef(s_language_default);
        values[2] = PyLong_FromLongLong(version);
        values[3] = PyLong_FromLongLong(opaque);
        values[4] = PyLong_FromLongLong(flag);
        values[5] = remark != NULL ? Py_NewRef(remark) : Py_NewRef(Py_None);
        values[6] = Py_NewRef(ext);
        values[7] = Py_NewRef(body);
        if (values[0] && values[2] && values[3] && values[4]) {
            out = PyObject_Vectorcall(args[3], values, 8, NULL);
        }
        for (int i = 0; i < 8; i++) {
            Py_XDECREF(values[i]);
        }
    }
    goto done;
pass:
    if (!PyErr_Occurred()) {
        out = Py_NewRef(Py_None);
    }
done:
    Py_XDECREF(language);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    Py_XDECREF(body);
    PyBuffer_Release(&view);
    return out;
}


/* Syncer, the GIL-free flush worker: its own file, _syncer.c, built into this module. */
int syncer_register(PyObject *module);

static PyMethodDef speedups_methods[] = {
    {"java_hash_code", java_hash_code, METH_O, "Java String.hashCode() of a str, as a signed 32-bit int."},
    {"index_put_many", index_put_many, METH_VARARGS, "Put (topic, key, phy, ts) items into an index file buffer."},
    {"write_records", write_records, METH_VARARGS, "Write prepared IPv4 records back to back into a buffer."},
    {"batch_items", batch_items, METH_VARARGS, "Split and validate an encoded producer batch."},
    {"write_batch", write_batch, METH_VARARGS, "Write an encoded producer batch as records."},
    {"scan_records", scan_records, METH_VARARGS, "A slave's dispatch of whole records: (end, runs, index items)."},
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "Decode records laid back to back: (records, None) or (records, (pos, message))."},
    {"decode_command", (PyCFunction)(void (*)(void))decode_command, METH_FASTCALL,
     "Decode a JSON-header frame into cls(...), or None to leave it to the Python decoder."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "broker_core._speedups", "C versions of hot store functions.", -1, speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    s_prepared = PyUnicode_InternFromString("_prepared");
    s_queue_id = PyUnicode_InternFromString("queue_id");
    s_flag = PyUnicode_InternFromString("flag");
    s_born_timestamp = PyUnicode_InternFromString("born_timestamp");
    s_born_host = PyUnicode_InternFromString("born_host");
    s_reconsume_times = PyUnicode_InternFromString("reconsume_times");
    s_prepared_transaction_offset = PyUnicode_InternFromString("prepared_transaction_offset");
    s_body = PyUnicode_InternFromString("body");
    s_language_default = PyUnicode_InternFromString("OTHER");
    if (s_language_default == NULL) {
        return NULL;
    }
    if (!s_prepared || !s_queue_id || !s_flag || !s_born_timestamp || !s_born_host || !s_reconsume_times ||
        !s_prepared_transaction_offset || !s_body) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&speedups_module);
    if (module != NULL && syncer_register(module) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
