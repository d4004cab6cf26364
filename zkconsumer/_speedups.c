/* zkconsumer._speedups: the two per-message steps of the confluent fetch path, in C.
 *
 * Optional: setup.py builds it when a C compiler is there, and zkconsumer does the same
 * work in Python (slower) without it. Each function has a Python twin that the tests
 * compare it with:
 *
 *   split_messages(messages, timestamp_types) -> (runs, errors)
 *       twin: ConfluentBackend._group_py in _fetcher.py. Reads a list of
 *       confluent_kafka.Message into columns, one run per stretch of consecutive messages
 *       of one partition: runs is a list of (topic, partition, offsets, keys, values,
 *       timestamps, timestamp_types), the last five lists with one item per message;
 *       errors lists the messages that carry an error, in order. timestamp_types maps
 *       librdkafka's timestamp type (the first item of Message.timestamp()) to the one
 *       handed out. Only the Message's public methods are called.
 *
 *   message_zipper(cls) -> zip_messages
 *       twin: zip_messages(*iterables) is map(partial(tuple.__new__, cls), zip(*iterables)).
 *       cls is a tuple subclass with len(cls._fields) items (a NamedTuple); zip_messages
 *       takes that many iterables and takes items off them as zip does. The stream
 *       iterator calls it over list iterators on a chunk's columns.
 *
 * Why: measured per message on the development machine, the Python twins (map() over the
 * Message methods; map(tuple.__new__, ...) over zip() of the columns, with a for loop
 * that frees each message) cost about 200 to 300 and 110 ns, these about 115 and 60 ns:
 * most of what zkconsumer adds to what confluent-kafka itself spends per message is there.
 *
 *   LeaseDeadline(); lease_permit(item, n, deadline) -> iterator
 *       twin: _gate.PyLeaseDeadline and _gate.PyLeasePermit. The delivery gate's permit
 *       with a lease: item up to n times, each only while _gate.lease_clock() (CLOCK_BOOTTIME)
 *       is before deadline.deadline, a float the lease keeper moves on; once past it, the
 *       permit is spent. A process paused past its ZooKeeper lease hands out nothing on
 *       resume: the very next message checks the clock (about 20 ns, vDSO).
 *
 * None runs Python code of its own (given C iterators), so each call is atomic under
 * the GIL, as the map/zip/tuple.__new__ chain it replaces was (the stream iterator relies
 * on it: see _stream.py). Allocations may still run the garbage collector, as before.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>  /* offsetof */

/* -- message_zipper ------------------------------------------------------------------ */

/* The most fields a class may have: a message's items are gathered on the C stack. */
#define MAX_FIELDS 32

/* zip(*iterators) making a cls instance of each round of items. */
typedef struct {
    PyObject_VAR_HEAD
    PyTypeObject *cls;
    PyObject *its[1];  /* ob_size iterators */
} MessageZip;

static void
mzip_dealloc(MessageZip *z)
{
    PyObject_GC_UnTrack(z);
    Py_XDECREF(z->cls);
    for (Py_ssize_t i = 0; i < Py_SIZE(z); i++) {
        Py_XDECREF(z->its[i]);
    }
    PyObject_GC_Del(z);
}

static int
mzip_traverse(MessageZip *z, visitproc visit, void *arg)
{
    Py_VISIT(z->cls);
    for (Py_ssize_t i = 0; i < Py_SIZE(z); i++) {
        Py_VISIT(z->its[i]);
    }
    return 0;
}

/* As zip's next then tuple.__new__(cls, items): each iterator's next in order, ending (or
   raising) at the first that ends (or raises), the later ones untouched; the instance is
   allocated only once every item is taken. */
static PyObject *
mzip_next(MessageZip *z)
{
    Py_ssize_t n = Py_SIZE(z);
    PyObject *items[MAX_FIELDS];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = z->its[i];
        PyObject *item = Py_TYPE(it)->tp_iternext(it);
        if (item == NULL) {
            for (Py_ssize_t j = 0; j < i; j++) {
                Py_DECREF(items[j]);
            }
            return NULL;
        }
        items[i] = item;
    }
    /* What tuple.__new__(cls, items) does for a tuple subclass, without its argument
       parsing and the argument tuples it makes. */
    PyObject *o = z->cls->tp_alloc(z->cls, n);
    if (o == NULL) {
        for (Py_ssize_t j = 0; j < n; j++) {
            Py_DECREF(items[j]);
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(o, i, items[i]);  /* steals the reference */
    }
    return o;
}

