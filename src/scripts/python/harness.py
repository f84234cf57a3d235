"""Runs one Sluice script task inside a freshly forked child (docs/script-service.md).

Loaded by zygote.py before it forks, so children inherit it warm.
"""

import base64
import datetime
import json
import linecache
import os
import resource
import sys
import sysconfig
import traceback
import types
import zipimport
from collections.abc import Awaitable

# Frames from these files are the harness, not the script: hidden from tracebacks.
HARNESS_FILES = {__file__}
# Set by the zygote when the task writes into tmpfs mounts of this size (docs/script-service.md).
DISK_BYTES = 0


def to_json(obj):
    # docs/script-service.md: datetime/date become ISO 8601 text; tuples are lists already.
    if isinstance(obj, (datetime.datetime, datetime.date, datetime.time)):
        return obj.isoformat()
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


CO_VARARGS, CO_VARKEYWORDS, CO_ITERABLE_COROUTINE = 0x04, 0x08, 0x100


def parameter_shape(fn):
    """(positional, var_positional, keyword_only, var_keyword) of main's signature.

    A plain function answers from its code object: inspect.signature would work too, but in a
    freshly forked child it writes to ~100 shared pages (copy-on-write faults on every task).
    """
    code = getattr(fn, "__code__", None)
    if type(fn) is types.FunctionType and not fn.__dict__ and code is not None:
        # No __wrapped__ or __signature__ in __dict__: the code object is the signature.
        return (code.co_argcount, bool(code.co_flags & CO_VARARGS), code.co_kwonlyargcount,
                bool(code.co_flags & CO_VARKEYWORDS))
    import inspect  # classes, partials, decorated functions

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = [p.kind for p in params]
    return (sum(k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                for k in kinds),
            inspect.Parameter.VAR_POSITIONAL in kinds,
            kinds.count(inspect.Parameter.KEYWORD_ONLY),
            inspect.Parameter.VAR_KEYWORD in kinds)


def call_main(fn, param):
    shape = parameter_shape(fn)
    if shape is None:
        out = fn(param)
    else:
        positional, var_positional, keyword_only, var_keyword = shape
        named = positional + keyword_only + var_keyword
        if not (positional or var_positional or keyword_only or var_keyword):
            out = fn()
        elif named > 1 or (keyword_only and not positional) or \
                (var_keyword and not (positional or var_positional or keyword_only)):
            out = fn(**param) if isinstance(param, dict) else fn(param)
        else:
            out = fn(param)
    if is_awaitable(out):
        # Only async mains get a loop; a sync main never runs inside one.
        import asyncio  # only async mains pay for it (it is not preloaded: see zygote.py)

        async def wait(aw):
            return await aw
        out = asyncio.run(wait(out))
    return out


def is_awaitable(obj):
    # inspect.isawaitable without importing inspect.
    return isinstance(obj, (types.CoroutineType, Awaitable)) or (
        isinstance(obj, types.GeneratorType) and bool(obj.gi_code.co_flags & CO_ITERABLE_COROUTINE))


STDLIB = sysconfig.get_paths()["stdlib"]


def shown_file(filename):
    """A frame's file as a traceback shows it: never a directory of this host (the task's work
    directory, the data directory's environments, Python's install)."""
    if ".zip/" in filename:
        return filename.split(".zip/", 1)[-1]
    if not os.path.isabs(filename):
        return filename
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in filename:
            return filename.split(marker, 1)[-1]
    if filename.startswith(STDLIB + "/"):
        return filename[len(STDLIB) + 1:]
    return os.path.basename(filename)


def user_traceback(exc):
    # Drop every frame up to the harness's last so the traceback starts at the script: an async
    # main runs under asyncio.run and the harness's `wait`, which the script never called.
    tb, last = exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in HARNESS_FILES:
            last = tb
        tb = tb.tb_next
    tb = last.tb_next if last is not None else exc.__traceback__
    te = traceback.TracebackException(type(exc), exc, tb, compact=True)
    # The source lines were read when `te` was built: renaming the files now keeps them.
    todo, seen = [te], set()
    while todo:
        t = todo.pop()
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        for fs in t.stack:
            fs.filename = shown_file(fs.filename)
        if getattr(t, "filename", None):  # a SyntaxError's own file
            t.filename = shown_file(t.filename)
        todo += [t.__cause__, t.__context__, *(getattr(t, "exceptions", None) or [])]
    return "".join(te.format())


def user_frames(exc):
    """The frames of the user's own files, innermost last: file, line, function, code line.

    The script is `<name>.py`; a package's files are shown from their zip root (`main.py`,
    `pkg/util.py`), never with the task's directory on this host.
    """
    frames = []
    for fs in traceback.extract_tb(exc.__traceback__):
        if fs.filename in HARNESS_FILES or fs.filename not in USER_FILES and \
                ".zip/" not in fs.filename:
            continue
        name = fs.filename.split(".zip/", 1)[-1]
        frames.append({"file": name, "line": fs.lineno or 0, "function": fs.name,
                       "code": (fs.line or "").strip()})
    return frames[-50:]


# The files of the script being run (a module: its one file), set by execute().
USER_FILES = set()


