/* The compiled hot path of eager key tracking (optional: jaxlab.keys.hot says whether it
 * was built; without it, track.py's Python wrappers do the same, line for line).
 *
 * An eager loop (key, sub = split(key); normal(sub, ...)) calls three hooks a pair: the
 * split's wrapper, the unpacking watch and the draw's wrapper. Their common case, a key
 * unpacked from a noted split, is here: the same checks, the same notes in the lineage's
 * _noted list and kids dict, in the same order, as track._wrap's wrapper and
 * events.KeyRecorder.note_kid / unpacked. Anything else goes to the Python wrapper
 * (`slow`) before any side effect, or to Python helpers after JAX's call (`record`,
 * `fail`): this file holds no rule of its own. configure() hands it the session's objects.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>

/* an exception set aside while the lock is released or a helper runs */
#if PY_VERSION_HEX >= 0x030C0000
#define SAVE_EXC(name) PyObject *name = PyErr_GetRaisedException()
#define RESTORE_EXC(name) PyErr_SetRaisedException(name)
#define DROP_EXC(name) Py_XDECREF(name)
#else
#define SAVE_EXC(name) PyObject *name##_t, *name##_v, *name##_tb; \
    PyErr_Fetch(&name##_t, &name##_v, &name##_tb)
#define RESTORE_EXC(name) PyErr_Restore(name##_t, name##_v, name##_tb)
#define DROP_EXC(name) (Py_XDECREF(name##_t), Py_XDECREF(name##_v), Py_XDECREF(name##_tb))
#endif

/* the session's objects (configure) */
static PyObject *g_wrappers, *g_switch, *g_work, *g_kids, *g_spots, *g_recorder;
static PyObject *g_user_site, *g_record, *g_fail, *g_aval, *g_drop_dead;
static Py_ssize_t g_noted_limit, g_eager_keys, g_unread_splits, g_max_kids;

static PyObject *s_paused, *s_draws, *s_lock, *s_noted, *s_data_from, *s_calls, *s_outs;
static PyObject *s_unread, *s_read_unread, *s_subscribers, *s_notify, *s_aval, *s_acquire;
static PyObject *s_release, *s_append, *s_token_base, *s_by_token, *s_num;

static int
attr_is_zero(PyObject *obj, PyObject *name)
{  /* 1: obj.name == 0 (an int), 0: not, -1: error */
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int zero = PyLong_CheckExact(v) ? (PyLong_AsLong(v) == 0) : !PyObject_IsTrue(v);
    Py_DECREF(v);
    return zero;
}

static int
call_method0(PyObject *obj, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(obj, name);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int
append_all(PyObject *list, PyObject **items, int n)
{
    for (int i = 0; i < n; i++)
        if (PyList_Append(list, items[i]) < 0)
            return -1;
    return 0;
}

/* KeyRecorder.note_kid, for the lineage: 1 noted, 0 not (record it by its data), -1 error.
 * The lock is taken without waiting; when another thread holds it, the Python method
 * (which waits) is asked instead. */
static int
note(PyObject *op, PyObject *known, PyObject *site, PyObject *out, PyObject *count)
{
    PyObject *r = g_recorder, *lock, *got, *noted = NULL, *v;
    int result = -1;
    lock = PyObject_GetAttr(r, s_lock);
    if (lock == NULL)
        return -1;
    got = PyObject_CallMethodOneArg(lock, s_acquire, Py_False);
    if (got == NULL) {
        Py_DECREF(lock);
        return -1;
    }
    if (got != Py_True) {  /* another thread's: the method waits for it */
        Py_DECREF(got);
        Py_DECREF(lock);
        PyObject *res = PyObject_CallMethod(r, "note_kid", "OOOOO", op, known, site, out, count);
        if (res == NULL)
            return -1;
        result = PyObject_IsTrue(res);
        Py_DECREF(res);
        return result;
    }
    Py_DECREF(got);
    PyObject *token = PyTuple_GET_ITEM(known, 1);
    noted = PyObject_GetAttr(r, s_noted);
    if (noted == NULL || !PyList_CheckExact(noted))
        goto done;
    v = PyObject_GetAttr(r, s_data_from);
    if (v == NULL)
        goto done;
    int below = PyObject_RichCompareBool(token, v, Py_LT);
    Py_DECREF(v);
    if (below < 0)
        goto done;
    v = PyObject_GetAttr(r, s_calls);
    if (v == NULL)
        goto done;
    int calls = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (calls < 0)
        goto done;
    if (below || calls || PyList_GET_SIZE(noted) >= g_noted_limit) {
        result = 0;
        goto done;
    }
    if (count == Py_None) {  /* a draw: its abstract value */
        PyObject *aval = PyObject_GetAttr(out, s_aval);
        if (aval == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                goto done;
            PyErr_Clear();
            result = 0;
            goto done;
        }
        PyObject *row[8] = {op, token, PyTuple_GET_ITEM(known, 2), site, aval, g_aval,
                            Py_None, Py_None};
        int bad = append_all(noted, row, 8);
        Py_DECREF(aval);
        if (bad < 0)
            goto done;
    }
    else if (PyLong_CheckExact(count)) {  /* a split into `count` keys */
        Py_ssize_t at = PyList_GET_SIZE(noted);
        PyObject *row[8] = {op, token, PyTuple_GET_ITEM(known, 2), site, count, Py_None,
                            Py_None, out};
        if (append_all(noted, row, 8) < 0)
            goto done;
        long n = PyLong_AsLong(count);
        if (n == -1 && PyErr_Occurred())
            PyErr_Clear();  /* too big to be one of EAGER_KEYS */
        else if (0 < n && n <= g_eager_keys) {
            PyObject *outs = PyObject_GetAttr(r, s_outs);
            if (outs == NULL)
                goto done;
            PyObject *id = PyLong_FromVoidPtr(out), *where = PyLong_FromSsize_t(at);
            int bad = (id == NULL || where == NULL) ? -1 : PyObject_SetItem(outs, id, where);
            Py_XDECREF(id);
            Py_XDECREF(where);
            Py_DECREF(outs);
            if (bad < 0)
                goto done;
        }
        PyObject *unread = PyObject_GetAttr(r, s_unread);
        if (unread == NULL)
            goto done;
        PyObject *where = PyLong_FromSsize_t(at + 7);
        PyObject *res = where ? PyObject_CallMethodOneArg(unread, s_append, where) : NULL;
        Py_XDECREF(where);
        if (res == NULL) {
            Py_DECREF(unread);
            goto done;
        }
        Py_DECREF(res);
        Py_ssize_t size = PyObject_Length(unread);
        Py_DECREF(unread);
        if (size < 0 || (size > g_unread_splits && call_method0(r, s_read_unread) < 0))
            goto done;
    }
    else {  /* a split into an array of keys: its shape is read */
        result = 0;
        goto done;
    }
    result = 1;
done:
    Py_XDECREF(noted);
    {
        SAVE_EXC(exc);
        if (call_method0(lock, s_release) < 0) {
            DROP_EXC(exc);
            Py_DECREF(lock);
            return -1;
        }
        RESTORE_EXC(exc);
    }
    Py_DECREF(lock);
    if (result != 1)
        return result;
    PyObject *subs = PyObject_GetAttr(r, s_subscribers);
    if (subs == NULL)
        return -1;
    int any = PyObject_IsTrue(subs);
    Py_DECREF(subs);
    if (any < 0 || (any && call_method0(r, s_notify) < 0))
        return -1;
    return 1;
}

/* ----------------------------------------------------------------- the wrappers */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *name;      /* "split", "normal", ... */
    PyObject *original;  /* JAX's function */
    PyObject *slow;      /* track._wrap's Python wrapper: every other case */
    PyObject *note;      /* None: note() here; else a callable (a test's counting note) */
    int split;
} Hook;

static PyObject *
call_slow(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

/* args and kwargs as Python has them, for the helpers (not the common case) */
static int
as_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **tuple,
        PyObject **dict)
{
    *tuple = PyTuple_New(nargs);
    *dict = PyDict_New();
    if (*tuple == NULL || *dict == NULL)
        goto bad;
    for (Py_ssize_t i = 0; i < nargs; i++)
        PyTuple_SET_ITEM(*tuple, i, Py_NewRef(args[i]));
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nk; i++)
        if (PyDict_SetItem(*dict, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0)
            goto bad;
    return 0;
bad:
    Py_CLEAR(*tuple);
    Py_CLEAR(*dict);
    return -1;
}

static PyObject *
hook_call(Hook *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || PyDict_GET_SIZE(g_wrappers) == 0)
        return call_slow(self, args, nargsf, kwnames);
    int ok = attr_is_zero(g_switch, s_paused);
    if (ok > 0)
        ok = attr_is_zero(g_work, s_draws);
    if (ok < 0)
        return NULL;
    if (!ok)  /* paused, or jaxlab's own work: the Python wrapper says what to do */
        return call_slow(self, args, nargsf, kwnames);
    /* the user's line is read off the calling frame (none: called from C alone) */
    PyFrameObject *frame = PyEval_GetFrame();  /* borrowed */
    if (frame == NULL)
        return call_slow(self, args, nargsf, kwnames);
    PyObject *key = args[0];
    PyObject *id = PyLong_FromVoidPtr(key);
    if (id == NULL)
        return NULL;
    PyObject *known = PyDict_GetItemWithError(g_kids, id);  /* borrowed */
    if (known == NULL || !PyTuple_CheckExact(known) || PyTuple_GET_SIZE(known) != 3
        || !PyWeakref_CheckRef(PyTuple_GET_ITEM(known, 0))
        || PyWeakref_GetObject(PyTuple_GET_ITEM(known, 0)) != key) {
        Py_DECREF(id);
        if (PyErr_Occurred())
            return NULL;
        return call_slow(self, args, nargsf, kwnames);
    }
    Py_INCREF(known);  /* (user_site below runs Python) */
    /* the count of keys a split makes, as given (2 when not) */
    PyObject *count = Py_None;
    if (self->split) {
        count = nargs > 1 ? args[1] : NULL;
        Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
        for (Py_ssize_t i = 0; i < nk && count == NULL; i++) {
            int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(kwnames, i), s_num, Py_EQ);
            if (eq < 0) {
                Py_DECREF(id);
                Py_DECREF(known);
                return NULL;
            }
            if (eq)
                count = args[nargs + i];
        }
    }
    /* the user's line: the calling frame's instruction, as user_site caches it */
    PyObject *site = NULL;
    {
        PyCodeObject *code = PyFrame_GetCode(frame);
        PyObject *spot = Py_BuildValue("(Ni)", PyLong_FromVoidPtr(code), PyFrame_GetLasti(frame));
        PyObject *found = spot ? PyDict_GetItemWithError(g_spots, spot) : NULL;
        Py_XDECREF(spot);
        if (found != NULL && PyTuple_CheckExact(found) && PyTuple_GET_SIZE(found) == 2
            && PyTuple_GET_ITEM(found, 0) == (PyObject *)code)
            site = Py_NewRef(PyTuple_GET_ITEM(found, 1));
        Py_DECREF(code);
        if (PyErr_Occurred()) {
            Py_XDECREF(site);
            Py_DECREF(id);
            Py_DECREF(known);
            return NULL;
        }
        if (site == NULL)
            site = PyObject_CallOneArg(g_user_site, (PyObject *)frame);
    }
    if (site == NULL) {
        Py_DECREF(id);
        Py_DECREF(known);
        return NULL;
    }
    /* used: forgotten (a second use is read) */
    if (PyDict_DelItem(g_kids, id) < 0)
        PyErr_Clear();
    Py_DECREF(id);
    PyObject *out = PyObject_Vectorcall(self->original, args, nargsf, kwnames);
    if (out == NULL) {  /* consumed all the same: the Python side records it, then re-raise */
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {  /* (an interrupt: as in Python) */
            Py_DECREF(known);
            Py_DECREF(site);
            return NULL;
        }
        SAVE_EXC(exc);
        PyObject *r = PyObject_CallFunctionObjArgs(g_fail, self->name, key, site, NULL);
        Py_DECREF(known);
        Py_DECREF(site);
        if (r == NULL) {
            DROP_EXC(exc);
            return NULL;
        }
        Py_DECREF(r);
        RESTORE_EXC(exc);
        return NULL;
    }
    PyObject *two = NULL;
    if (self->split && count == NULL) {
        count = two = PyLong_FromLong(2);
        if (two == NULL) {
            Py_DECREF(known);
            Py_DECREF(site);
            Py_DECREF(out);
            return NULL;
        }
    }
    int noted;
    if (self->note == Py_None)
        noted = note(self->name, known, site, out, count);
    else {
        PyObject *res = PyObject_CallFunctionObjArgs(self->note, self->name, known, site, out,
                                                     count, NULL);
        noted = res == NULL ? -1 : PyObject_IsTrue(res);
        Py_XDECREF(res);
    }
    Py_XDECREF(two);
    Py_DECREF(known);
    if (noted != 0) {
        Py_DECREF(site);
        if (noted < 0) {
            Py_DECREF(out);
            return NULL;
        }
        return out;
    }
    /* not noted (maybe a reuse): recorded by its data, now */
    PyObject *tuple, *dict;
    PyObject *res = NULL;
    if (as_args(args, nargs, kwnames, &tuple, &dict) == 0) {
        res = PyObject_CallFunctionObjArgs(g_record, self->name, key, out, site, tuple, dict,
                                           NULL);
        Py_DECREF(tuple);
        Py_DECREF(dict);
    }
    Py_DECREF(site);
    Py_DECREF(out);
    return res;
}

