"""Sluice zygote: one warm CPython that forks a fresh child per script task.

Started by src/scripts/zygote-start.ts as `python -I zygote.py` (once per service process, and
as `python -I -S zygote.py --env=…` per zygote of an environment).
Node drives it over stdin with one command per line:
    g      go on (only after `hold`: Node has put this zygote in a cgroup of its own)
    f N    fork N more idle children
    k UID PID  make sure nothing of UID is left once its task's child PID has ended
    (0: unknown), and report when that is confirmed
and reads reports from stdout, one per line:
    hold PID                    with --userns, once and first: wait for `g`
    ready PID [pidns]           warm and accepting commands (pidns: each child is the first
                                process of a pid namespace of its own)
    c PID TASK RESULT OUT ERR   forked a child; Node opens /proc/PID/fd/<n> for these four
    x PID STATUS                reaped a process (STATUS: exit code, or -signal)
    w UID STATUS                nothing of UID is left (STATUS 0), or that could not be confirmed
    e N WHY                     N of the children asked for could not be forked (WHY: the
                                system's reason, e.g. a process limit reached); the zygote goes on

The end of a task is decided here and in Node, never by code the task can change: whatever the
child reported, `k` checks for leftovers of its uid and kills them; with `pidns`, Node takes the
`x` of a task's child as that confirmation instead (Linux reaps the first process of a pid
namespace last), and sends `k` only when that `x` is late (docs/security.md).

Arguments: `--ns=ipc,net,mnt,pid,uts,cgroup` names the namespaces each child gets of its own (a
network namespace no other task is in at the same time; a mount namespace with a tmpfs of
`--disk=BYTES` on /tmp, and another over its working directory when the task says `own`; a pid
namespace whose first process it is, with its own /proc; a UTS namespace whose hostname is
`sluice`), entered as it is forked, before its task arrives, except the cgroup namespace, which the
child enters when its task arrives (Node sends it only once the child is in the task's cgroup,
which becomes the namespace's root); without `net` when tasks may use the network, `--ns=` for
none;
`--tasks=PATH` says where working directories are (default /tasks, bubblewrap's);
`--env=PATH` is the environment of an element's dependencies (a venv the zygote does not run:
it is started with the service's interpreter and `-S`, so no `.pth` or `sitecustomize` of the
environment's packages runs at start-up); its site-packages joins sys.path, after the standard
library, only once the children's isolation is in place (docs/security.md);
`--preload=a,b` names modules of the zygote's environment (an element's declared dependencies,
docs/script-dependencies.md) imported before it forks, so every task finds them warm; one that
fails to import is skipped (the task that imports it gets the error itself);
`--userns=OUTER,BASE,COUNT` puts the zygote in a user namespace of its own first, whose root is
host uid OUTER and whose tasks take uids BASE..BASE+COUNT-1, which no other zygote has: what it
preloads then has no rights outside it (docs/security.md, "Preloading"); it then reports
`hold PID` and waits for a `g` line (Node has put it in a cgroup of its own) before it goes on;
`--strict` makes a missing isolation layer (those namespaces, or the seccomp filter that denies
user namespaces) fatal instead of a warning on stderr; `--probe` checks both and exits, 0 when
they work (docs/security.md, "Layers").

Each child gets four pipes from the zygote: its task (Node writes), its result (Node reads), its
stdout and its stderr. Node cannot receive descriptors over a pipe, so it opens its ends through
/proc/PID/fd; the child holds them until its task arrives, by when Node has them. A child runs
exactly one task and exits, so every run starts from the same clean, never-used state.
"""

import _socket
import base64
import ctypes
import fcntl
import gc
import io
import json
import linecache
import os
import resource
import select
import signal
import struct
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
# Not importable by that name from here on: a package's own `harness.py` is what its `import
# harness` finds (docs/script-service.md, "Writing scripts"); this module keeps its reference.
del sys.modules["harness"]
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


def _load_libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except Exception:  # noqa: BLE001 - not Linux: nothing to do
        return None


# Resolved once here: a dlopen per task costs each child ~90 copy-on-write faults.
_libc = _load_libc()
_prctl = _libc.prctl if _libc is not None else None
# Also resolved here, not on first use in each child: ctypes looks a function up by failing an
# attribute lookup (an AttributeError formatted) and caching it, a dozen copied pages per child.
_unshare, _setns, _mount = ((_libc.unshare, _libc.setns, _libc.mount) if _libc is not None
                            else (None, None, None))

CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWUSER = 0x08000000, 0x40000000, 0x10000000
CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
CLONE_NEWUTS, CLONE_NEWCGROUP = 0x04000000, 0x02000000
NAMESPACES = {"ipc": CLONE_NEWIPC, "net": CLONE_NEWNET, "mnt": CLONE_NEWNS, "pid": CLONE_NEWPID,
              "uts": CLONE_NEWUTS, "cgroup": CLONE_NEWCGROUP}
