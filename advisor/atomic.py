"""All-or-nothing file writes: stage in a temporary directory beside the targets, then rename.

Targets must be regular files or absent: a symlink, directory, FIFO or device node is refused
before anything is written (os.replace would replace the link itself, or write into a device).

Several files (a render's set) are written into a fresh directory beside the output folder, which
holds the new set plus hard links to any other files the folder had; then the two directories
swap in one step (Linux renameat2 RENAME_EXCHANGE), so a process killed at any point leaves the
old set or the new one, never a mix (issue 43: a kill between per-file renames did). Where that
cannot be done (not Linux, a file system without RENAME_EXCHANGE, the folder is the current
directory, another user's, or holds a subdirectory or special file), the files are renamed one by
one and those already replaced get their previous contents back when a rename fails.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from advisor.errors import OutputError, UsageError


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def _existing(path: Path) -> bool:
    """True when ``path`` is a regular file, False when absent; OutputError for anything else."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise OutputError(f"cannot inspect {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(f"{path} is {_kind(st.st_mode)}; refusing to replace it (remove it or choose another path)")
    return True


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_all(folder: Path, files: dict[str, tuple[str, int]], *, force: bool = False) -> list[Path]:
    """Write ``{name: (text, mode)}`` into ``folder``: every file or none. Modes are set
    explicitly (not left to the umask). Existing files are replaced only with ``force``."""
    folder = Path(folder)
    targets = {name: folder / name for name in files}
    for name in files:
        if os.sep in name or name in ("", ".", ".."):
            raise UsageError(f"bad output file name {name!r}")
    for name, path in targets.items():  # refuse before creating anything
        _existing(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot write into {folder}: {exc.strerror or exc}") from None
    with _folder_lock(folder):
        return _write_locked(folder, targets, files, force=force)


class _folder_lock:
    """An exclusive, non-blocking ``flock`` on the folder itself for the check-and-write: of two
    writers into one folder one wins, the other is told (no mixed set of files)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.fd = -1

    def __enter__(self):
        import fcntl

        try:
            self.fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise OutputError(f"cannot open {self.folder}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self.fd)
            raise OutputError(f"another advisor process is writing into {self.folder} now; nothing was written "
                              "(wait for it, or choose another directory)") from None  # fmt: skip
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # closing releases the lock
        return False


def _write_locked(folder: Path, targets: dict[str, Path], files: dict[str, tuple[str, int]], *, force: bool) -> list[Path]:
    existed = {name: _existing(path) for name, path in targets.items()}
    if any(existed.values()) and not force:
        present = ", ".join(str(targets[n]) for n, e in existed.items() if e)
        raise UsageError(f"{present} already exist; pass --force to overwrite")
    if len(files) > 1:
        swapped = _write_by_swap(folder, targets, files)
        if swapped is not None:
            return swapped
    try:
        staging = Path(tempfile.mkdtemp(dir=folder, prefix=".advisor-staging-"))
    except OSError as exc:
        raise OutputError(f"cannot write into {folder}: {exc.strerror or exc}") from None
    done: list[str] = []
    try:
        _stage(staging, files)
        for name in files:  # keep the previous contents until every rename has succeeded
            if existed[name]:
                backup = staging / f".previous-{name}"
                try:
                    os.link(targets[name], backup)
                except OSError:
                    shutil.copy2(targets[name], backup)
        for name in files:
            os.replace(staging / name, targets[name])
            done.append(name)
    except OSError as exc:
        for name in reversed(done):
            try:
                if existed[name]:
                    os.replace(staging / f".previous-{name}", targets[name])
                else:
                    os.unlink(targets[name])
            except OSError:
                pass
        where = getattr(exc, "filename", None) or folder
        raise OutputError(f"cannot write {where}: {exc.strerror or exc}; nothing was changed") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _fsync_dir(folder)
    return [targets[name] for name in files]


def _stage(staging: Path, files: dict[str, tuple[str, int]]) -> None:
    for name, (text, mode) in files.items():
        fd = os.open(staging / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fchmod(fh.fileno(), mode & ~_umask())  # the user's umask narrows it, as open() would
            os.fsync(fh.fileno())


_NO_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


def _exchange(a: Path, b: Path) -> None:
    """Swap the paths ``a`` and ``b`` in one step (Linux renameat2 with RENAME_EXCHANGE, glibc >= 2.28).
    OSError with an errno in _NO_EXCHANGE where the kernel, libc or file system cannot."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        raise OSError(errno.ENOSYS, "renameat2 is not in this C library")
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(b))


def _pinned(path: Path) -> bool:
    """True when ``path`` is marked immutable or append-only (chattr +i / +a): a swap of its folder would replace
    it all the same, and leave it undeletable beside the folder."""
    import fcntl
    import struct

    fs_ioc_getflags, immutable, append = 0x80086601, 0x10, 0x20
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        flags = struct.unpack("l", fcntl.ioctl(fd, fs_ioc_getflags, struct.pack("l", 0)))[0]
    except OSError:
        return False
    finally:
        os.close(fd)
    return bool(flags & (immutable | append))


def _write_by_swap(folder: Path, targets: dict[str, Path], files: dict[str, tuple[str, int]]) -> list[Path] | None:
    """The new set (and hard links to the folder's other files) in a fresh sibling directory, swapped with
    ``folder`` in one step; None where that cannot be done here (the caller renames file by file)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or os.path.samefile(folder, os.getcwd()):
            return None  # a symlink would be swapped itself; another's folder would become ours; never the cwd
        others = []
        for entry in os.listdir(folder):
            if entry in files and _pinned(folder / entry):
                return None  # chattr +i/+a: the per-file renames fail on it, and nothing changes
            if entry in files or entry.startswith(".advisor-staging-"):
                continue
            kind = os.lstat(folder / entry).st_mode
            if not (stat.S_ISREG(kind) or stat.S_ISLNK(kind)):
                return None
            others.append(entry)
        staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.advisor-new-"))
    except OSError:
        return None
    try:
        try:
            for entry in others:
                os.link(folder / entry, staging / entry, follow_symlinks=False)
        except OSError:
            return None
        try:
            _stage(staging, files)
            os.chmod(staging, stat.S_IMODE(st.st_mode))
            _fsync_dir(staging)
            _exchange(staging, folder)
        except OSError as exc:
            if exc.errno in _NO_EXCHANGE:
                return None
            where = getattr(exc, "filename", None) or folder
            raise OutputError(f"cannot write {where}: {exc.strerror or exc}; nothing was changed") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # after the swap: the previous set
    _fsync_dir(folder.parent)
    return [targets[name] for name in files]


def _umask() -> int:
    """The process umask (read by setting and restoring it; the CLI is single-threaded when it writes)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


def write_one(path: Path, text: str, *, mode: int = 0o644) -> Path:
    """One file, atomically (same rules as write_all; replaces an existing regular file)."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    return write_all(folder, {path.name: (text, mode)}, force=True)[0]


def check_target(path: Path) -> None:
    """Refuse now what :func:`write_one` would refuse later (a directory, symlink, FIFO or device
    at ``path``), so that a command fails before its slow work rather than after it."""
    _existing(Path(path))