static PyObject *
hook_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return hook_call((Hook *)self, args, nargsf, kwnames);
}

static PyObject *
hook_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *name, *original, *slow, *note_fn;
    int split;
    static char *kw[] = {"name", "original", "slow", "note", "split", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOOOp", kw, &name, &original, &slow,
                                     &note_fn, &split))
        return NULL;
    Hook *self = (Hook *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = hook_vectorcall;
    self->dict = PyDict_New();
    if (self->dict == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->name = Py_NewRef(name);
    self->original = Py_NewRef(original);
    self->slow = Py_NewRef(slow);
    self->note = Py_NewRef(note_fn);
    self->split = split;
    return (PyObject *)self;
}

static int
hook_traverse(Hook *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dict);
    Py_VISIT(self->name);
    Py_VISIT(self->original);
    Py_VISIT(self->slow);
    Py_VISIT(self->note);
    return 0;
}

static int
hook_clear(Hook *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->name);
    Py_CLEAR(self->original);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->note);
    return 0;
}

static void
hook_dealloc(Hook *self)
{
    PyObject_GC_UnTrack(self);
    hook_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
hook_get(PyObject *self, PyObject *obj, PyObject *type)
{  /* bound as a method, as the Python function it stands for would be */
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *
hook_repr(Hook *self)
{
    return PyUnicode_FromFormat("<jaxlab key-tracking wrapper of jax.random.%U>", self->name);
}

static PyMemberDef hook_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(Hook, dict), READONLY},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Hook, vectorcall), READONLY},
    {"slow", T_OBJECT, offsetof(Hook, slow), READONLY, "the Python wrapper"},
    {NULL},
};

