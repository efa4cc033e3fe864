/*
 * _gpucomp.c - the C half of the Python module gpucomp (python/gpucomp/__init__.py
 * is the bz2-shaped half): whole-buffer compress and decompress through
 * libgpucomp-client, the daemon's STATS, and the search for a bzip2 stream's
 * end that BZ2Decompressor needs to split concatenated streams.
 *
 * Clients come from gpucomp_open, so every call works with no daemon (the
 * library's in-process CPU engine). A client is not thread-safe, so each
 * call takes one of its own from a small pool; the pool is touched only with
 * the GIL held, and the GIL is released for every library call so that
 * other Python threads run (and compress) meanwhile.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <string.h>

#include "gpucomp.h"

/* Clients kept for reuse: enough for the threads a program runs at once;
 * more are opened and closed per call. */
#define POOL_MAX 16
static gpucomp_client *pool[POOL_MAX];
static int pool_len;

/* The service failed (no daemon for stats, a lost connection...): OSError
 * with errno the GPUCOMP_E_* code. A subclass, because OSError itself turns
 * an errno into one of its own subclasses (10 would be ChildProcessError). */
static PyObject *service_error;

/* Both need the GIL held. */
static gpucomp_client *client_take(void)
{
    if (pool_len > 0)
        return pool[--pool_len];
    gpucomp_client *c = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    int rc = gpucomp_open(NULL, &c);
    PyEval_RestoreThread(ts);
    if (rc != GPUCOMP_OK) {
        PyErr_SetString(rc == GPUCOMP_E_NOMEM ? PyExc_MemoryError : PyExc_OSError, gpucomp_strerror(rc));
        return NULL;
    }
    return c;
}

/* A client that ran in process keeps doing so (gpucomp_open): not pooled, so
 * that a daemon started later is used by the next call. */
static void client_give(gpucomp_client *c)
{
    if (pool_len < POOL_MAX && gpucomp_last_backend(c) != GPUCOMP_BACKEND_LOCAL)
        pool[pool_len++] = c;
    else
        gpucomp_close(c);
}

static const char *backend_name(gpucomp_backend b)
{
    switch (b) {
    case GPUCOMP_BACKEND_CPU: return "cpu";
    case GPUCOMP_BACKEND_GPU: return "gpu";
    case GPUCOMP_BACKEND_LOCAL: return "cpu (in process)";
    default: return "unknown";
    }
}

/* The error a failed request raises: data errors as bz2 raises them, the rest
 * as OSError(code, message) so a caller can tell a missing service apart. */
static void raise_status(int rc, const char *msg)
{
    switch (rc) {
    case GPUCOMP_E_CORRUPT:
    case GPUCOMP_E_CRC: PyErr_SetString(PyExc_OSError, "Invalid data stream"); return;
    case GPUCOMP_E_TRUNCATED:
        PyErr_SetString(PyExc_ValueError, "Compressed data ended before the end-of-stream marker was reached");
        return;
    case GPUCOMP_E_NOMEM: PyErr_SetString(PyExc_MemoryError, msg && *msg ? msg : gpucomp_strerror(rc)); return;
    case GPUCOMP_E_INVALID: PyErr_SetString(PyExc_ValueError, msg && *msg ? msg : gpucomp_strerror(rc)); return;
    default: PyErr_SetObject(service_error, Py_BuildValue("(is)", rc, msg && *msg ? msg : gpucomp_strerror(rc)));
    }
}

static int codec_from_name(const char *name, gpucomp_codec *out)
{
    if (strcmp(name, "bzip2") == 0)
        *out = GPUCOMP_CODEC_BZIP2;
    else if (strcmp(name, "rle") == 0)
        *out = GPUCOMP_CODEC_RLE;
    else {
        PyErr_Format(PyExc_ValueError, "unknown codec '%s' (bzip2 or rle)", name);
        return -1;
    }
    return 0;
}

/* Runs one buffer request; returns (bytes, backend name) or NULL with an exception set. */
static PyObject *run(int decompress, const gpucomp_options *o, Py_buffer *in)
{
    gpucomp_client *c = client_take();
    if (!c)
        return NULL;
    void *out = NULL;
    size_t out_len = 0;
    PyThreadState *ts = PyEval_SaveThread();
    int rc = decompress ? gpucomp_decompress(c, o, in->buf, (size_t)in->len, &out, &out_len)
                        : gpucomp_compress(c, o, in->buf, (size_t)in->len, &out, &out_len);
    PyEval_RestoreThread(ts);
    PyObject *res = NULL;
    if (rc != GPUCOMP_OK) {
        raise_status(rc, gpucomp_last_error(c));
    } else {
        PyObject *bytes = PyBytes_FromStringAndSize(out, (Py_ssize_t)out_len);
        if (bytes)
            res = Py_BuildValue("(Ns)", bytes, backend_name(gpucomp_last_backend(c)));
    }
    gpucomp_free(out);
    client_give(c);
    return res;
}

