/*
 * Syncer: a flush worker thread that needs no GIL, for SYNC_FLUSH group commit
 * (broker_core/store/flush.py says when it is used; the Python flush thread is its twin).
 *
 * Why: a Python flush thread needs the GIL to take a group of requests and start its
 * msync.  The event loop that appends the records holds the GIL until it is idle, so the
 * disk waits while the loop appends and the loop waits while the disk syncs.  Here the
 * loop hands the byte ranges to a plain pthread, which msyncs them while the loop goes on
 * appending, and learns of the end through an eventfd it watches (loop.add_reader).
 *
 *   Syncer() -> a started worker with its eventfd
 *   .fileno() -> the eventfd: readable once a submitted job is done
 *   .submit([(address, length), ...]) -> None
 *       msync(address, length, MS_SYNC) each range, in order, on the worker.  At most one
 *       job at a time (RuntimeError while busy); at most SYNCER_MAX_RANGES ranges.  The
 *       caller keeps the mappings alive until the job is collected; a range that is no
 *       longer mapped fails with ENOMEM rather than faulting (msync reads no memory).
 *   .collect() -> None | int
 *       None when no job has finished (a spurious wakeup); else 0 for a job whose ranges
 *       all synced, or the errno of the first that failed.  The worker is free again.
 *   .busy -> bool: a job was submitted and not yet collected
 *   .close() -> None: the worker finishes its job, if any, and exits (joined, GIL released);
 *       the eventfd stays open until the object goes, so a loop may still unregister it.
 *
 * Linux only (msync on a shared file mapping is vfs_fsync_range: the same durability as
 * fdatasync on that range); elsewhere the type is absent and the Python thread serves.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

int syncer_register(PyObject *module); /* called by _speedups.c at module init */

#ifdef __linux__

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#define SYNCER_MAX_RANGES 16

typedef struct {
    PyObject_HEAD
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int event_fd;
    int running;  /* the thread was started and not yet joined */
    int stopping; /* close() asked the thread to exit */
    int pending;  /* a job waits for the thread */
    int busy;     /* a job was submitted and not yet collected */
    int error;    /* the finished job's errno, 0 when it synced */
    Py_ssize_t count;
    uintptr_t address[SYNCER_MAX_RANGES];
    size_t length[SYNCER_MAX_RANGES];
} Syncer;

static void *
syncer_main(void *arg)
{
    Syncer *self = (Syncer *)arg;
    uintptr_t address[SYNCER_MAX_RANGES];
    size_t length[SYNCER_MAX_RANGES];
    pthread_mutex_lock(&self->mutex);
    for (;;) {
        while (!self->pending && !self->stopping) {
            pthread_cond_wait(&self->cond, &self->mutex);
        }
        if (!self->pending) { /* stopping, with nothing left to do */
            break;
        }
        Py_ssize_t count = self->count;
        memcpy(address, self->address, sizeof(address[0]) * (size_t)count);
        memcpy(length, self->length, sizeof(length[0]) * (size_t)count);
        self->pending = 0;
        pthread_mutex_unlock(&self->mutex);

        int error = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            if (msync((void *)address[i], length[i], MS_SYNC) != 0 && error == 0) {
                error = errno;
            }
        }

        pthread_mutex_lock(&self->mutex);
        self->error = error;
        uint64_t one = 1;
        /* An eventfd write only fails when its counter would overflow: not with one job. */
        while (write(self->event_fd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
    }
    pthread_mutex_unlock(&self->mutex);
    return NULL;
}

static void
syncer_stop(Syncer *self)
{
    if (!self->running) {
        return;
    }
    pthread_mutex_lock(&self->mutex);
    self->stopping = 1;
    pthread_cond_signal(&self->cond);
    pthread_mutex_unlock(&self->mutex);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->running = 0;
}

static PyObject *
syncer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Syncer() takes no arguments");
        return NULL;
    }
    Syncer *self = (Syncer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->event_fd = -1;
    if (pthread_mutex_init(&self->mutex, NULL) != 0 || pthread_cond_init(&self->cond, NULL) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "Syncer: cannot create its mutex");
        Py_DECREF(self);
        return NULL;
    }
    self->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (self->event_fd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(self);
        return NULL;
    }
    int rc = pthread_create(&self->thread, NULL, syncer_main, self);
    if (rc != 0) {
        errno = rc;
        PyErr_SetFromErrno(PyExc_OSError);
        Py_DECREF(self);
        return NULL;
    }
    self->running = 1;
    return (PyObject *)self;
}