HOSTNAME = b"sluice"  # every task's, as bubblewrap's (docs/security.md, "Layers")
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
NR_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
# Set by main from --ns: the namespaces every child enters before its task arrives.
task_namespaces = None
# Set by parse_args from --preload: the environment's modules imported before forking.
preload_modules = []
# Set by parse_args from --env: the environment's folder (None: the interpreter's own packages).
env_dir = None
# Set by parse_args from --userns=OUTER,BASE,COUNT: the zygote's own user namespace (None: none).
user_namespace = None


# Set by main: the zygote's own pid (a host pid: the zygote has no pid namespace of its own),
# the parent each child checks it still has. Set by each child before it mounts the /proc of its
# own: its /proc/self/stat in the zygote's /proc, read again once its uid switch cleared its
# parent-death signal (its own /proc shows no parent by then).
zygote_pid = 0
stat_fd = -1


def parent_pid(fd=-1):
    """This process's parent as the /proc mounted here shows it, or as the stat file `fd` was
    opened in (None: cannot tell). getppid() answers 0 in a pid namespace whose first process we
    are (the parent is outside it); a child forked into one checks before it mounts the /proc of
    its own, so /proc is still the zygote's, and its stat has the parent's pid there."""
    try:
        if fd >= 0:
            data = os.pread(fd, 1024, 0)
        else:
            fd = os.open("/proc/self/stat", os.O_RDONLY)
            try:
                data = os.read(fd, 1024)
            finally:
                os.close(fd)
        return int(data[data.rindex(b")") + 2:].split(b" ", 2)[1])
    except (OSError, ValueError):
        return os.getppid() or None


PR_SET_PDEATHSIG = 1


def die_with_parent(parent=None):
    """SIGKILL this process when its parent dies (PR_SET_PDEATHSIG), so a killed service (Node,
    then bubblewrap, then the zygote) never leaves a process of the sandbox running on the host.

    The signal is set by the process itself, after its fork: a parent that died before it was
    set sends nothing, and the process is left re-parented, for good (a zygote's idle child waits
    for a task that never comes). So, with `parent` (the pid this process was forked by), once it
    is set: a parent that is not ours any more is dead, and we go too. Checked after the set, a
    parent still there will signal us when it dies (docs/security.md, "The end of a task")."""
    if _prctl is None:
        return
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent is not None and parent_pid() not in (parent, None):
        os._exit(0)


def zygote_gone():
    """Whether this child's parent is no longer the zygote: the check after the task's uid switch,
    which clears the parent-death signal, once it is set again (docs/security.md, "The end of a
    task"). The kernel re-parents a dead process's children before it signals them, so a parent
    that dies after the set signals us, and one that died before it shows here as another."""
    if stat_fd < 0:
        return False
    return parent_pid(stat_fd) not in (zygote_pid, None)


def node_gone():
    """Whether Node, the other end of our stdin, is gone (no writer left: POLLHUP), or has shut
    its side (POLLRDHUP: the runner closing, which would be our end-of-input in the loop).

    Node starts us through bubblewrap, which sets its own parent-death signal after it forked,
    and without checking: a Node killed before that leaves bubblewrap, and us, running. Node's
    descriptors close before its death signals anyone, so a Node that is still there when we look
    (after our own signal is set) will have bubblewrap, and so us, killed when it dies
    (docs/security.md, "The end of a task")."""
    gone = select.POLLHUP | select.POLLERR | select.POLLRDHUP
    p = select.poll()
    p.register(0, select.POLLIN | select.POLLRDHUP)
    return any(ev & gone for _, ev in p.poll(0))