static PyTypeObject MessageZipType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "zkconsumer._speedups.message_zip",
    .tp_basicsize = offsetof(MessageZip, its),
    .tp_itemsize = sizeof(PyObject *),
    .tp_dealloc = (destructor)mzip_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "zip(*iterables) making an instance of the zipper's class of each round.",
    .tp_traverse = (traverseproc)mzip_traverse,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)mzip_next,
};

/* self is (cls, n): the type and its number of fields. */
static PyObject *
zip_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyTypeObject *cls = (PyTypeObject *)PyTuple_GET_ITEM(self, 0);
    Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(self, 1));
    if (nargs != n) {
        PyErr_Format(PyExc_TypeError, "zip_messages() takes %zd iterables (%zd given)", n,
                     nargs);
        return NULL;
    }
    MessageZip *z = PyObject_GC_NewVar(MessageZip, &MessageZipType, n);
    if (z == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        z->its[i] = NULL;
    }
    Py_INCREF(cls);
    z->cls = cls;
    for (Py_ssize_t i = 0; i < n; i++) {
        z->its[i] = PyObject_GetIter(args[i]);
        if (z->its[i] == NULL) {
            Py_DECREF(z);  /* not tracked yet: mzip_dealloc's untrack is harmless */
            return NULL;
        }
    }
    PyObject_GC_Track(z);
    return (PyObject *)z;
}

static PyMethodDef zip_messages_def = {
    "zip_messages", (PyCFunction)(void (*)(void))zip_messages, METH_FASTCALL,
    "zip_messages(*iterables) -> iterator of the zipper's class, one per zip() round",
};

static PyObject *
message_zipper(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "message_zipper() takes a subclass of tuple");
        return NULL;
    }
    if (((PyTypeObject *)cls)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        /* Instance attributes (no __slots__ = ()) would be left unset. */
        PyErr_SetString(PyExc_TypeError,
                        "message_zipper() takes a tuple subclass without instance attributes");
        return NULL;
    }
    PyObject *fields = PyObject_GetAttrString(cls, "_fields");
    if (fields == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyObject_Length(fields);
    Py_DECREF(fields);
    if (n < 0) {
        return NULL;
    }
    if (n == 0 || n > MAX_FIELDS) {
        PyErr_Format(PyExc_ValueError, "message_zipper() takes a class of 1 to %d fields",
                     MAX_FIELDS);
        return NULL;
    }
    PyObject *self = Py_BuildValue("(On)", cls, n);
    if (self == NULL) {
        return NULL;
    }
    PyObject *zip = PyCFunction_NewEx(&zip_messages_def, self, module);
    Py_DECREF(self);
    return zip;
}

/* -- split_messages ------------------------------------------------------------------ */

enum { M_ERROR, M_TOPIC, M_PARTITION, M_OFFSET, M_KEY, M_VALUE, M_TIMESTAMP, M_COUNT };
static const char *const method_names[M_COUNT] = {
    "error", "topic", "partition", "offset", "key", "value", "timestamp",
};
/* The columns of a run, after its topic and partition. */
enum { C_OFFSETS, C_KEYS, C_VALUES, C_TIMESTAMPS, C_TYPES, C_COUNT };

/* descr(m): a method of m's type called on m. fn, when not NULL, is descr's C function
   (see noargs_function), called directly. */
static inline PyObject *
call_method(PyObject *descr, PyCFunction fn, PyObject *m)
{
    if (fn != NULL) {
        return fn(m, NULL);
    }
    return PyObject_Vectorcall(descr, &m, 1, NULL);
}

/* The C function behind descr if descr is a method descriptor (a method defined in C, as
   confluent_kafka.Message's are) for type that takes no arguments, else NULL.

   Why: calling the descriptor goes through its vectorcall, which checks the arguments and
   the instance's type and guards the recursion depth at each call; for seven methods a
   message that was about 35 ns of the 160 split_messages took. Here the checks are made
   once per call (the instance's type is checked per message by the caller). Cython calls
   a METH_NOARGS function the same way. */
static PyCFunction
noargs_function(PyObject *descr, PyTypeObject *type)
{
    if (!Py_IS_TYPE(descr, &PyMethodDescr_Type)) {
        return NULL;
    }
    PyMethodDescrObject *md = (PyMethodDescrObject *)descr;
    if (!PyType_IsSubtype(type, PyDescr_TYPE(md))) {
        return NULL;
    }
    int kind = md->d_method->ml_flags & (METH_VARARGS | METH_FASTCALL | METH_NOARGS | METH_O
                                         | METH_KEYWORDS | METH_METHOD);
    return kind == METH_NOARGS ? md->d_method->ml_meth : NULL;
}