static PyObject *py_compress(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = { "data", "compresslevel", "codec", NULL };
    Py_buffer in;
    int level = 9;
    const char *codec = "bzip2";
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|is:compress", names, &in, &level, &codec))
        return NULL;
    gpucomp_options o;
    gpucomp_codec id;
    PyObject *res = NULL;
    if (codec_from_name(codec, &id) == 0) {
        gpucomp_options_init(&o, id);
        if (id == GPUCOMP_CODEC_BZIP2 && (level < 1 || level > 9))
            PyErr_SetString(PyExc_ValueError, "compresslevel must be between 1 and 9");
        else {
            if (id == GPUCOMP_CODEC_BZIP2)
                o.level = level;
            res = run(0, &o, &in);
        }
    }
    PyBuffer_Release(&in);
    return res;
}

static PyObject *py_decompress(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = { "data", "codec", NULL };
    Py_buffer in;
    const char *codec = "bzip2";
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|s:decompress", names, &in, &codec))
        return NULL;
    gpucomp_options o;
    gpucomp_codec id;
    PyObject *res = NULL;
    if (codec_from_name(codec, &id) == 0) {
        gpucomp_options_init(&o, id);
        res = run(1, &o, &in);
    }
    PyBuffer_Release(&in);
    return res;
}

/*
 * A bzip2 stream ends with the 48-bit marker 0x177245385090 at any bit
 * offset, then its 32-bit CRC, then padding to a byte. For each of the eight
 * bit alignments, four whole bytes of the marker sit byte-aligned in the
 * data: memmem finds them fast, and the full 48 bits are checked around.
 */
#define EOS_MAGIC 0x177245385090ULL

static int marker_at(const unsigned char *p, size_t len, size_t bit)
{
    if (bit + 48 > (uint64_t)len * 8)
        return 0;
    uint64_t v = 0;
    size_t byte = bit / 8;
    for (size_t i = 0; i < 7 && byte + i < len; i++)
        v |= (uint64_t)p[byte + i] << (8 * (6 - i));
    return ((v >> (8 - bit % 8)) & 0xFFFFFFFFFFFFULL) == EOS_MAGIC;
}

/* The first marker starting at bit offset >= from_bit; (size_t)-1 if none. */
static size_t find_marker(const unsigned char *p, size_t len, size_t from_bit)
{
    size_t best = (size_t)-1;
    for (unsigned shift = 0; shift < 8; shift++) {
        /* the marker starting at bit `shift` of a byte: its bytes 1..4 are whole */
        uint64_t w = EOS_MAGIC << (16 - shift);
        unsigned char key[4];
        for (int i = 0; i < 4; i++)
            key[i] = (unsigned char)(w >> (8 * (6 - i)));
        size_t from = from_bit / 8 + 1;
        while (from + 4 <= len) {
            const unsigned char *hit = memmem(p + from, len - from, key, 4);
            if (!hit)
                break;
            size_t bit = ((size_t)(hit - p) - 1) * 8 + shift;
            if (bit >= best)
                break;
            if (bit >= from_bit && marker_at(p, len, bit)) {
                best = bit;
                break;
            }
            from = (size_t)(hit - p) + 1;
        }
    }
    return best;
}

static PyObject *py_find_stream_end(PyObject *self, PyObject *args)
{
    Py_buffer in;
    Py_ssize_t from_bit;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*n:_find_stream_end", &in, &from_bit))
        return NULL;
    size_t bit = (size_t)-1;
    if (from_bit >= 0) {
        PyThreadState *ts = PyEval_SaveThread();
        bit = find_marker(in.buf, (size_t)in.len, (size_t)from_bit);
        PyEval_RestoreThread(ts);
    }
    PyBuffer_Release(&in);
    if (bit == (size_t)-1)
        return Py_BuildValue("(nn)", (Py_ssize_t)-1, (Py_ssize_t)-1);
    /* marker, CRC, padding: the stream's length in bytes */
    return Py_BuildValue("(nn)", (Py_ssize_t)bit, (Py_ssize_t)((bit + 48 + 32 + 7) / 8));
}

/* A fixed-size name from the daemon: never trusted to be terminated or UTF-8. */
static PyObject *str_field(const char *buf, size_t size)
{
    return PyUnicode_DecodeUTF8(buf, (Py_ssize_t)strnlen(buf, size), "replace");
}

#define STR(field) str_field(field, sizeof field)
#define U64(name) PyLong_FromUnsignedLongLong((unsigned long long)(name))