def import_system_module(name):
    """Imports `name` as the system interpreter would. The zygote of an environment runs with
    `-S` (and PYTHON may be a venv's), which leaves the system's packages (Debian's dist-packages,
    where python3-seccomp is) off sys.path, so they are searched too, for this import only. An
    environment's packages are not on sys.path yet: none of them can stand in for this module."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        if sys.prefix == sys.base_prefix and not sys.flags.no_site:
            raise
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    extra = [os.path.join(sys.base_prefix, "lib", "python3", "dist-packages"),
             os.path.join(sys.base_prefix, "local", "lib", ver, "dist-packages"),
             os.path.join(sys.base_prefix, "lib", ver, "site-packages")]
    saved = list(sys.path)
    sys.path[:0] = [p for p in extra if os.path.isdir(p)]
    try:
        return importlib.import_module(name)
    finally:
        sys.path[:] = saved
        importlib.invalidate_caches()


def deny_user_namespaces():
    """Loads a seccomp filter into the zygote, which every child (and so every task) inherits.

    A new user namespace gives its creator every capability inside it, and with them the parts of
    the kernel that only root could reach (docs/security.md). Other namespaces need
    CAP_SYS_ADMIN, which a task never has. clone3 passes its flags in memory, which seccomp cannot
    read, so it answers ENOSYS: glibc then falls back to clone, whose flags it can check.
    libseccomp sets no_new_privs and kills a system call made through another architecture's
    entry (int 0x80 on x86_64), so the filter cannot be sidestepped that way. The same filter
    keeps tasks from the kernel's keyrings and from io_uring, and their parent-death signal
    SIGKILL (see below).
    """
    import errno

    seccomp = import_system_module("seccomp")  # Debian's python3-seccomp; dropped again below

    f = seccomp.SyscallFilter(seccomp.ALLOW)
    eperm = seccomp.ERRNO(errno.EPERM)
    new_user = seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)
    f.add_rule(eperm, "unshare", new_user)
    f.add_rule(eperm, "clone", new_user)
    # Children enter their network namespace with setns; entering any namespace takes
    # CAP_SYS_ADMIN, which a task never has.
    f.add_rule(eperm, "setns", seccomp.Arg(1, seccomp.NE, CLONE_NEWNET))
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    # The kernel's keyrings are not namespaced: a uid's user keyring outlives its task, and the
    # next task of that uid (another tenant's) would possess what it left there. As if the kernel
    # had none: software that uses them (a Kerberos cache, keyutils) falls back on ENOSYS.
    for name in ("add_key", "request_key", "keyctl"):
        f.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    # io_uring reaches much of the kernel by a path of its own, where escalations kept being
    # found; no task needs it, and ENOSYS is what a kernel without it answers.
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        f.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    # A task's child dies with the zygote by its parent-death signal, and the rest of the task
    # with it (its pid namespace's first process): a task that cleared that signal, or swapped it
    # for one it ignores, outlived a killed service. Only SIGKILL, the zygote's own, may be set.
    f.add_rule(eperm, "prctl", seccomp.Arg(0, seccomp.EQ, PR_SET_PDEATHSIG),
               seccomp.Arg(1, seccomp.NE, int(signal.SIGKILL)))
    f.load()
    del f
    sys.modules.pop("seccomp", None)


def hold():
    """Before anything of the environment runs here, Node puts this zygote in a cgroup of its own,
    with a task's limits (docs/security.md, "Preloading"): `hold PID`, then wait for `g`. What its
    packages' import-time code starts is then in that cgroup too, and goes with it."""
    os.write(1, f"hold {os.getpid()}\n".encode())
    if read_line(0) != b"g\n":
        sys.exit(0)  # Node is gone, or refused it a cgroup


def own_user_namespace(outer, base, count, flags):
    """Moves the zygote into a user namespace of its own before anything of its environment runs
    (docs/security.md, "Preloading"): its root is host uid `outer`, no one else's, and the only
    other uids it can take are its tasks' (`base`, `count` of them, the same numbers inside and
    out). Its capabilities then hold over its own namespaces and its own tasks only, so a
    package's import-time code in it can neither leave the sandbox nor reach another zygote's
    tasks, Node or the host.

    Only a process with CAP_SETUID outside the namespace can map more than its own uid, so this
    process forks: the child goes on as the zygote, and the parent, which runs nothing else, maps
    it, then waits for it and ends with it."""
    to_parent_r, to_parent_w = os.pipe()
    to_child_r, to_child_w = os.pipe()
    mapper = os.getpid()
    pid = os.fork()
    if pid != 0:
        os.close(to_parent_w)
        os.close(to_child_r)
        devnull = os.open("/dev/null", os.O_RDWR)
        os.dup2(devnull, 0)  # Node's commands and our reports are the child's
        os.dup2(devnull, 1)
        if os.read(to_parent_r, 1) == b"u":
            try:
                for name in ("uid_map", "gid_map"):
                    with open(f"/proc/{pid}/{name}", "w") as f:
                        f.write(f"0 {outer} 1\n{base} {base} {count}\n")
                os.write(to_child_w, b"m")
            except OSError as e:
                sys.stderr.write(f"sluice zygote: the user namespace cannot be mapped: {e}\n")
        os.close(to_child_w)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        os._exit(code if code >= 0 else 128 - code)
    os.close(to_parent_r)
    os.close(to_child_w)
    die_with_parent(mapper)  # the parent maps us, then only waits: with it gone, go too
    # Still root outside: a mount namespace of its own with a /proc of its own, which shows this
    # zygote only its own processes (hidepid), not the host's. It also has none of bubblewrap's
    # read-only binds over parts of /proc, without which the kernel refuses the children's own
    # /proc in a user namespace (it would show what those binds hide).
    _check(_unshare(CLONE_NEWNS), "unshare(mnt)")
    if shared_mounts():
        _check(_mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount(private)")
    _check(_mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"hidepid=2"),
           "mount(proc)")
    _check(_unshare(CLONE_NEWUSER), "unshare(user)")
    os.write(to_parent_w, b"u")
    os.close(to_parent_w)
    if os.read(to_child_r, 1) != b"m":
        sys.exit("sluice zygote: its user namespace was not mapped")
    os.close(to_child_r)
    # Root of the namespace, which is `outer` outside: no host file is ours, no host process.
    os.setgroups([])
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    die_with_parent(mapper)  # a credential change clears it
    if flags & CLONE_NEWNET:
        # The network namespace the zygote makes its children's in and steps back to: one this
        # user namespace owns (bubblewrap's is not), with no interface but its loopback either.
        _check(_unshare(CLONE_NEWNET), "unshare(net)")