/* The run being filled: run is (topic, partition, offsets, keys, values, timestamps,
   timestamp_types), borrowed from the runs list (NULL before the first); cols are its
   columns, made with room for every message left in the poll (NULL items after the first
   used ones), so each message is stored without a list append's checks and growth. */
typedef struct {
    PyObject *run;
    PyObject *cols[C_COUNT];
    Py_ssize_t used;
} Run;

/* Cuts the current run's columns to the messages stored in them. Returns 0, or -1. */
static int
finish_run(Run *r)
{
    if (r->run == NULL) {
        return 0;
    }
    for (int k = 0; k < C_COUNT; k++) {
        if (PyList_SetSlice(r->cols[k], r->used, PY_SSIZE_T_MAX, NULL) < 0) {
            return -1;
        }
    }
    r->run = NULL;
    return 0;
}

/* Finishes the current run and starts (topic, partition, ...) with room for room
   messages, appended to runs. Returns 0, or -1 on error. */
static int
new_run(PyObject *runs, Run *r, PyObject *topic, PyObject *partition, Py_ssize_t room)
{
    if (finish_run(r) < 0) {
        return -1;
    }
    PyObject *run = PyTuple_New(2 + C_COUNT);
    if (run == NULL) {
        return -1;
    }
    Py_INCREF(topic);
    PyTuple_SET_ITEM(run, 0, topic);
    Py_INCREF(partition);
    PyTuple_SET_ITEM(run, 1, partition);
    for (int k = 0; k < C_COUNT; k++) {
        PyObject *col = PyList_New(room);
        if (col == NULL) {
            Py_DECREF(run);
            return -1;
        }
        PyTuple_SET_ITEM(run, 2 + k, col);
        r->cols[k] = col;
    }
    int rc = PyList_Append(runs, run);
    Py_DECREF(run);  /* runs holds it (and drops it, columns and all, on an error) */
    if (rc < 0) {
        return -1;
    }
    r->run = run;
    r->used = 0;
    return 0;
}

/* Reads message m (of the descriptors' type) into the current run r (a new one if m is of
   another partition, with room for room messages) or errors. Returns 0, or -1 on error. */
static int
split_one(PyObject *m, PyObject **descr, PyCFunction *fn, PyObject *types, PyObject *runs,
          PyObject *errors, Run *r, Py_ssize_t room)
{
    int rc = -1;
    PyObject *stamp = NULL, *topic = NULL, *partition = NULL, *err = NULL;

    stamp = call_method(descr[M_TIMESTAMP], fn[M_TIMESTAMP], m);
    if (stamp == NULL) {
        goto done;
    }
    if (!PyTuple_Check(stamp) || PyTuple_GET_SIZE(stamp) != 2) {
        PyErr_SetString(PyExc_TypeError, "Message.timestamp() did not return a pair");
        goto done;
    }
    Py_ssize_t kind = PyLong_AsSsize_t(PyTuple_GET_ITEM(stamp, 0));
    if (kind == -1 && PyErr_Occurred()) {
        goto done;
    }
    if (kind < 0 || kind >= PyTuple_GET_SIZE(types)) {
        PyErr_Format(PyExc_ValueError, "unknown librdkafka timestamp type %zd", kind);
        goto done;
    }
    if (kind == 0) {
        /* RD_KAFKA_TIMESTAMP_NOT_AVAILABLE: librdkafka gives every errored message this
           type, so only these need looking at. */
        err = call_method(descr[M_ERROR], fn[M_ERROR], m);
        if (err == NULL) {
            goto done;
        }
        if (err != Py_None) {
            rc = PyList_Append(errors, m);
            goto done;
        }
    }
    topic = call_method(descr[M_TOPIC], fn[M_TOPIC], m);
    if (topic == NULL) {
        goto done;
    }
    partition = call_method(descr[M_PARTITION], fn[M_PARTITION], m);
    if (partition == NULL) {
        goto done;
    }
    int same = 0;
    if (r->run != NULL) {
        same = PyObject_RichCompareBool(partition, PyTuple_GET_ITEM(r->run, 1), Py_EQ);
        if (same > 0) {
            same = PyObject_RichCompareBool(topic, PyTuple_GET_ITEM(r->run, 0), Py_EQ);
        }
        if (same < 0) {
            goto done;
        }
    }
    /* (A run is full only if the list grew while being read: a finalizer run by the
       collector could, in principle, do that. Then the rest is another run.) */
    if ((!same || r->used == PyList_GET_SIZE(r->cols[0]))
        && new_run(runs, r, topic, partition, room) < 0) {
        goto done;
    }
    PyObject *item[C_COUNT];
    item[C_OFFSETS] = call_method(descr[M_OFFSET], fn[M_OFFSET], m);
    item[C_KEYS] = item[C_OFFSETS] ? call_method(descr[M_KEY], fn[M_KEY], m) : NULL;
    item[C_VALUES] = item[C_KEYS] ? call_method(descr[M_VALUE], fn[M_VALUE], m) : NULL;
    if (item[C_VALUES] == NULL) {
        Py_XDECREF(item[C_OFFSETS]);
        Py_XDECREF(item[C_KEYS]);
        goto done;
    }
    item[C_TIMESTAMPS] = Py_NewRef(PyTuple_GET_ITEM(stamp, 1));
    item[C_TYPES] = Py_NewRef(PyTuple_GET_ITEM(types, kind));
    for (int k = 0; k < C_COUNT; k++) {
        PyList_SET_ITEM(r->cols[k], r->used, item[k]);  /* steals the reference */
    }
    r->used++;
    rc = 0;
done:
    Py_XDECREF(stamp);
    Py_XDECREF(topic);
    Py_XDECREF(partition);
    Py_XDECREF(err);
    return rc;
}