static PyGetSetDef hook_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyTypeObject HookType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jaxlab.keys._hot.Hook",
    .tp_doc = "A jax.random function, tracked: the common eager case compiled.",
    .tp_basicsize = sizeof(Hook),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = hook_new,
    .tp_dealloc = (destructor)hook_dealloc,
    .tp_traverse = (traverseproc)hook_traverse,
    .tp_clear = (inquiry)hook_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Hook, vectorcall),
    .tp_dictoffset = offsetof(Hook, dict),
    .tp_descr_get = hook_get,
    .tp_repr = (reprfunc)hook_repr,
    .tp_members = hook_members,
    .tp_getset = hook_getset,
};

/* ----------------------------------------------------------------- the unpacking watch */

/* KeyRecorder.unpacked(array, keys): a noted split's result unpacked the first time: its
 * keys known by object from now on (their tokens); its data read later, in a batch. */
static PyObject *
unpacked(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "unpacked(array, keys)");
        return NULL;
    }
    PyObject *array = args[0], *keys = args[1], *r = g_recorder;
    PyObject *outs = PyObject_GetAttr(r, s_outs);
    if (outs == NULL)
        return NULL;
    PyObject *id = PyLong_FromVoidPtr(array);
    PyObject *at_obj = id ? PyDict_GetItemWithError(outs, id) : NULL;
    Py_XINCREF(at_obj);
    if (at_obj != NULL && PyDict_DelItem(outs, id) < 0)
        Py_CLEAR(at_obj);
    Py_XDECREF(id);
    Py_DECREF(outs);
    if (at_obj == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(keys);
    Py_ssize_t at = PyLong_AsSsize_t(at_obj);
    Py_DECREF(at_obj);
    if (at == -1 && PyErr_Occurred())
        return NULL;
    PyObject *base = PyObject_GetAttr(r, s_token_base);
    PyObject *noted = base ? PyObject_GetAttr(r, s_noted) : NULL;
    PyObject *made = NULL, *result = NULL;
    if (noted == NULL)
        goto done;
    if (!PyList_Check(noted)) {
        result = Py_NewRef(keys);
        goto done;
    }
    if (at + 7 >= PyList_GET_SIZE(noted) || PyList_GET_ITEM(noted, at + 7) != array) {
        result = Py_NewRef(keys);  /* recorded since */
        goto done;
    }
    made = PySequence_Tuple(keys);  /* JAX's own iterator */
    if (made == NULL)
        goto done;
    if (PyDict_GET_SIZE(g_kids) > g_max_kids) {
        PyObject *res = PyObject_CallNoArgs(g_drop_dead);
        if (res == NULL)
            goto done;
        Py_DECREF(res);
    }
    if (at + 7 >= PyList_GET_SIZE(noted)) {  /* (JAX's iterator ran Python: never so) */
        result = PyObject_GetIter(made);
        goto done;
    }
    Py_ssize_t first = PyLong_AsSsize_t(base);
    if (first == -1 && PyErr_Occurred())
        goto done;
    first += 2 * at;
    PyObject *impl = Py_NewRef(PyList_GET_ITEM(noted, at + 2));
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(made); i++) {
        PyObject *key = PyTuple_GET_ITEM(made, i);
        PyObject *ref = PyWeakref_NewRef(key, NULL);
        PyObject *entry = ref ? Py_BuildValue("(NnO)", ref, first + i, impl) : NULL;
        PyObject *kid = entry ? PyLong_FromVoidPtr(key) : NULL;
        int bad = kid == NULL ? -1 : PyDict_SetItem(g_kids, kid, entry);
        Py_XDECREF(kid);
        Py_XDECREF(entry);
        if (bad < 0) {
            Py_DECREF(impl);
            goto done;
        }
    }
    Py_DECREF(impl);
    if (PyObject_SetAttr(r, s_by_token, Py_True) < 0)
        goto done;
    result = PyObject_GetIter(made);