def loopback_up():
    """A new network namespace has only a loopback, and it is down."""
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        ifr = bytearray(struct.pack("16s24x", b"lo"))  # struct ifreq
        fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, ifr)
        struct.pack_into("H", ifr, 16, struct.unpack_from("H", ifr, 16)[0] | IFF_UP)
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, ifr)
    finally:
        s.close()


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what} failed: {os.strerror(err)}")


def own_hostname():
    """The zygote's own UTS namespace, named `sluice` (once, at start): each child's copies it. In
    bubblewrap that is its name already; with SCRIPT_SANDBOX=none tasks would otherwise read the
    host's hostname and domain name (docs/security.md, "Layers")."""
    _check(_unshare(CLONE_NEWUTS), "unshare(uts)")
    _check(_libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")
    _check(_libc.setdomainname(b"(none)", 6), "setdomainname")


def shared_mounts():
    """Whether any mount of this mount namespace propagates to or from another (optional fields
    `shared:N` or `master:N` in /proc/self/mountinfo)."""
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            fields = line.split(b" - ", 1)[0].split()
            if any(x.startswith((b"shared:", b"master:")) for x in fields[6:]):
                return True
    return False


class TaskNamespaces:
    """The namespaces each child enters as soon as it is forked, while it is still root (with
    CAP_SYS_ADMIN and CAP_NET_ADMIN) and runs no tenant code, so a task never waits for them.

    IPC: a new namespace per child (unshare), gone with the task's last process, and with it every
    SysV object the task left. Network: creating a namespace and tearing it down costs about 2 ms
    of CPU, a third of a whole task's, so the zygote keeps the namespaces it created, each with
    its loopback up, and gives each child one that no process is in: a new one, or the one of a
    task whose uid was confirmed clean (`k`), or whose child, the first process of its own pid
    namespace, was reaped, so that no process of that task is left in it
    (docs/security.md, "Layers").
    """

    def __init__(self, flags, disk=0, tasks="/tasks"):
        self.ipc = bool(flags & CLONE_NEWIPC)
        self.net = bool(flags & CLONE_NEWNET)
        self.mnt = bool(flags & CLONE_NEWNS)
        self.uts = bool(flags & CLONE_NEWUTS)
        self.cgroup = bool(flags & CLONE_NEWCGROUP)
        # The pid namespace needs the mount namespace: its /proc is mounted there.
        self.pid = bool(flags & CLONE_NEWPID) and self.mnt and NR_CLONE is not None
        # With a pid namespace, the child is cloned straight into it and into its new IPC, mount
        # and UTS namespaces (fork_into_namespaces): one call instead of a clone and unshares.
        self.at_clone = (CLONE_NEWPID | (CLONE_NEWIPC if self.ipc else 0) | CLONE_NEWNS
                         | (CLONE_NEWUTS if self.uts else 0) if self.pid else 0)
        if self.uts:
            own_hostname()
        self.clone_flags = ctypes.c_ulong(self.at_clone | signal.SIGCHLD)
        self.disk = disk
        self.tmp_options = b"size=%d,mode=1777" % disk
        # Where every mount the zygote sees is private already (bubblewrap's), a child's copies
        # are private too: remounting them all private again would cost each child a walk of
        # the mount tree. Nothing makes one shared later: only the zygote could, and it mounts
        # nothing in its own namespace (docs/security.md, "Disk").
        self.private = self.mnt and not shared_mounts()
        # Working directories under /tmp (SCRIPT_SANDBOX=none with a data directory there) would
        # be hidden by a tmpfs on /tmp: such tasks keep the host's.
        self.own_tmp = tasks != "/tmp" and not tasks.startswith("/tmp/")
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY) if self.net else -1
        # Network namespaces no process is in (fds), handed out oldest first: as a stack, one
        # freed while others kept being freed above it could wait for ever.
        self.free = collections.deque()
        self.given = {}  # child pid -> the network namespace it entered, until `k` confirms it
        self.unclaimed = {}  # reaped child pid -> until when its `k` may still come

    def _new_net(self):
        """Creates a network namespace with its loopback up (the zygote steps in and back out)."""
        _check(_unshare(CLONE_NEWNET), "unshare(net)")
        try:
            loopback_up()
            # No TIME_WAIT: a task's closed connections must not outlive it in a namespace the
            # next task gets (they would show in its /proc/net/tcp). On loopback nothing needs it.
            with open("/proc/sys/net/ipv4/tcp_max_tw_buckets", "w") as f:
                f.write("0")
            return os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        finally:
            # Never stay in it: that would be the namespace of every later child.
            _check(_setns(self.home, CLONE_NEWNET), "setns back to the zygote's network")

    def for_child(self):
        """The network namespace fd for the next child (-1: none)."""
        if not self.net:
            return -1
        return self.free.popleft() if self.free else self._new_net()

    def enter(self, net_fd):
        """In the child, right after the fork."""
        if net_fd >= 0:
            _check(_setns(net_fd, CLONE_NEWNET), "setns(net)")
        if self.ipc and not self.at_clone & CLONE_NEWIPC:
            _check(_unshare(CLONE_NEWIPC), "unshare(ipc)")
        if self.uts and not self.at_clone & CLONE_NEWUTS:
            _check(_unshare(CLONE_NEWUTS), "unshare(uts)")
        if self.mnt:
            # A mount namespace of its own, so that its tmpfs mounts are seen by this task only
            # and go with its last process; private (made so unless every mount it copied
            # already was), so none of them reaches the zygote's.
            if not self.at_clone & CLONE_NEWNS:
                _check(_unshare(CLONE_NEWNS), "unshare(mnt)")
            if not self.private:
                _check(_mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount(private)")
            if self.own_tmp and self.disk > 0:
                _check(_mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, self.tmp_options),
                       "mount(tmpfs)")
            if self.pid:
                # The /proc of its own pid namespace: only its own processes are in it.
                _check(_mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                              None), "mount(proc)")

    def arrived(self):
        """In the child, as its task arrives, before anything of the task runs: a cgroup namespace
        whose root is the cgroup the child is in now, the task's own (Node sends a task only once
        its child joined it, in every hierarchy). The task's /proc/self/cgroup then shows `/`, not
        its slot, the runner's block or the service's own cgroups (docs/security.md, "Layers")."""
        if self.cgroup:
            _check(_unshare(CLONE_NEWCGROUP), "unshare(cgroup)")

    def own_dir(self, cwd, uid):
        """In the child, once its task has come: a tmpfs over its own working directory, so the
        directory Node prepared stays empty on the host (and is reused as it is). Like the one on
        /tmp, `disk` bytes: writes past it fail with ENOSPC, and its pages are memory of the
        task's cgroup, never the host's disk (docs/security.md, "Disk")."""
        if self.mnt and self.disk > 0 and uid is not None:
            opts = b"size=%d,mode=0700,uid=%d,gid=%d" % (self.disk, uid, uid)
            _check(_mount(b"tmpfs", os.fsencode(cwd), b"tmpfs", MS_NOSUID | MS_NODEV, opts),
                   "mount(tmpfs)")

    def forked(self, pid, net_fd):
        if net_fd >= 0:
            self.given[pid] = net_fd

    def confirmed(self, pid, clean):
        """Node's `k` for the task of child `pid` was answered: with `clean`, nothing of the task
        is left, so its network namespace has no process and is free again."""
        fd = self.given.pop(pid, None)
        self.unclaimed.pop(pid, None)
        if fd is not None:
            if clean:
                self.free.append(fd)
            else:
                os.close(fd)  # the kernel frees it once its last process is gone

    def reaped(self, pid, now):
        if pid not in self.given:
            return
        if self.pid:
            # Its pid namespace is gone with it, and so is every process of its task: nothing is
            # left in its network namespace, and Node sends no `k` (see leftovers).
            self.confirmed(pid, True)
        else:
            self.unclaimed[pid] = now + 60.0

    def expire(self, now):
        """A child whose `k` never came (it died before it had a task): drop its namespace."""
        for pid, deadline in list(self.unclaimed.items()):
            if now > deadline:
                self.confirmed(pid, False)