static PyObject *device_dict(const gpucomp_device_stats *d)
{
    return Py_BuildValue("{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:i,s:N,s:N,s:N}", "name", STR(d->name),
                         "batches", U64(d->batches), "requests", U64(d->requests), "bytes_in", U64(d->bytes_in),
                         "bytes_out", U64(d->bytes_out), "h2d_ns", U64(d->h2d_ns), "kernel_ns", U64(d->kernel_ns),
                         "d2h_ns", U64(d->d2h_ns), "wall_ns", U64(d->wall_ns), "fallbacks", U64(d->fallbacks),
                         "queue_depth", U64(d->queue_depth), "retired", d->retired, "requests_in_flight",
                         U64(d->requests_in_flight), "gpu", U64(d->gpu), "bytes_in_flight",
                         U64(d->bytes_in_flight));
}

static PyObject *stats_dict(const gpucomp_stats *s)
{
    PyObject *devices = PyList_New(0), *routing = PyList_New(0);
    if (!devices || !routing)
        goto fail;
    for (uint32_t i = 0; i < s->gpu_devices && i < GPUCOMP_MAX_DEVICES; i++) {
        PyObject *d = device_dict(&s->devices[i]);
        if (!d || PyList_Append(devices, d) < 0) {
            Py_XDECREF(d);
            goto fail;
        }
        Py_DECREF(d);
    }
    for (uint32_t i = 0; i < s->n_routing && i < GPUCOMP_MAX_CODECS; i++) {
        PyObject *r = STR(s->routing[i]);
        if (!r || PyList_Append(routing, r) < 0) {
            Py_XDECREF(r);
            goto fail;
        }
        Py_DECREF(r);
    }
    return Py_BuildValue(
        "{s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N}", "uptime_ms",
        U64(s->uptime_ms), "connections", U64(s->connections), "requests_ok", U64(s->requests_ok),
        "requests_failed", U64(s->requests_failed), "bytes_in", U64(s->bytes_in), "bytes_out", U64(s->bytes_out),
        "worker_threads", U64(s->worker_threads), "queue_depth", U64(s->queue_depth), "memory_in_use",
        U64(s->memory_in_use), "memory_budget", U64(s->memory_budget), "cpu_requests", U64(s->cpu_requests),
        "gpu_requests", U64(s->gpu_requests), "backend", STR(s->backend), "gpus", U64(s->gpus), "devices", devices,
        "registered_bytes", U64(s->registered_bytes), "register_limit", U64(s->register_limit), "routing", routing,
        "gpu_by_load", U64(s->gpu_by_load));
fail:
    Py_XDECREF(devices);
    Py_XDECREF(routing);
    return NULL;
}

/* STATS needs the daemon itself: gpucomp_connect, not gpucomp_open. */
static PyObject *py_stats(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = { "socket", NULL };
    const char *path = NULL;
    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|z:stats", names, &path))
        return NULL;
    gpucomp_client *c = NULL;
    gpucomp_stats s;
    memset(&s, 0, sizeof s);
    char msg[256] = "";
    PyThreadState *ts = PyEval_SaveThread();
    int rc = gpucomp_connect(path, &c);
    if (rc != GPUCOMP_OK)
        snprintf(msg, sizeof msg, "%s", gpucomp_connect_error());
    else if ((rc = gpucomp_stats_get(c, &s)) != GPUCOMP_OK)
        snprintf(msg, sizeof msg, "%s", gpucomp_last_error(c));
    gpucomp_close(c);
    PyEval_RestoreThread(ts);
    if (rc != GPUCOMP_OK) {
        raise_status(rc, msg);
        return NULL;
    }
    return stats_dict(&s);
}

static PyObject *py_version(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyUnicode_FromString(gpucomp_version());
}

static PyMethodDef methods[] = {
    { "_compress", (PyCFunction)(void (*)(void))py_compress, METH_VARARGS | METH_KEYWORDS,
      "_compress(data, compresslevel=9, codec='bzip2') -> (bytes, backend)" },
    { "_decompress", (PyCFunction)(void (*)(void))py_decompress, METH_VARARGS | METH_KEYWORDS,
      "_decompress(data, codec='bzip2') -> (bytes, backend)" },
    { "_find_stream_end", py_find_stream_end, METH_VARARGS,
      "_find_stream_end(data, from_bit) -> (marker bit, stream length) or (-1, -1)" },
    { "stats", (PyCFunction)(void (*)(void))py_stats, METH_VARARGS | METH_KEYWORDS,
      "stats(socket=None) -> dict: the daemon's counters (OSError when no daemon answers)" },
    { "library_version", py_version, METH_NOARGS, "libgpucomp-client's version" },
    { NULL, NULL, 0, NULL }
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gpucomp._gpucomp",
    .m_doc = "gpucompd's compression through libgpucomp-client",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__gpucomp(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    service_error = PyErr_NewException("gpucomp.ServiceError", PyExc_OSError, NULL);
    if (!service_error || PyModule_AddObjectRef(m, "ServiceError", service_error) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
