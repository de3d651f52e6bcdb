"""Safety of the output folder: which folders the runner may replace, the lock, the atomic swap.

The runner only ever replaces or removes a folder it wrote itself. Every
report folder it writes (the report, and the kept failed run) holds a marker
file, :data:`MARKER`, that lists the files the runner put there.

* :func:`check_report_folder` decides, before anything runs, whether a folder
  may be written: a new or empty folder, or a report folder (with its marker)
  that holds nothing but the files its marker lists. It refuses a file, a
  non-empty folder without the marker (the repository root, a folder with
  ``.git``, a user's data), a report folder to which the user added files or
  folders, a mount point (a folder that cannot be renamed), and a symbolic
  link that does not lead to a report folder. A symbolic link to a report
  folder is followed: the runner writes the folder it points to, and the link
  stays as it is.
* :func:`remove_report_folder` removes a previous report after the swap by
  deleting the files its marker lists, the marker, then the empty folder; an
  entry the runner did not write stops the removal and is left in place.
* :func:`locked` holds ``.<out>.lock`` beside the folder for the whole run.
* :func:`install_dir` puts the new folder in place with one atomic
  ``renameat2(RENAME_EXCHANGE)`` (Linux), else two renames through a uniquely
  named backup folder.
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

__all__ = [
    "MARKER", "ReportsLocked", "ReportFolderError", "check_report_folder", "read_marker", "write_marker",
    "remove_report_folder", "is_mount_point", "locked", "exchange", "install_dir", "current_umask",
    "remove_tree", "OWNER", "make_run_folder", "release_run_folder", "remove_stale_run_folders",
]

#: The marker file of a folder the runner wrote: a header line, then one name per line.
MARKER = ".sampling-lab-report"

_MARKER_HEADER = "sampling-lab report folder"
_MARKER_TEXT = (
    f"{_MARKER_HEADER}\n"
    "This folder was written by `sampling-lib run` (python -m sampling_lib run). The runner replaces it\n"
    "whole on its next run into it, and refuses to while it holds anything not listed below: keep your\n"
    "own files elsewhere. The files the runner wrote:\n"
    "\n"
)


class ReportsLocked(RuntimeError):
    """Another runner is writing into the same report folder."""


class ReportFolderError(ValueError):
    """A folder given to the runner is not one it may write (the message says why and what to do)."""


def read_marker(folder):
    """The names listed by ``folder``'s marker, or None when ``folder`` is not a report folder."""
    path = Path(folder) / MARKER
    try:
        if path.is_symlink() or not path.is_file():
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    head, sep, names = text.partition("\n\n")
    if not sep or head.splitlines()[:1] != [_MARKER_HEADER]:
        return None
    return [n for n in names.splitlines() if n and "/" not in n and n not in (".", "..", MARKER)]


def write_marker(folder, names):
    """Write ``folder``'s marker listing ``names`` (the files the runner put there)."""
    names = sorted(set(names) - {MARKER})
    (Path(folder) / MARKER).write_text(_MARKER_TEXT + "".join(f"{n}\n" for n in names), encoding="utf-8")


