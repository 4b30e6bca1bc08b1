"""A submission: read (any notebook format nbformat knows, junk rejected with a reason) and
sanitized the way nbgrader's ``autograde`` does, before it runs.

:func:`sanitize` sets the source notebook's kernelspec (what nbgrader's ``OverwriteKernelspec``
sets, read from the same source, without opening the gradebook once more) and runs
``ClearOutput`` -> ``DeduplicateIds`` -> (drop emptied nbgrader metadata) -> ``OverwriteCells``
(missing cells added back) -> ``CheckCellMetadata``: edited, emptied, deleted, duplicated or retyped test cells are restored
from the source notebook recorded in the gradebook (a deleted one wherever the cells around it
were deleted too), and every cell's nbgrader metadata from the source notebook
(:func:`_restoring_overwrite_cells`).
"""
from __future__ import annotations

import copy
import functools
import json
import os
import stat
from pathlib import Path

from ..common.course import CHECK_TAG, GradingError


def read_json(path: Path, limit: int) -> dict:
    """A submitted notebook's JSON, read and checked as far as the standard library can (its
    size, its JSON, an ``nbformat`` field); GradingError if unusable (larger than ``limit``
    bytes, among others: reading and parsing take several times its size in memory).

    Read once, by one descriptor: a regular file only (a FIFO would block the grader forever, a
    device such as ``/dev/zero`` never ends), its size checked on that descriptor and at most
    ``limit`` bytes read whatever it says (a file that grows while read is cut off there)."""
    try:
        kind = os.stat(path).st_mode  # before opening: opening a FIFO or a device can block
        if stat.S_ISDIR(kind):
            raise GradingError(f"{path} is a folder, not a notebook file")
        if not stat.S_ISREG(kind):
            raise GradingError(f"{path} is not a notebook file (a device, a pipe or a socket)")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise GradingError(f"{path} is not a notebook file (a device, a pipe or a socket)")
            chunks, size = [], 0
            while size <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if max(size, st.st_size) > limit:
                raise GradingError(
                    f"{path} is {max(size, st.st_size) / 2**20:.0f} MB, more than the "
                    f"{limit / 2**20:.0f} MB the grader reads: clear its outputs (Kernel > Restart "
                    "Kernel and Clear Outputs of All Cells), save it and submit it again")
            raw = b"".join(chunks)
        finally:
            os.close(fd)
    except FileNotFoundError as exc:
        raise GradingError(f"no such file: {path}") from exc
    except OSError as exc:
        raise GradingError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GradingError(f"{path} is not a notebook: it is not valid JSON ({exc})") from exc
    except RecursionError as exc:  # Python's parser gives up on arrays or objects nested ~1000 deep
        raise GradingError(f"{path} is not a notebook: its JSON nests too deeply to be read") from exc
    if not isinstance(data, dict) or "nbformat" not in data:
        raise GradingError(f"{path} is not a Jupyter notebook (no 'nbformat' field)")
    return data