done:
    Py_XDECREF(made);
    Py_XDECREF(noted);
    Py_XDECREF(base);
    return result;
}

/* The unpacking watch itself: the key array class's __iter__ while tracking, JAX's own
 * __iter__ (`original`) then unpacked(); bound as a method, as the Python one it stands
 * for would be. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *original;
} Watch;

static PyObject *
watch_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "__iter__(self)");
        return NULL;
    }
    PyObject *keys = PyObject_CallOneArg(((Watch *)self)->original, args[0]);
    if (keys == NULL)
        return NULL;
    PyObject *pair[2] = {args[0], keys};
    PyObject *made = unpacked(NULL, pair, 2);
    Py_DECREF(keys);
    return made;
}

static PyObject *
watch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *original;
    static char *kw[] = {"original", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", kw, &original))
        return NULL;
    Watch *self = (Watch *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = watch_vectorcall;
    self->original = Py_NewRef(original);
    return (PyObject *)self;
}

static int
watch_traverse(Watch *self, visitproc visit, void *arg)
{
    Py_VISIT(self->original);
    return 0;
}

static int
watch_clear(Watch *self)
{
    Py_CLEAR(self->original);
    return 0;
}

static void
watch_dealloc(Watch *self)
{
    PyObject_GC_UnTrack(self);
    watch_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef watch_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(Watch, original), READONLY, "JAX's own __iter__"},
    {NULL},
};

static PyTypeObject WatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "jaxlab.keys._hot.Watch",
    .tp_doc = "A key array's __iter__ while keys are tracked: JAX's, then the watch.",
    .tp_basicsize = sizeof(Watch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = watch_new,
    .tp_dealloc = (destructor)watch_dealloc,
    .tp_traverse = (traverseproc)watch_traverse,
    .tp_clear = (inquiry)watch_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Watch, vectorcall),
    .tp_descr_get = hook_get,
    .tp_members = watch_members,
};

/* ----------------------------------------------------------------- configure */