# Called with the GIL held, as os.fork calls fork(2): the child is a copy of this one thread.
_clone = ctypes.PyDLL(None, use_errno=True).syscall if NR_CLONE is not None else None
_after_fork_child = ctypes.pythonapi.PyOS_AfterFork_Child


def fork_into_namespaces(flags):
    """os.fork, but the child is the first process (pid 1) of a new pid namespace: it and what it
    starts see no other process, while the zygote and Node know it by its host pid. clone(2) with
    CLONE_NEWPID does it in the fork itself, and with the other namespaces of `flags` (a
    ctypes.c_ulong, built once, with SIGCHLD) too: the child then needs no unshare of its own.

    Every page the zygote writes between two forks is copied (the idle children share it), and a
    ctypes call writes many: so this makes one in the zygote, not three (bench/README.md). The
    child runs Python's after-fork code (random re-seeds itself, thread state is reset); the
    zygote's own hooks are skipped: they take the import lock and run before- and after-fork
    callbacks for other threads' sake, and the zygote has no other thread and imports none of the
    modules that register such callbacks (logging, concurrent.futures)."""
    pid = _clone(NR_CLONE, flags, 0, 0, 0, 0)
    if pid == 0:
        _after_fork_child()
        return 0
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone(pid namespace) failed: {os.strerror(err)}")
    return pid