def read_submission(path: Path, data: dict):
    """Validate a submitted notebook (``data``: its JSON, as :func:`read_json` read it),
    upgrading old formats; raise GradingError if unusable."""
    import nbformat

    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
    except Exception as exc:
        raise GradingError(f"{path} is not a notebook nbformat can read: {exc}") from exc
    cells = []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            continue
        cell.setdefault("metadata", nbformat.NotebookNode())
        if not isinstance(cell.metadata, dict):
            cell.metadata = nbformat.NotebookNode()
        src = cell.get("source", "")
        cell["source"] = "".join(src) if isinstance(src, list) else str(src)
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
        # nbgrader metadata that is not a dict with a text grade_id (null included): an ordinary
        # cell (a test cell is restored from the source all the same)
        if "nbgrader" in cell.metadata:
            nbg = cell.metadata["nbgrader"]
            if not isinstance(nbg, dict) or not isinstance(nbg.get("grade_id", ""), str):
                del cell.metadata["nbgrader"]
        tags = cell.metadata.get("tags")  # read as a list of strings from here on
        if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
            cell.metadata["tags"] = [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []
        cells.append(cell)
    nb.cells = cells
    return nb


@functools.lru_cache(maxsize=None)
def _restoring_overwrite_cells():
    """nbgrader's ``OverwriteCells`` (the class, made once), with the nbgrader metadata of every
    cell restored from the source and a re-adding of deleted grade cells that cannot fail.

    Its instances' ``trusted``: ``grade_id -> nbgrader metadata`` of the source notebook's
    cells, in order.

    - nbgrader restores a cell's type, lock, points and (locked) source, but refuses the whole
      notebook when other flags were edited (``grade`` set on an answer cell: "No such grade
      cell"; ``solution`` set on a test cell: "Inconsistent checksums"; a newer
      ``schema_version``), and every answer of the notebook then counts for nothing. Here a
      cell that names a source cell gets that cell's nbgrader metadata back first, as its
      source is given back; a cell naming none (made up by the submission) becomes an
      ordinary cell.
    - nbgrader puts a deleted grade cell back after the source cell just before it, and raises
      ``KeyError`` when that one was deleted too (an answer cell deleted with its test cell, an
      empty notebook). Here it goes after the nearest earlier source cell the submission still
      has, else before the nearest later one, else at the end (nbgrader's own
      ``missing_cell_transform`` makes the cell).
    """
    from nbgrader.preprocessors import OverwriteCells

    class RestoringOverwriteCells(OverwriteCells):
        trusted: dict = {}

        def preprocess_cell(self, cell, resources, index):
            meta = cell.metadata.get("nbgrader")
            if isinstance(meta, dict) and meta.get("grade_id"):
                if meta["grade_id"] not in self.trusted:
                    del cell.metadata["nbgrader"]
                    return cell, resources
                cell.metadata["nbgrader"] = copy.deepcopy(self.trusted[meta["grade_id"]])
            return super().preprocess_cell(cell, resources, index)

        def add_missing_grade_cells(self, nb, resources):
            rank = {gid: i for i, gid in enumerate(self.trusted)}
            source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
            source = {c.name: c for c in source_nb.source_cells}
            solutions = {c.name for c in source_nb.solution_cells}
            grade_cells = sorted(source_nb.grade_cells, key=lambda c: rank.get(c.name, len(rank)))
            for grade_cell in grade_cells:
                gid = grade_cell.name
                where = {c.metadata["nbgrader"]["grade_id"]: i for i, c in enumerate(nb.cells)
                         if c.metadata.get("nbgrader", {}).get("grade_id") in rank}
                if gid in where or gid not in source:
                    continue
                self.log.warning(f"Missing grade cell {gid} encountered, adding to notebook")
                cell = self.missing_cell_transform(source[gid], grade_cell.max_score,
                                                   is_solution=gid in solutions)
                mine = rank.get(gid, len(rank))
                before = [g for g in where if rank[g] < mine]
                after = [g for g in where if rank[g] > mine]
                if before:
                    at = where[max(before, key=rank.__getitem__)] + 1
                elif after:
                    at = where[min(after, key=rank.__getitem__)]
                else:
                    at = len(nb.cells)
                nb.cells.insert(at, cell)
            return nb, resources

    return RestoringOverwriteCells


def sanitize(nb, res, released):
    """The submission as nbgrader's autograde would run it (see the module's docstring), with
    the released notebook's kernelspec. Raises GradingError for metadata nbgrader refuses."""
    import nbformat
    from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, DeduplicateIds

    # nbgrader's OverwriteKernelspec sets the kernelspec the gradebook recorded from this same
    # source notebook, and opens the gradebook for it (a twentieth of a second, before the kernel
    # may start the notebook): set here from the source itself
    nb.metadata["kernelspec"] = copy.deepcopy(released.metadata.get("kernelspec", {}))
    trusted = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"] for c in released.cells
               if isinstance(c.metadata.get("nbgrader"), dict) and c.metadata["nbgrader"].get("grade_id")}
    overwrite = _restoring_overwrite_cells()(add_missing_cells=True)
    overwrite.trusted = trusted
    try:
        for pp in (ClearOutput(), DeduplicateIds()):
            nb, res = pp.preprocess(nb, res)
        for cell in nb.cells:  # a duplicate's emptied nbgrader dict, which CheckCellMetadata refuses
            if "nbgrader" in cell.metadata and not cell.metadata["nbgrader"].get("grade_id"):
                del cell.metadata["nbgrader"]  # an ordinary cell instead
        for pp in (overwrite, CheckCellMetadata()):
            nb, res = pp.preprocess(nb, res)
    except Exception as exc:
        raise GradingError(f"the notebook's cell metadata is unusable: {exc}") from exc
    nb = nbformat.from_dict(nb)  # cells nbgrader re-added hold plain dicts
    # the released notebook's "Check my answers" cells only re-run the visible tests: not run
    nb.cells = [c for c in nb.cells if CHECK_TAG not in c.metadata.get("tags", []) or "nbgrader" in c.metadata]
    return nb
