"""The lock of a result directory: an exclusive ``flock`` on ``sweep.lock`` naming its holder
(see :mod:`.store`). Each step is a function; :meth:`.store.ResultStore.lock` runs them."""

from __future__ import annotations

import errno
import json
import os
import platform
import socket
import sys
import time
import warnings
from pathlib import Path

from .records import StoreLocked, StoreWarning, _json_bytes, _write_failure

__all__ = [
    "fcntl_module",
    "make_root",
    "take",
    "mark_holder",
    "release",
    "holder",
    "writer_alive",
]

#: Attempts to open and lock the file while holders releasing it replace it under us.
ATTEMPTS = 100
#: Errors of a filesystem without locks (some network mounts): the sweep runs unlocked.
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)


def fcntl_module():
    """:mod:`fcntl`, or ``None`` where there is none (Windows: no advisory locks)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    return fcntl


def writer_alive(pid: int) -> bool:
    """True when ``pid`` is another live process of this host (it may still be writing the
    temporary file it names); False for this process, a dead one, or an invalid pid."""
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError) as exc:
        return isinstance(exc, PermissionError)  # alive, owned by another user
    return True


def make_root(root: Path) -> None:
    """Create the result directory (``OptplanError`` naming it if that fails)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _write_failure(root, exc) from exc


def take(fcntl, root: Path, lock_path: Path) -> int | None:
    """Open ``lock_path`` and lock it without waiting; the open descriptor.

    Retries while the file is replaced under us (a holder releasing unlinks it while still
    holding it): the lock counts only on the file that is at ``lock_path`` now. ``None`` where
    the filesystem has no locks (warned: a concurrent sweep would not be refused).
    """
    for _ in range(ATTEMPTS):
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise _write_failure(root, exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = holder(fd)
            os.close(fd)
            raise StoreLocked(
                f"out {str(root)!r} is in use by another sweep: {who} holds "
                f"{lock_path}. Wait for it to finish (or stop it), or use another --out"
            ) from None
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                os.close(fd)
                raise
            warnings.warn(
                f"cannot lock {lock_path} ({exc.strerror}); a concurrent sweep into "
                f"{root} would not be refused",
                StoreWarning,
                stacklevel=4,
            )
            return fd
        try:
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
    raise StoreLocked(f"out {str(root)!r}: could not take {lock_path}")  # pragma: no cover


def mark_holder(fd: int, root: Path, lock_path: Path) -> None:
    """Write this process (pid, host, start time, command) into the lock file at ``fd``; warn
    when it named another holder, one that died without releasing it."""
    if holder(fd, raw=True):
        warnings.warn(
            f"took over the lock {lock_path} left by {holder(fd)}, which is no longer running",
            StoreWarning,
            stacklevel=4,
        )
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname() or platform.node(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "command": " ".join(sys.argv)[:500],
    }
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, _json_bytes(info), 0)
    except OSError as exc:
        os.close(fd)
        raise _write_failure(root, exc) from exc


def release(fd: int, lock_path: Path) -> None:
    """Remove the lock file while still holding it (see :func:`take`), then close it."""
    try:
        os.unlink(lock_path)
    except OSError:
        pass
    os.close(fd)


def holder(fd: int, raw: bool = False):
    """The holder named in the lock file open at ``fd`` (``raw``: its bytes)."""
    try:
        data = os.pread(fd, 4096, 0)
    except OSError:
        data = b""
    if raw:
        return data
    try:
        info = json.loads(data)
        return (
            f"pid {info['pid']} on host {info['host']} (since {info['started']}: "
            f"{info.get('command') or '?'})"
        )
    except (ValueError, KeyError, TypeError):
        return "an unknown process"