static PyObject *
split_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "split_messages() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *messages = args[0], *types = args[1];
    if (!PyList_Check(messages)) {
        PyErr_SetString(PyExc_TypeError, "split_messages() takes a list of messages");
        return NULL;
    }
    if (!PyTuple_Check(types)) {
        PyErr_SetString(PyExc_TypeError, "split_messages() takes a tuple of timestamp types");
        return NULL;
    }
    PyObject *result = NULL, *runs = NULL, *errors = NULL, *m = NULL;
    PyObject *descr[M_COUNT] = {NULL};
    PyCFunction fn[M_COUNT] = {NULL};
    Run r = {NULL, {NULL}, 0};
    PyTypeObject *type = NULL;

    runs = PyList_New(0);
    errors = PyList_New(0);
    if (runs == NULL || errors == NULL) {
        goto done;
    }
    /* Indexed afresh each time: an allocation may run the garbage collector, and so a
       finalizer's Python code, which could (in principle) change the list. */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(messages); i++) {
        m = PyList_GET_ITEM(messages, i);
        Py_INCREF(m);
        if (type == NULL) {
            type = Py_TYPE(m);
            Py_INCREF(type);
            for (int k = 0; k < M_COUNT; k++) {
                descr[k] = PyObject_GetAttrString((PyObject *)type, method_names[k]);
                if (descr[k] == NULL) {
                    goto done;
                }
                fn[k] = noargs_function(descr[k], type);
            }
        }
        else if (Py_TYPE(m) != type) {
            PyErr_Format(PyExc_TypeError, "split_messages(): a %.100s among %.100s messages",
                         Py_TYPE(m)->tp_name, type->tp_name);
            goto done;
        }
        if (split_one(m, descr, fn, types, runs, errors, &r,
                      PyList_GET_SIZE(messages) - i) < 0) {
            goto done;
        }
        Py_CLEAR(m);
    }
    if (finish_run(&r) < 0) {
        goto done;
    }
    result = PyTuple_Pack(2, runs, errors);
done:
    Py_XDECREF(m);
    for (int k = 0; k < M_COUNT; k++) {
        Py_XDECREF(descr[k]);
    }
    Py_XDECREF(type);
    Py_XDECREF(runs);
    Py_XDECREF(errors);
    return result;
}

/* -- lease_permit -------------------------------------------------------------------- */

#include <structmember.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    double deadline;  /* lease_clock() seconds; written from Python, read per message */
} LeaseDeadline;

static PyObject *
ldeadline_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwds != NULL && PyDict_GET_SIZE(kwds) != 0)) {
        PyErr_SetString(PyExc_TypeError, "LeaseDeadline() takes no arguments");
        return NULL;
    }
    LeaseDeadline *d = (LeaseDeadline *)type->tp_alloc(type, 0);
    if (d != NULL) {
        d->deadline = -Py_HUGE_VAL;
    }
    return (PyObject *)d;
}