static PyObject *
configure(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kw[] = {"wrappers", "switch", "work", "kids", "spots", "recorder",
                         "user_site", "record", "fail", "aval", "drop_dead",
                         "noted_limit", "eager_keys", "unread_splits", "max_kids", NULL};
    PyObject *o[11];
    Py_ssize_t n[4];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOO!O!OOOOOOnnnn", kw, &PyDict_Type,
                                     &o[0], &o[1], &o[2], &PyDict_Type, &o[3], &PyDict_Type,
                                     &o[4], &o[5], &o[6], &o[7], &o[8], &o[9], &o[10],
                                     &n[0], &n[1], &n[2], &n[3]))
        return NULL;
    PyObject **slots[11] = {&g_wrappers, &g_switch, &g_work, &g_kids, &g_spots, &g_recorder,
                            &g_user_site, &g_record, &g_fail, &g_aval, &g_drop_dead};
    for (int i = 0; i < 11; i++)
        Py_XSETREF(*slots[i], Py_NewRef(o[i]));
    g_noted_limit = n[0];
    g_eager_keys = n[1];
    g_unread_splits = n[2];
    g_max_kids = n[3];
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand the session's objects to the hot path (once, before any Hook is called)."},
    {"unpacked", (PyCFunction)(void (*)(void))unpacked, METH_FASTCALL,
     "KeyRecorder.unpacked(array, keys), compiled."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_hot", "The compiled hot path of eager key tracking.", -1,
    methods,
};

#define INTERN(var, text)                                  \
    if ((var = PyUnicode_InternFromString(text)) == NULL) \
        return NULL

PyMODINIT_FUNC
PyInit__hot(void)
{
    INTERN(s_paused, "paused");
    INTERN(s_draws, "draws");
    INTERN(s_lock, "_lock");
    INTERN(s_noted, "_noted");
    INTERN(s_data_from, "_data_from");
    INTERN(s_calls, "_calls");
    INTERN(s_outs, "_outs");
    INTERN(s_unread, "_unread");
    INTERN(s_read_unread, "_read_unread");
    INTERN(s_subscribers, "_subscribers");
    INTERN(s_notify, "_notify");
    INTERN(s_aval, "aval");
    INTERN(s_acquire, "acquire");
    INTERN(s_release, "release");
    INTERN(s_append, "append");
    INTERN(s_token_base, "_token_base");
    INTERN(s_by_token, "_by_token");
    INTERN(s_num, "num");
    if (PyType_Ready(&HookType) < 0 || PyType_Ready(&WatchType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Hook", (PyObject *)&HookType) < 0
        || PyModule_AddObjectRef(m, "Watch", (PyObject *)&WatchType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
