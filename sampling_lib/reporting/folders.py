"""Safety of the output folder: the lock, the atomic swap, removing the runner's own folders."""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["ReportsLocked", "locked", "exchange", "install_dir", "current_umask", "remove_tree"]


class ReportsLocked(RuntimeError):
    """Another runner is writing into the same report folder."""


@contextlib.contextmanager
def locked(out_dir):
    """Exclusive lock on ``.<out>.lock`` beside ``out_dir`` for the whole run."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield None
        return
    path = out_dir.parent / f".{out_dir.name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise ReportsLocked(
            f"another report runner (pid {holder}) is writing {out_dir}; wait for it to finish or use "
            f"another --out (lock file {path})"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def exchange(a, b):
    """Atomically swap the names ``a`` and ``b`` (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):  # pragma: no cover - old glibc
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    import errno

    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):  # pragma: no cover
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))  # pragma: no cover


def install_dir(new, out):
    """Put folder ``new`` at ``out``; return a folder of ours that holds the previous content, or None.

    One atomic exchange where supported (``new`` then holds the old reports);
    otherwise two renames through a uniquely named backup folder created here.
    """
    if not out.exists():
        new.rename(out)
        return None
    if exchange(new, out):
        return new
    backup = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))  # pragma: no cover
    out.rename(backup / out.name)  # pragma: no cover
    new.rename(out)  # pragma: no cover
    return backup  # pragma: no cover


def current_umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_tree(path, attempts=20, pause=0.25):
    """Remove a folder, retrying for up to ``attempts * pause`` seconds: after an interrupt, a
    stopping worker's kernel may still be writing its output notebook into it (seen under load:
    the folder survived a single rmtree)."""
    for _ in range(attempts):
        if not path.exists():
            return
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            time.sleep(pause)