def _mount_points():
    """Mount points from /proc/self/mountinfo (Linux; bind mounts included), else an empty set."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return set()
    # the fifth field, with spaces and the like written as octal escapes (\040)
    return {re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            for line in text.splitlines() if len(line.split()) > 4}


def is_mount_point(path):
    """True when ``path`` is a mount point (its own device, or listed in the mount table)."""
    path = Path(path)
    return os.path.ismount(path) or str(path) in _mount_points()


def _preview(names, limit=5):
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _foreign_entries(folder, listed):
    """Entries of ``folder`` that its marker does not list as a file of the runner."""
    listed = set(listed)
    out = []
    for entry in sorted(os.listdir(folder)):
        if entry == MARKER:
            continue
        p = folder / entry
        if entry not in listed or p.is_symlink() or not p.is_file():
            out.append(entry + ("/" if p.is_dir() and not p.is_symlink() else ""))
    return out


def check_report_folder(path, what="--out"):
    """Return the folder the runner will write for ``path``, or raise :class:`ReportFolderError`.

    Allowed: a folder that does not exist yet, an empty folder, or a report
    folder (with :data:`MARKER`) holding only the files its marker lists. A
    symbolic link is followed only to such a report folder. Nothing on disk is
    changed.

    Parameters
    ----------
    path : path
        The folder asked for.
    what : str
        How the message names it (``"--out"``, ``"the failed-run folder"``).

    Returns
    -------
    pathlib.Path
        The absolute folder to write (the link's target for a symbolic link).
    """
    if path is None or not str(path).strip():
        raise ReportFolderError(f"{what} must name a folder; got an empty path")
    given = Path(os.path.abspath(path))
    for parent in given.parents:            # the nearest existing folder above it: a file there stops every mkdir
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise ReportFolderError(
                    f"{what} {given}: {parent} is a file, not a folder, so no folder can be made inside it; "
                    "give a path whose parent folders are folders")
            break
    if given.is_symlink():
        target = given.resolve()
        if not target.is_dir() or read_marker(target) is None:
            raise ReportFolderError(
                f"{what} {given} is a symbolic link to {target}, which is not a report folder; the runner "
                f"follows a link only to a folder it wrote (one with its {MARKER} file): give a new folder instead")
    folder = given.resolve()
    if folder.exists() and not folder.is_dir():
        raise ReportFolderError(f"{what} {given} is a file, not a folder: give a new or empty folder")
    if folder.is_dir():
        listed = read_marker(folder)
        if listed is None:
            entries = sorted(os.listdir(folder))
            if entries:
                todo = "give a new or empty folder" if what == "--out" else "move it away"
                raise ReportFolderError(
                    f"{what} {given} is not empty and is not a report folder (no {MARKER} file): it holds "
                    f"{_preview(entries)}; the runner only replaces folders it wrote: {todo}")
        else:
            foreign = _foreign_entries(folder, listed)
            if foreign:
                raise ReportFolderError(
                    f"{what} {given} holds entries the runner did not write: {_preview(foreign)}; move them out "
                    "(the runner replaces its report folder whole and never deletes what it did not write)")
        if is_mount_point(folder):
            raise ReportFolderError(
                f"{what} {given} is a mount point, which the runner cannot replace (it swaps folders by "
                "renaming): give a folder inside it")
    return folder


def remove_report_folder(folder, log=None):
    """Remove a report folder the runner wrote: its listed files, its marker, then the folder itself.

    An entry the marker does not list (a file someone added since) is left in
    place, and so is the folder, with a line through ``log``. Returns True
    when the folder is gone.
    """
    folder = Path(folder)
    listed = read_marker(folder)
    if listed is None:
        if log is not None:
            log(f"left {folder} in place: it is not a report folder")
        return False
    for name in listed:
        p = folder / name
        if p.is_file() and not p.is_symlink():
            p.unlink()
    with contextlib.suppress(FileNotFoundError):
        (folder / MARKER).unlink()
    try:
        folder.rmdir()
    except OSError:
        if log is not None:
            left = sorted(os.listdir(folder)) if folder.is_dir() else []
            log(f"left {folder} in place: it holds entries the runner did not write ({_preview(left)})")
        return False
    return True


@contextlib.contextmanager
def locked(out_dir):
    """Exclusive lock on ``.<out>.lock`` beside ``out_dir`` for the whole run; the file is removed on exit.

    Raises :class:`ReportsLocked` when another runner holds it, and
    :class:`ReportFolderError` when the lock file cannot be created (a
    read-only or foreign parent folder) or is not a runner's lock file.

    The lock file is removed when the run ends (while still locked, so that no
    runner holds a lock on a file that is gone: a runner that locked a file
    since removed, or replaced, tries again on the file now at that path). A
    file this runner did not create and that holds no runner's pid (an empty
    file) is left in place. After a SIGKILL the file stays; the next run takes
    it over and removes it.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        yield None
        return
    path = out_dir.parent / f".{out_dir.name}.lock"
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        created = True
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | nofollow, 0o644)
        except FileExistsError:
            created = False
            try:
                fd = os.open(path, os.O_RDWR | nofollow)
            except FileNotFoundError:       # removed in between: try again
                continue
            except OSError as exc:
                raise ReportFolderError(
                    f"cannot open the lock file {path} ({exc.strerror or exc}); it is not a report runner's lock "
                    "file: move it away") from None
        except OSError as exc:
            raise ReportFolderError(
                f"cannot write in {out_dir.parent} (the lock file {path.name}: {exc.strerror or exc}); give an "
                "--out in a folder you can write") from None
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
            same = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            same = None
        mine = os.fstat(fd)
        if same is not None and (same.st_dev, same.st_ino) == (mine.st_dev, mine.st_ino):
            break
        os.close(fd)                        # the runner that held it removed it: lock the file there now
    else:  # pragma: no cover - a hundred removals in a row
        raise ReportsLocked(f"the lock file {path} keeps being replaced; is another runner starting?")
    content = os.pread(fd, 64, 0)
    if not re.fullmatch(rb"\d*\n?", content):   # not a runner's lock (a pid): not ours to overwrite
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        raise ReportFolderError(f"{path} exists and is not a report runner's lock file; move it away")
    ours = created or bool(content.strip())       # made here, or a runner's (a pid): removed at the end
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        if ours:
            with contextlib.suppress(OSError):
                os.unlink(path)              # still locked: a runner waiting on it retries on a new file
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