def new_child():
    """Forks a child, in a pid namespace of its own when tasks get one."""
    if task_namespaces is not None and task_namespaces.pid:
        return fork_into_namespaces(task_namespaces.clone_flags)
    return os.fork()


def isolation_problem(spaces):
    """Why a child could not enter the namespaces of `spaces` (None: it can), checked with a
    throwaway child, whose network namespace is then the first free one."""
    try:
        net_fd = spaces.for_child()
    except OSError as e:
        return str(e)
    r, w = os.pipe()
    pid = fork_into_namespaces(spaces.clone_flags) if spaces.pid else os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            spaces.enter(net_fd)
            spaces.arrived()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(w, str(e).encode())
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        text = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if net_fd >= 0:
        spaces.free.append(net_fd)  # its only process is gone
    if os.waitstatus_to_exitcode(status) != 0:
        return text or f"the check exited with status {os.waitstatus_to_exitcode(status)}"
    return None


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def clear_inheritable():
    """Empties the zygote's inheritable (and so ambient) capability set, which bubblewrap fills
    with what it was told to keep: the uid switch clears a child's effective, permitted and
    ambient sets but not its inheritable one, and no task needs it."""
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two 32-bit words
    data = (_CapData * 2)()
    if _libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    if data[0].inheritable or data[1].inheritable:
        data[0].inheritable = data[1].inheritable = 0
        if _libc.capset(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "capset failed")


def confine_children(flags, strict, disk=0, tasks="/tasks"):
    """Sets up the layers every child gets from the zygote: the user-namespace filter, loaded
    here once, and the namespaces `flags`, checked with a throwaway child. Returns the
    TaskNamespaces children enter (None when there are none, or they cannot be had and not
    `strict`: warned about on stderr)."""
    problems = []
    try:
        clear_inheritable()
    except OSError as e:
        problems.append(f"the inheritable capabilities cannot be cleared: {e}")
    try:
        deny_user_namespaces()
    except ImportError:
        problems.append("user namespaces cannot be denied to tasks: the python3-seccomp "
                        "package (libseccomp's Python binding) is not installed")
    except OSError as e:
        problems.append(f"user namespaces cannot be denied to tasks: {e}")
    spaces = None
    if flags:
        try:
            spaces = TaskNamespaces(flags, disk, tasks)
            problem = isolation_problem(spaces)
        except OSError as e:
            problem = str(e)
        if problem:
            problems.append(f"tasks cannot have namespaces of their own: {problem}")
            spaces = None
    if problems:
        text = "; ".join(problems)
        if strict:
            sys.stderr.write(f"{text}\n")
            sys.exit(1)
        sys.stderr.write(f"sluice zygote: tasks run with less isolation: {text}\n")
    return spaces


def task_error(type_, message):
    return json.dumps({"ok": False, "error": {"type": type_, "message": message, "traceback": ""}})


def run_task(task, result_w, devnull):
    lim = task["lim"]
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"] + 1))
    for res, key in ((resource.RLIMIT_AS, "as"), (resource.RLIMIT_FSIZE, "fsize"),
                     (resource.RLIMIT_NOFILE, "nofile"), (resource.RLIMIT_NPROC, "nproc")):
        if lim.get(key):
            resource.setrlimit(res, (lim[key], lim[key]))
    uid = task.get("uid")
    if task.get("own") and task_namespaces is not None:
        task_namespaces.own_dir(task["cwd"], uid)  # as root: after the uid drop it cannot be
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
        if zygote_gone():  # the zygote died before it was set again: nothing would signal us
            os._exit(0)
    if stat_fd >= 0:
        os.close(stat_fd)  # never the task's
    if not entered:
        os.chdir(task["cwd"])
    # The task's own variables (secrets among them, docs/secrets.md); HOME and TMPDIR stay ours.
    os.environ.update(task.get("env") or {})
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
    write_result(result_w, msg)


def write_result(result_w, msg):
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


