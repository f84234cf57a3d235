"""Sluice zygote: one warm CPython that forks a fresh child per script task.

Started once by src/scripts/python-runner.ts as `python -I zygote.py`.
Node drives it over stdin with one command per line:
    f N    fork N more idle children
    k UID PID  make sure nothing of UID is left once its task's child PID has ended
    (0: unknown), and report when that is confirmed
and reads reports from stdout, one per line:
    ready PID                   warm and accepting commands
    c PID TASK RESULT OUT ERR   forked a child; Node opens /proc/PID/fd/<n> for these four
    x PID STATUS                reaped a process (STATUS: exit code, or -signal)
    w UID STATUS                nothing of UID is left (STATUS 0), or that could not be confirmed

The end of a task is decided here and in Node, never by code the task can change: whatever the
child reported, `k` checks for leftovers of its uid and kills them (docs/security.md).

Each child gets four pipes from the zygote: its task (Node writes), its result (Node reads), its
stdout and its stderr. Node cannot receive descriptors over a pipe, so it opens its ends through
/proc/PID/fd; the child holds them until its task arrives, by when Node has them. A child runs
exactly one task and exits, so every run starts from the same clean, never-used state.
"""

import base64
import gc
import io
import json
import linecache
import os
import resource
import select
import signal
import sys
import traceback

# Imported only so children inherit them warm: importing these per task would
# cost more than the whole fork. They stay untouched until a script uses them.
# Not asyncio (+7 MB with ssl) nor hashlib (+4 MB of OpenSSL): every fork copies the page
# tables of the whole heap, so each MB here costs every task ~0.06 ms; a script that needs
# them imports them itself.
import collections  # noqa: F401
import dataclasses  # noqa: F401
import datetime  # noqa: F401
import decimal  # noqa: F401
import functools  # noqa: F401
import itertools  # noqa: F401
import math  # noqa: F401
import pathlib  # noqa: F401
import pickle  # noqa: F401
import random  # noqa: F401  (re-seeds itself in every forked child)
import re  # noqa: F401
import time  # noqa: F401
import typing  # noqa: F401
import urllib.parse  # noqa: F401
import uuid  # noqa: F401

# harness.py sits next to us; -I keeps our folder off sys.path, and scripts must
# not see it there either, so add it only for this import.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import error, execute  # noqa: E402

del sys.path[0]
harness.HARNESS_FILES.add(__file__)


# closerange's upper bound: one close_range(2) call on Linux, whatever the count.
MAX_FD = 1 << 30


def read_line(fd):
    buf = bytearray()
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return None
        buf += chunk
        if buf.endswith(b"\n"):
            return bytes(buf)


def _load_prctl():
    try:
        import ctypes
        return ctypes.CDLL(None).prctl
    except Exception:  # noqa: BLE001 - not Linux: nothing to do
        return None


# Resolved once here: a dlopen per task costs each child ~90 copy-on-write faults.
_prctl = _load_prctl()


def die_with_parent():
    """SIGKILL this process when its parent dies (PR_SET_PDEATHSIG), so a crashed service
    (Node, then the zygote) never leaves user scripts running on the host."""
    if _prctl is not None:
        _prctl(1, signal.SIGKILL, 0, 0, 0)


def run_task(task, result_w, devnull):
    lim = task["lim"]
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"] + 1))
    for res, key in ((resource.RLIMIT_AS, "as"), (resource.RLIMIT_FSIZE, "fsize"),
                     (resource.RLIMIT_NOFILE, "nofile"), (resource.RLIMIT_NPROC, "nproc")):
        if lim.get(key):
            resource.setrlimit(res, (lim[key], lim[key]))
    uid = task.get("uid")
    try:
        # Before the uid drop when we can: the task uid need not be able to
        # traverse the data dir above its own working dir.
        os.chdir(task["cwd"])
        entered = True
    except PermissionError:
        entered = False  # in bwrap root has no CAP_DAC_OVERRIDE; /tasks is reachable anyway
    if uid is not None:
        gid = task.get("gid")
        # A shared (flow run) directory belongs to a group: join it, and keep what we write
        # group-writable so the run's other script nodes can change it too.
        os.setgroups([gid] if gid is not None else [])
        if gid is not None:
            os.umask(0o002)
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        die_with_parent()  # a credential change clears the parent-death signal: set it again
    if not entered:
        os.chdir(task["cwd"])
    os.environ["HOME"] = os.environ["TMPDIR"] = task["cwd"]
    tmp = sys.modules.get("tempfile")  # imported lazily: recompute from TMPDIR if at all
    if tmp is not None:
        tmp.tempdir = None

    msg = execute(task)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the script may have closed it
            pass
    # EOF for Node on stdout and stderr now: only a process the script started can still hold
    # them, and the sweep below (or Node's kill of the group) ends it.
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    if task.get("sweep") and uid is not None and os.getuid() == uid != 0:
        # The uid is private to this task: kill whatever it left behind
        # (processes that left the group); kill(-1) spares the caller.
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    if isinstance(msg, dict):
        try:
            msg = json.dumps(msg)
        except (TypeError, ValueError):
            msg = json.dumps(error(RuntimeError("unreportable error")))
    data = memoryview(msg.encode() + b"\n")
    while data:
        data = data[os.write(result_w, data):]