#: The file in a temporary folder of the runner's that says whose it is (:func:`make_run_folder`).
OWNER = ".sampling-lab-run"
_OWNER_PROGRAM = "sampling-lab report runner"


def make_run_folder(parent, prefix):
    """A new temporary folder ``parent/<prefix>XXXXXXXX`` (mkdtemp, mode 0700) with its :data:`OWNER` file: the
    runner's process identity (host, boot, pid and start time), so that a later run can remove it if this run
    is killed before it removes it itself (:func:`remove_stale_run_folders`)."""
    import json

    from .processes import process_identity

    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    owner = dict(program=_OWNER_PROGRAM, **process_identity())
    (folder / OWNER).write_text(json.dumps(owner) + "\n", encoding="utf-8")
    return folder


def release_run_folder(folder):
    """Take the :data:`OWNER` file out of a run folder that becomes a report folder (or a kept failed run)."""
    with contextlib.suppress(FileNotFoundError):
        (Path(folder) / OWNER).unlink()


def _owner_of(folder):
    """The owner recorded in ``folder`` (a real folder of this user's, holding a well-formed OWNER file), else
    None."""
    import json

    try:
        st = os.lstat(folder)
        if not os.path.isdir(folder) or os.path.islink(folder) or st.st_uid != os.getuid():
            return None
        p = Path(folder) / OWNER
        if p.is_symlink() or not p.is_file():
            return None
        owner = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, AttributeError):
        return None
    return owner if isinstance(owner, dict) and owner.get("program") == _OWNER_PROGRAM else None


def remove_stale_run_folders(parent, prefix, allowed, log=None):
    """Remove the temporary folders ``parent/<prefix>*`` that a killed run left: only those that are provably
    the runner's and whose owner has ended.

    A folder is removed when it is a real folder of this user's, holds the
    :data:`OWNER` file a run wrote (:func:`make_run_folder`), its owner is
    provably gone (:func:`~sampling_lib.reporting.processes.process_gone`:
    this host and boot, and no process with its pid and start time), and every
    entry in it is a file the runner writes there (``allowed(name)``). A folder
    with anything else in it is left in place, with a line through ``log``.
    Folders without the file (a user's folder named like the runner's) are
    never touched. Returns the folders removed.
    """
    from .processes import process_gone

    removed = []
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        folder = Path(parent) / name
        owner = _owner_of(folder)
        if owner is None or not process_gone(owner):
            continue
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        foreign = [e for e in entries if e != OWNER and (not allowed(e) or (folder / e).is_dir())]
        if foreign:
            if log is not None:
                log(f"left {folder} in place (a run of pid {owner.get('pid')} that ended without removing it): it "
                    f"holds entries the runner does not write there ({_preview(sorted(foreign))})")
            continue
        for e in entries:
            if e != OWNER:
                with contextlib.suppress(FileNotFoundError):
                    (folder / e).unlink()
        with contextlib.suppress(FileNotFoundError):
            (folder / OWNER).unlink()
        try:
            folder.rmdir()
        except OSError:
            continue
        removed.append(folder)
        if log is not None:
            log(f"removed {folder}, left by a run (pid {owner.get('pid')}) that ended without removing it")
    return removed


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
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):  # pragma: no cover
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def install_dir(new, out):
    """Put folder ``new`` at ``out``; return a folder that holds the previous report, or None.

    One atomic exchange where supported (``new`` then holds the previous
    report); otherwise two renames through a uniquely named backup folder
    created here (the previous report is then ``<backup>/<out name>``). The
    caller removes the returned folder with :func:`remove_report_folder`.
    """
    if not out.exists():
        new.rename(out)
        return None
    if exchange(new, out):
        return new
    backup = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))  # pragma: no cover
    out.rename(backup / out.name)  # pragma: no cover
    new.rename(out)  # pragma: no cover
    return backup / out.name  # pragma: no cover


def current_umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def remove_tree(path, attempts=20, pause=0.25):
    """Remove a folder the runner created (its temporary folder), retrying for up to
    ``attempts * pause`` seconds: after an interrupt, a stopping worker's kernel may still be
    writing its output notebook into it (seen under load: the folder survived a single rmtree)."""
    for _ in range(attempts):
        if not path.exists():
            return
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            time.sleep(pause)