def child_main(task_r, result_w, out_w, err_w, node_ends, net_fd):
    global stat_fd
    # Signal dispositions need no reset: the zygote installs no handlers (see main).
    os.setpgid(0, 0)  # own process group, which Node kills; the zygote sets it too (a race)
    # Cleared by fork: a pre-forked child must not outlive the zygote, even one that died while
    # it forked us (a killed service's burst of forks left children waiting for good).
    die_with_parent(zygote_pid)
    try:
        stat_fd = os.open("/proc/self/stat", os.O_RDONLY)  # before its own /proc is mounted
    except OSError:
        stat_fd = -1  # then a task's uid switch is not followed by the check
    problem = None
    if task_namespaces is not None:
        try:
            task_namespaces.enter(net_fd)
        except OSError as e:
            problem = str(e)  # checked at start-up, so rare: this task fails, no fork loop
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)  # never read the zygote's command pipe
    os.dup2(out_w, 1)  # sys.stdout and sys.stderr already write to fds 1 and 2
    os.dup2(err_w, 2)
    close_all_but(sorted({task_r, result_w, devnull, *node_ends, stat_fd} - {-1}))
    # While idle, pay the copy-on-write faults of the task path (json, compile,
    # exec...) so the task itself does not: this halves its latency.
    warm_up()
    line = read_line(task_r)
    if line is None:
        return
    for fd in (task_r, *node_ends):  # Node opened its ends before it sent the task
        os.close(fd)
    if task_namespaces is not None and problem is None:
        try:
            task_namespaces.arrived()
        except OSError as e:
            problem = str(e)  # the task does not run without it
    if problem is not None:
        write_result(result_w, task_error(
            "SandboxUnavailable", f"the task's own namespaces could not be created: {problem}"))
        return
    run_task(json.loads(line), result_w, devnull)


def fork_child():
    """Forks an idle child; returns its pid and the descriptors Node opens in it. An OSError (no
    process, memory or descriptor left under the zygote's limits) leaves nothing behind."""
    fds = []
    net_fd = -1
    try:
        for _ in range(4):
            fds += os.pipe()
        net_fd = task_namespaces.for_child() if task_namespaces is not None else -1
        pid = new_child()
    except OSError:
        for fd in fds:
            os.close(fd)
        if net_fd >= 0:
            task_namespaces.free.append(net_fd)  # nobody entered it
        raise
    task_r, task_w, result_r, result_w, out_r, out_w, err_r, err_w = fds
    node_ends = (task_w, result_r, out_r, err_r)
    if pid == 0:
        code = 0
        try:
            child_main(task_r, result_w, out_w, err_w, node_ends, net_fd)
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
    if task_namespaces is not None:
        task_namespaces.forked(pid, net_fd)
    return pid, node_ends


SWEEP_ROUNDS = 20