def error(exc, with_tb=True):
    message = str(exc)
    if isinstance(exc, SyntaxError) and exc.filename:
        message = message.replace(exc.filename, shown_file(exc.filename))
    if DISK_BYTES and isinstance(exc, OSError) and exc.errno == 28:  # ENOSPC
        message += (f" (the task's disk limit: {DISK_BYTES} bytes in its working directory, "
                    "as many in /tmp)")
    # The task's rlimits, named with their values (docs/script-service.md, "Limits and isolation").
    if isinstance(exc, MemoryError):
        message = limit_note(message or "out of memory", resource.RLIMIT_AS, "memory limit")
    elif isinstance(exc, OSError) and exc.errno == 27:  # EFBIG
        message = limit_note(message, resource.RLIMIT_FSIZE, "file size limit")
    return {"ok": False, "error": {"type": type(exc).__name__, "message": message,
                                   "traceback": user_traceback(exc) if with_tb else "",
                                   "frames": user_frames(exc) if with_tb else []}}


def limit_note(message, rlimit, what):
    limit = resource.getrlimit(rlimit)[0]
    if limit == resource.RLIM_INFINITY:
        return message
    return f"{message} (the task's {what}: {limit} bytes)"


def load_package(data, task):
    path = os.path.join(os.getcwd(), f".sluice-{task['id']}.zip")
    if not os.access(os.path.dirname(path), os.W_OK):
        # uid fallback with a data dir the task uid cannot traverse: reach our own
        # dir through a held descriptor, which skips the ancestors' permissions.
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        path = f"/proc/self/fd/{fd}/.sluice-{task['id']}.zip"
    with open(path, "wb") as f:
        f.write(data)
    import zipfile  # packages only

    names = zipfile.ZipFile(path).namelist()
    root = path
    if "main.py" not in names:
        # macOS Finder's __MACOSX/ is not a top folder (src/scripts/zip-inspect.ts).
        tops = {n.split("/", 1)[0] for n in names if not n.startswith("__MACOSX/")}
        if len(tops) == 1 and f"{next(iter(tops))}/main.py" in names:
            root = f"{path}/{next(iter(tops))}"
    sys.path.insert(0, root)
    source = zipimport.zipimporter(root).get_source("main")
    if source is None:
        raise ImportError("package has no main.py")
    return source, f"{root}/main.py"


def execute(task):
    """Load the script, call main, return the message for Node (a dict)."""
    name = task["name"]
    try:
        data = base64.b64decode(task["src"])
        if task["kind"] == "package":
            source, filename = load_package(data, task)
        else:
            source, filename = data, f"{name}.py"
        USER_FILES.add(filename)
        # As `python main.py` would: not the zygote's flags (argparse would refuse them).
        sys.argv = [shown_file(filename)]
        mod = types.ModuleType(name)
        mod.__file__ = filename
        sys.modules[name] = mod  # pickle and multiprocessing look functions up here
        code = compile(source, filename, "exec", dont_inherit=True)
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
        # mtime None: linecache keeps the entry, so tracebacks show the lines.
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(code, mod.__dict__)
        main = getattr(mod, "main", None)
        if not callable(main):
            raise AttributeError(f"script {name} defines no main()")
        value = call_main(main, task["param"])
    except SystemExit as e:
        return exit_message(e)
    except BaseException as e:  # noqa: BLE001 - every failure is reported, never raised
        return error(e)
    try:
        return result_line(value)
    except (TypeError, ValueError, RecursionError) as e:
        failure = error(e, with_tb=False)
        where = unwritable(value, "return value", 0)
        if where is not None:
            failure["error"]["message"] = f"{where}: {failure['error']['message']}"
        return failure


JSON_LEAVES = (str, int, bool, type(None), datetime.datetime, datetime.date, datetime.time)
JSON_KEYS = (str, int, float, bool, type(None))


def unwritable(value, path, depth, within=None):
    """Where in a return value json.dumps stopped (docs/script-service.md), as the service names
    an integer it cannot keep: `return value.rows.1.score is nan`. None when it cannot tell.

    `within`: the ids of the lists and dicts this one is inside. A value that holds itself is
    named where it does (json.dumps's "Circular reference detected"): walked on, two references
    to itself would make 2**200 paths to try, and the task would run to its time limit."""
    if depth > 200:
        return None
    if isinstance(value, float):
        return None if value == value and abs(value) != float("inf") else f"{path} is {value}"
    if isinstance(value, JSON_LEAVES):
        return None
    items = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, (list, tuple)) else None
    if items is None:
        return path
    within = within if within is not None else set()
    if id(value) in within:
        return f"{path} holds itself"
    within.add(id(value))
    for key, item in items:
        if isinstance(value, dict) and not isinstance(key, JSON_KEYS):
            return f"{path}.{key}"  # json.dumps stops at the key, before its value
        found = unwritable(item, f"{path}.{key}", depth + 1, within)
        if found is not None:
            return found
    within.discard(id(value))
    return None


def result_line(value):
    """The success message, spelled as Node measures the value (docs/script-service.md).

    Node caps the line at the result limit plus a margin, and checks the value's JSON.stringify
    size: no spaces after separators and UTF-8 text rather than \\u escapes, so a value under the
    limit is never refused for its spelling on the wire.
    """
    text = json.dumps({"ok": True, "value": value}, default=to_json, allow_nan=False,
                      separators=(",", ":"), ensure_ascii=False)
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:  # a lone surrogate: only an escape can carry it
            text = json.dumps({"ok": True, "value": value}, default=to_json, allow_nan=False,
                              separators=(",", ":"))
    return text


def exit_message(e):
    code = e.code
    if code is None or isinstance(code, int):
        return {"exit": code or 0}
    print(code, file=sys.stderr)  # sys.exit("text") prints it and exits 1, like python does
    return {"exit": 1, "text": str(code)[:1000]}