def task_streams():
    """Line-buffered UTF-8 text streams on fds 1 and 2, made once in the zygote.

    A child points fds 1 and 2 at its task's pipes and keeps these objects, so output printed
    before a kill still reaches Node, and no child builds text wrappers of its own (each one
    costs copy-on-write faults). The zygote itself never writes through them.
    """
    for fd, attr in ((1, "stdout"), (2, "stderr")):
        stream = io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
        setattr(sys, attr, stream)
        setattr(sys, f"__{attr}__", stream)


def close_all_but(keep):
    """Closes every descriptor from 3 up except those in `keep` (sorted)."""
    low = 3
    for fd in keep:
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, MAX_FD)


def child_main(task_r, result_w, out_w, err_w, node_ends):
    # Signal dispositions need no reset: the zygote installs no handlers (see main).
    os.setpgid(0, 0)  # own process group, which Node kills; the zygote sets it too (a race)
    die_with_parent()  # cleared by fork: a pre-forked child must not outlive the zygote
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)  # never read the zygote's command pipe
    os.dup2(out_w, 1)  # sys.stdout and sys.stderr already write to fds 1 and 2
    os.dup2(err_w, 2)
    close_all_but(sorted((task_r, result_w, devnull, *node_ends)))
    # While idle, pay the copy-on-write faults of the task path (json, compile,
    # exec...) so the task itself does not: this halves its latency.
    warm_up()
    line = read_line(task_r)
    if line is None:
        return
    for fd in (task_r, *node_ends):  # Node opened its ends before it sent the task
        os.close(fd)
    run_task(json.loads(line), result_w, devnull)


def fork_child():
    """Forks an idle child; returns its pid and the descriptors Node opens in it."""
    task_r, task_w = os.pipe()
    result_r, result_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    node_ends = (task_w, result_r, out_r, err_r)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            child_main(task_r, result_w, out_w, err_w, node_ends)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 70
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    try:
        os.setpgid(pid, pid)  # before Node hears of the child, so its kill of -pid always lands
    except OSError:
        pass  # the child got there first, or is already gone
    for fd in (task_r, task_w, result_r, result_w, out_r, out_w, err_r, err_w):
        os.close(fd)
    return pid, node_ends


SWEEP_ROUNDS = 20


def sweep_uid(uid):
    """Forks a process that kills everything `uid` owns; returns its pid (0: not possible).
    kill(-1) cannot say whether it found anything (it succeeds whenever any other process
    exists), so the zygote looks again once the sweeper is gone (`leftovers`)."""
    if os.getuid() != 0 or uid == 0:
        return 0
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            for _ in range(3):  # a leftover may fork while it is being killed
                os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    return pid


def leftovers(uid, child, pidfds):
    """Whether anything of `uid` may still run. Every process of a task descends from its child,
    and we are their subreaper: once the child is gone, the top of whatever it left is a child
    of ours that we did not fork, running as `uid` (it cannot change uid). Reading our children
    costs no fork, so a task that left nothing is confirmed at once."""
    if child in pidfds.values():
        return True
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            children = {int(p) for p in f.read().split()}
    except OSError:
        return True  # cannot tell: assume the worst
    for pid in children - set(pidfds.values()):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            return True
                        break
        except OSError:
            pass  # gone (reaped) meanwhile
    return False