def sweep_uid(uid):
    """Forks a process that kills everything `uid` owns; returns its pid (0: not possible).
    kill(-1) cannot say whether it found anything (it succeeds whenever any other process
    exists), so the zygote looks again once the sweeper is gone (`leftovers`)."""
    if os.getuid() != 0 or uid == 0:
        return 0
    try:
        pid = os.fork()
    except OSError:
        return 0  # not confirmed: Node retires the uid
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
    costs no fork, so a task that left nothing is confirmed at once. A child forked into a pid
    namespace of its own was its first process, and Linux reaps that process only once every
    other process of the namespace is gone (and a task can neither leave it nor enter another):
    once it is reaped, nothing of the task is left and there is nothing to read."""
    if child in pidfds.values():
        return True
    if child and task_namespaces is not None and task_namespaces.pid:
        return False
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


def add_env(path):
    """The environment's packages, importable from here on (by preload and by every task). Only
    its site-packages, appended: the standard library keeps precedence (a package's `json.py`
    shadows nothing), and its `.pth` files are not read, as site.addsitedir would."""
    if path is None:
        return
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    sys.path.append(os.path.join(path, "lib", ver, "site-packages"))


def preload(modules):
    """Imports the environment's declared modules once, here, instead of once per task. Tenant
    code of sorts (the packages' import-time code), but run inside the sandbox like the task
    itself, before any task exists; the children fork from the result."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - a package that fails to import is the task's to see
            sys.modules.pop(name, None)


def parse_args(argv):
    flags, strict, probe, disk, tasks = 0, False, False, 0, "/tasks"
    global preload_modules, env_dir, user_namespace
    for arg in argv:
        if arg.startswith("--preload="):
            preload_modules = [m for m in arg[len("--preload="):].split(",") if m]
        elif arg.startswith("--userns="):
            user_namespace = [int(x) for x in arg[len("--userns="):].split(",")]
        elif arg.startswith("--env="):
            env_dir = arg[len("--env="):]
        elif arg.startswith("--disk="):
            disk = int(arg[len("--disk="):])
        elif arg.startswith("--tasks="):
            tasks = arg[len("--tasks="):]
        elif arg.startswith("--ns="):
            for name in filter(None, arg[len("--ns="):].split(",")):
                flags |= NAMESPACES[name]
        elif arg == "--strict":
            strict = True
        elif arg == "--probe":
            probe = True
        else:
            sys.exit(f"zygote.py: unknown argument {arg}")
    return flags, strict, probe, disk, tasks


def main():
    global task_namespaces, zygote_pid
    flags, strict, probe, disk, tasks = parse_args(sys.argv[1:])
    # First of all: this process dies with its parent (bubblewrap; Node itself with
    # SCRIPT_SANDBOX=none), and goes now if Node died before that was set (docs/security.md,
    # "The end of a task"). Not the probe, whose stdin Node closed at once.
    die_with_parent()
    if not probe and node_gone():
        sys.exit(0)
    if user_namespace is not None:
        try:
            own_user_namespace(*user_namespace, flags)
        except OSError as e:
            sys.exit(f"sluice zygote: no user namespace of its own: {e}")
        if not probe:
            hold()
    task_namespaces = confine_children(flags, strict, disk, tasks)
    if probe:
        return
    zygote_pid = os.getpid()  # what each child checks its parent against (die_with_parent)
    if task_namespaces is not None and task_namespaces.mnt:
        harness.DISK_BYTES = task_namespaces.disk  # here once: a write per child copies a page
    # No signal handlers here, so children inherit Python's defaults and reset nothing:
    # Node starts us in a session of our own (Ctrl-C is Node's to handle), and child exits
    # arrive through pidfds, not SIGCHLD.
    if _prctl is not None:
        _prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: we reap orphans
    die_with_parent()
    task_streams()
    add_env(env_dir)  # after confine_children: nothing of it is imported before the filter
    preload(preload_modules)
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
            if task_namespaces is not None:
                task_namespaces.confirmed(child, True)
            return
        pid = sweep_uid(uid) if round_ < SWEEP_ROUNDS else 0
        if not pid:
            report(f"w {uid} 1\n")
            if task_namespaces is not None:
                task_namespaces.confirmed(child, False)
            return
        try:
            sweeps[track(pid)] = (uid, child, round_ + 1)
        except OSError:
            report(f"w {uid} 1\n")  # the sweeper cannot be watched; it is reaped as an orphan

    # "pidns": each child is the first process of a pid namespace of its own, so Node may take
    # its `x` as the confirmation that nothing of its task is left (docs/security.md).
    pidns = " pidns" if task_namespaces is not None and task_namespaces.pid else ""
    report(f"ready {os.getpid()}{pidns}\n")
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
            forked, failed = [], ""
            for line in lines:
                cmd, _, arg = line.decode().partition(" ")
                if cmd == "f":
                    failed += fork_children(int(arg), forked)
                elif cmd == "k":
                    uid, _, child = arg.partition(" ")
                    if int(child or 0) in pidfds.values():
                        # Node killed its group; check once it is reaped (or sweep at the deadline).
                        deferred[int(child)] = (int(uid), time.monotonic() + 1.0)
                    else:
                        check(int(uid), int(child or 0))
            tracked = []
            for pid, fds in forked:
                try:
                    tracked.append((track(pid), fds))
                except OSError as e:
                    os.kill(pid, signal.SIGKILL)  # reaped as an orphan; no task gets it
                    failed += f"e 1 {reason(e)}\n"
            report("".join(f"c {pid} {' '.join(map(str, fds))}\n" for pid, fds in tracked))
            report(failed)
        now = time.monotonic()
        if exited or sweeps:
            text, gone = reap(poll, pidfds)
            report(text)
            for pid in gone:
                if task_namespaces is not None:
                    task_namespaces.reaped(pid, now)
                if pid in sweeps:
                    check(*sweeps.pop(pid))
        if task_namespaces is not None:
            task_namespaces.expire(now)
        for child, (uid, deadline) in list(deferred.items()):
            if child not in pidfds.values() or now > deadline:
                del deferred[child]
                check(uid, child)


def reason(e):
    """An OSError in the system's words, on one line: `resource temporarily unavailable`."""
    text = os.strerror(e.errno) if e.errno else str(e)
    return " ".join(text.split()).lower()


def fork_children(n, forked):
    """Forks `n` idle children into `forked`; returns the `e` report of those it could not. A
    failed fork ends the batch (the next would fail alike) and never the zygote: its limits (a
    preloading zygote's cgroup, what its packages started) decide it, and its other tasks go on."""
    for i in range(n):
        try:
            forked.append(fork_child())
        except OSError as e:
            return f"e {n - i} {reason(e)}\n"
    return ""


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
