"""Files the instructor's commands write: atomically (a reader never sees half a file), and
never through a link."""
from __future__ import annotations

import io
import os
import stat
import tempfile
from pathlib import Path

def special(path: Path) -> bool:
    """``path`` exists and is not a regular file (``/dev/stdout``, a pipe)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` so that a concurrent reader sees the old file or the new one, never a part
    (a :func:`special` target is written directly)."""
    if special(path):
        Path(path).write_bytes(data)
    else:
        copy_atomic(path, io.BytesIO(data), len(data))


def copy_atomic(path: Path, src, limit: int) -> int:
    """Stream the readable ``src`` into ``path`` atomically (as :func:`write_atomic`), keeping
    at most ``limit + 1`` bytes; the number of bytes read. Nothing larger than that is ever held
    in memory or written, whatever ``src`` claims (a zip member that expands without end)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    size = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            while size <= limit:
                chunk = src.read(min(2**20, limit + 1 - size))
                if not chunk:
                    break
                fh.write(chunk)
                size += len(chunk)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return size