static PyMemberDef ldeadline_members[] = {
    {"deadline", T_DOUBLE, offsetof(LeaseDeadline, deadline), 0,
     "lease_clock() seconds at which permits stop (-inf: stopped)"},
    {NULL},
};

static PyTypeObject LeaseDeadlineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "zkconsumer._speedups.LeaseDeadline",
    .tp_basicsize = sizeof(LeaseDeadline),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "LeaseDeadline(): a deadline (float seconds of _gate.lease_clock()) that lease "
              "permits read at every item.",
    .tp_new = ldeadline_new,
    .tp_members = ldeadline_members,
};

typedef struct {
    PyObject_HEAD
    PyObject *item;
    LeaseDeadline *deadline;
    Py_ssize_t left;
} LeasePermit;

static void
lpermit_dealloc(LeasePermit *p)
{
    PyObject_GC_UnTrack(p);
    Py_XDECREF(p->item);
    Py_XDECREF(p->deadline);
    PyObject_GC_Del(p);
}

static int
lpermit_traverse(LeasePermit *p, visitproc visit, void *arg)
{
    Py_VISIT(p->item);
    Py_VISIT(p->deadline);
    return 0;
}

/* _gate.lease_clock(): CLOCK_BOOTTIME where there is one (it also counts a suspended
   machine, a frozen VM), else CLOCK_MONOTONIC (time.monotonic()). */
static double
monotonic_now(void)
{
    struct timespec ts;
#ifdef CLOCK_BOOTTIME
    clock_gettime(CLOCK_BOOTTIME, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Ends (NULL, no exception) once n items were given or the deadline passed; stays ended. */
static PyObject *
lpermit_next(LeasePermit *p)
{
    if (p->left <= 0) {
        return NULL;
    }
    if (monotonic_now() >= p->deadline->deadline) {
        p->left = 0;
        return NULL;
    }
    p->left--;
    Py_INCREF(p->item);
    return p->item;
}

static PyObject *
lpermit_length_hint(LeasePermit *p, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(p->left > 0 ? p->left : 0);
}

static PyMethodDef lpermit_methods[] = {
    {"__length_hint__", (PyCFunction)lpermit_length_hint, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LeasePermitType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "zkconsumer._speedups.lease_permit",
    .tp_basicsize = sizeof(LeasePermit),
    .tp_dealloc = (destructor)lpermit_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "item up to n times, each while lease_clock() < deadline.deadline.",
    .tp_traverse = (traverseproc)lpermit_traverse,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)lpermit_next,
    .tp_methods = lpermit_methods,
};

static PyObject *
lease_permit(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "lease_permit() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyObject_TypeCheck(args[2], &LeaseDeadlineType)) {
        PyErr_SetString(PyExc_TypeError, "lease_permit(): deadline must be a LeaseDeadline");
        return NULL;
    }
    LeasePermit *p = PyObject_GC_New(LeasePermit, &LeasePermitType);
    if (p == NULL) {
        return NULL;
    }
    Py_INCREF(args[0]);
    p->item = args[0];
    Py_INCREF(args[2]);
    p->deadline = (LeaseDeadline *)args[2];
    p->left = n;
    PyObject_GC_Track(p);
    return (PyObject *)p;
}

/* -- module -------------------------------------------------------------------------- */

static PyMethodDef speedups_methods[] = {
    {"message_zipper", (PyCFunction)message_zipper, METH_O,
     "message_zipper(cls) -> zip_messages: zip_messages(*iterables) is "
     "map(partial(tuple.__new__, cls), zip(*iterables)), faster."},
    {"lease_permit", (PyCFunction)(void (*)(void))lease_permit, METH_FASTCALL,
     "lease_permit(item, n, deadline) -> iterator: item up to n times, each while "
     "lease_clock() < deadline.deadline."},
    {"split_messages", (PyCFunction)(void (*)(void))split_messages, METH_FASTCALL,
     "split_messages(messages, timestamp_types) -> (runs, errors): confluent_kafka "
     "messages read into columns, one run per stretch of one partition."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "zkconsumer._speedups",
    "C versions of the confluent fetch path's per-message steps (see _speedups.c).",
    -1,
    speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&MessageZipType) < 0 || PyType_Ready(&LeaseDeadlineType) < 0
            || PyType_Ready(&LeasePermitType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&LeaseDeadlineType);
    if (PyModule_AddObject(m, "LeaseDeadline", (PyObject *)&LeaseDeadlineType) < 0) {
        Py_DECREF(&LeaseDeadlineType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