def warm_up():
    # Run a throwaway task through the same code path so lazy caches
    # (json, compile, linecache) are filled once here, not per child.
    src = b"def main(p):\n    return [p, (1,), None]\n"
    task = {"name": "__sluice_warm__", "kind": "module", "param": {"a": 1},
            "src": base64.b64encode(src).decode()}
    execute(json.loads(json.dumps(task)))
    os.environ["HOME"] = os.environ["TMPDIR"] = "/"  # as every task sets them
    sys.modules.pop("__sluice_warm__", None)
    linecache.cache.pop("__sluice_warm__.py", None)


def main():
    # No signal handlers here, so children inherit Python's defaults and reset nothing:
    # Node starts us in a session of our own (Ctrl-C is Node's to handle), and child exits
    # arrive through pidfds, not SIGCHLD.
    if _prctl is not None:
        _prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: we reap orphans
    die_with_parent()
    task_streams()
    warm_up()
    gc.collect()
    gc.freeze()  # children then never touch (and copy) the warm heap during gc

    def report(text):
        data = memoryview(text.encode())
        while data:
            data = data[os.write(1, data):]

    poll = select.poll()
    poll.register(0, select.POLLIN)
    pidfds = {}  # pidfd -> pid of each process we forked and have not reaped

    def track(pid):
        fd = os.pidfd_open(pid)
        pidfds[fd] = pid
        poll.register(fd, select.POLLIN)
        return pid

    sweeps = {}  # sweeper pid -> (uid, task child, round) of sweeps under way
    deferred = {}  # task child pid -> (uid, deadline): `k` arrived before the child was reaped

    def check(uid, child, round_=0):
        """Confirms `uid` clean (`w UID 0`), or starts a sweeper and looks again once it is
        gone; after SWEEP_ROUNDS sweeps that left something, gives up (`w UID 1`)."""
        if not leftovers(uid, child, pidfds):
            report(f"w {uid} 0\n")
            return
        pid = sweep_uid(uid) if round_ < SWEEP_ROUNDS else 0
        if not pid:
            report(f"w {uid} 1\n")
            return
        sweeps[track(pid)] = (uid, child, round_ + 1)

    report(f"ready {os.getpid()}\n")
    pending = b""
    while True:
        # Orphans (processes a task left behind, reparented to us) have no pidfd here: the
        # timeout reaps them within a second even while no task of ours ends, and within a few
        # ms while a sweep waits for its kills to be reaped.
        events = poll.poll(5 if sweeps else 50 if deferred else 1000)
        exited = not events
        for fd, _ in events:
            if fd != 0:
                exited = True
                continue
            data = os.read(0, 65536)
            if not data:
                return  # Node is gone
            pending += data
            *lines, pending = pending.split(b"\n")
            forked = []
            for line in lines:
                cmd, _, arg = line.decode().partition(" ")
                if cmd == "f":
                    forked += [fork_child() for _ in range(int(arg))]
                elif cmd == "k":
                    uid, _, child = arg.partition(" ")
                    if int(child or 0) in pidfds.values():
                        # Node killed its group; check once it is reaped (or sweep at the deadline).
                        deferred[int(child)] = (int(uid), time.monotonic() + 1.0)
                    else:
                        check(int(uid), int(child or 0))
            for pid, _ in forked:
                track(pid)
            if forked:
                report("".join(f"c {pid} {' '.join(map(str, fds))}\n" for pid, fds in forked))
        if exited or sweeps:
            text, gone = reap(poll, pidfds)
            report(text)
            for pid in gone:
                if pid in sweeps:
                    check(*sweeps.pop(pid))
        now = time.monotonic()
        for child, (uid, deadline) in list(deferred.items()):
            if child not in pidfds.values() or now > deadline:
                del deferred[child]
                check(uid, child)


def reap(poll, pidfds):
    """Reaps every exited process, ours and orphans alike; returns their reports and pids."""
    gone = {pid: fd for fd, pid in pidfds.items()}
    reaped = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        fd = gone.get(pid)
        if fd is not None:
            poll.unregister(fd)
            os.close(fd)
            del pidfds[fd]
        reaped.append((pid, f"x {pid} {os.waitstatus_to_exitcode(status)}\n"))
    return "".join(r for _, r in reaped), [pid for pid, _ in reaped]


if __name__ == "__main__":
    main()