static void
syncer_dealloc(Syncer *self)
{
    syncer_stop(self);
    if (self->event_fd >= 0) {
        close(self->event_fd);
    }
    pthread_cond_destroy(&self->cond);
    pthread_mutex_destroy(&self->mutex);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
syncer_fileno(Syncer *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromLong(self->event_fd);
}

static PyObject *
syncer_submit(Syncer *self, PyObject *ranges)
{
    if (!PyList_Check(ranges)) {
        PyErr_SetString(PyExc_TypeError, "submit() takes a list of (address, length) tuples");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(ranges);
    if (count > SYNCER_MAX_RANGES) {
        PyErr_Format(PyExc_ValueError, "submit(): %zd ranges, at most %d", count, SYNCER_MAX_RANGES);
        return NULL;
    }
    uintptr_t address[SYNCER_MAX_RANGES];
    size_t length[SYNCER_MAX_RANGES];
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PyList_GET_ITEM(ranges, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_TypeError, "submit() takes a list of (address, length) tuples");
            return NULL;
        }
        address[i] = (uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(item, 0));
        if (PyErr_Occurred()) {
            return NULL;
        }
        length[i] = (size_t)PyLong_AsSize_t(PyTuple_GET_ITEM(item, 1));
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    if (!self->running) {
        PyErr_SetString(PyExc_RuntimeError, "Syncer is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Syncer is busy: collect() its job first");
        return NULL;
    }
    pthread_mutex_lock(&self->mutex);
    memcpy(self->address, address, sizeof(address[0]) * (size_t)count);
    memcpy(self->length, length, sizeof(length[0]) * (size_t)count);
    self->count = count;
    self->pending = 1;
    self->busy = 1;
    pthread_cond_signal(&self->cond);
    pthread_mutex_unlock(&self->mutex);
    Py_RETURN_NONE;
}

static PyObject *
syncer_collect(Syncer *self, PyObject *Py_UNUSED(ignored))
{
    uint64_t value;
    if (read(self->event_fd, &value, sizeof(value)) != (ssize_t)sizeof(value)) {
        if (errno == EAGAIN || errno == EINTR) {
            Py_RETURN_NONE;
        }
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    pthread_mutex_lock(&self->mutex);
    int error = self->error;
    self->busy = 0;
    pthread_mutex_unlock(&self->mutex);
    return PyLong_FromLong(error);
}

static PyObject *
syncer_close(Syncer *self, PyObject *Py_UNUSED(ignored))
{
    syncer_stop(self);
    Py_RETURN_NONE;
}

static PyObject *
syncer_get_busy(Syncer *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->busy);
}

static PyMethodDef syncer_methods[] = {
    {"fileno", (PyCFunction)syncer_fileno, METH_NOARGS, "The eventfd, readable once a job is done."},
    {"submit", (PyCFunction)syncer_submit, METH_O, "msync [(address, length), ...] on the worker thread."},
    {"collect", (PyCFunction)syncer_collect, METH_NOARGS, "None, or the finished job's errno (0: synced)."},
    {"close", (PyCFunction)syncer_close, METH_NOARGS, "Finish the job in hand and stop the thread."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef syncer_getset[] = {
    {"busy", (getter)syncer_get_busy, NULL, "A job was submitted and not yet collected.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SyncerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "broker_core._speedups.Syncer",
    .tp_basicsize = sizeof(Syncer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A GIL-free msync worker for SYNC_FLUSH group commit.",
    .tp_new = syncer_new,
    .tp_dealloc = (destructor)syncer_dealloc,
    .tp_methods = syncer_methods,
    .tp_getset = syncer_getset,
};

int
syncer_register(PyObject *module)
{
    if (PyType_Ready(&SyncerType) < 0) {
        return -1;
    }
    Py_INCREF(&SyncerType);
    if (PyModule_AddObject(module, "Syncer", (PyObject *)&SyncerType) < 0) {
        Py_DECREF(&SyncerType);
        return -1;
    }
    return 0;
}

#else /* not Linux: no Syncer; the store's Python flush thread serves alone */

int
syncer_register(PyObject *module)
{
    (void)module;
    return 0;
}

#endif
