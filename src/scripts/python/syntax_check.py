"""Compile-only syntax check of uploaded and inline Python (docs/script-service.md, "Upload").

Started by src/scripts/syntax-check.ts inside the script sandbox, one process per check:
    python -I -S -B syntax_check.py '{"uid": UID or null, "lim": {"cpu", "as", ...}}'
It first takes a task's rlimits and drops to its sandbox uid, as zygote.py does for a task, and
only then reads the files from stdin: each one a header line {"name", "size", "decode"} followed
by exactly `size` bytes. It compiles them in order (compile() only parses, nothing is executed)
and prints one JSON line: {"ok": true}, or the first problem:
    {"index": I, "kind": "syntax", "line": N or null, "message": M}   the file does not compile
    {"index": I, "kind": "memory", "message": M}   compiling it needs more than the memory limit
"""

import json
import os
import resource
import sys


def confine(uid, lim):
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"] + 1))
    for res, key in ((resource.RLIMIT_AS, "as"), (resource.RLIMIT_FSIZE, "fsize"),
                     (resource.RLIMIT_NOFILE, "nofile"), (resource.RLIMIT_NPROC, "nproc")):
        if lim.get(key):
            resource.setrlimit(res, (lim[key], lim[key]))
    if uid is not None:
        parent = os.getppid()
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        die_with_parent(parent)


def die_with_parent(parent):
    """The uid switch cleared the parent-death signal bubblewrap set for us: set again, so a
    killed service (and its bubblewrap) takes the check along rather than leaving it to its CPU
    limit; a parent that died before it was set is not ours any more (docs/security.md, "The end
    of a task")."""
    import ctypes  # here only: a check without a uid switch needs none of it

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:
        os._exit(1)


def peak_bytes():
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmPeak:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, MemoryError):
        pass
    return None


def memory_problem(limit):
    # CPython's parser also raises a bare MemoryError when its own stack overflows (deeply nested
    # source), long before the address-space limit: only a peak near the limit means memory.
    peak = peak_bytes()
    if limit and (peak is None or peak > limit * 0.9):
        return {"kind": "memory", "message": f"compiling it needs more than {limit} bytes"}
    return {"kind": "syntax", "line": None,
            "message": "MemoryError: the code is nested too deeply for Python's parser"}


def check(data, name, decode, limit):
    try:
        # As the task loads it (harness.py): a module's raw bytes, so a coding cookie or invalid
        # UTF-8 is judged by compile() itself; a package's main.py comes from zipimport's
        # get_source, which decodes it strictly as UTF-8 first.
        source = data.decode("utf-8") if decode else data
        compile(source, name, "exec", dont_inherit=True)
        return None
    except SyntaxError as e:
        return {"kind": "syntax", "line": e.lineno or 0, "message": e.msg or "invalid syntax"}
    except MemoryError:
        return memory_problem(limit)
    except (ValueError, RecursionError) as e:  # NUL bytes, invalid UTF-8 in main.py, nesting
        return {"kind": "syntax", "line": None, "message": f"{type(e).__name__}: {e}"}


def read_exactly(stream, size):
    data = stream.read(size)
    if data is None or len(data) != size:
        raise EOFError("input ended inside a file")
    return data


def main():
    opts = json.loads(sys.argv[1])
    lim = opts["lim"]
    confine(opts.get("uid"), lim)
    stdin = sys.stdin.buffer
    index = 0
    problem = None
    try:
        while problem is None:
            header = stdin.readline()
            if not header:
                break
            meta = json.loads(header)
            data = read_exactly(stdin, meta["size"])
            problem = check(data, meta["name"], meta.get("decode", False), lim.get("as"))
            del data
            if problem is None:
                index += 1
    except MemoryError:  # reading the input itself did not fit
        problem = memory_problem(lim.get("as"))
    out = {"ok": True} if problem is None else {"index": index, **problem}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
