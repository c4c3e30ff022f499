"""Recommend quotes for every context of a file, in input order, into a JSON lines file.

The output is written to OUTPUT.partial and renamed to OUTPUT once complete, so OUTPUT is never half
written. A run that stopped early can resume: the complete lines of the partial file are kept, their
contexts skipped, provided the partial file was written by the same run (quoter.batch.resume).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quoter.atomic_files import check_not_an_input, check_output_file, write_json_atomic
from quoter.batch.contexts import BatchContext
from quoter.batch.resume import check_resumable, run_record, run_record_path
from quoter.batch.settings import BatchOutputConfig
from quoter.errors import InputError, QuoterError
from quoter.progress import progress_bar
from quoter.ranking import Query

if TYPE_CHECKING:  # torch comes with them: the command checks its input and output before it waits for that
    from quoter.serving.live.live_quotes import ScoredQuote
    from quoter.serving.recommender import Recommender

PARTIAL_SUFFIX = ".partial"
SHARDS_SUFFIX = ".shards"
# Why writing the output may stop with no fault of the run: a full disk, a file size limit, a quota.
OUT_OF_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def partial_path(output: Path) -> Path:
    """Where the output grows until it is complete."""
    return output.with_name(output.name + PARTIAL_SUFFIX)


def shard_folder(output: Path) -> Path:
    """Where a Ray run writes the output's shards, one per block, and its run record (quoter.batch.ray_job)."""
    return output.with_name(output.name + SHARDS_SUFFIX)


def check_batch_output(output: Path, input: Path) -> None:
    """Refuse, before any model loads, an --output where the output cannot be written, or whose files
    (OUTPUT, OUTPUT.partial and its run record, a Ray run's OUTPUT.shards/) would overwrite the --input file."""
    check_output_file(output, "--output")
    partial = partial_path(output)
    check_output_file(partial, "--output")
    for path in (output, partial, run_record_path(partial)):
        check_not_an_input(path, "--output", {"--input": input})
    shards = shard_folder(output)
    if shards.exists() and not shards.is_dir():
        raise InputError("is not a folder; a Ray run keeps its shards there: move it away", path=shards)
    if shards.resolve() in input.resolve().parents:
        raise InputError("--output's shards would overwrite the --input file; give another file name", path=shards)


def _kept_prefix(partial: Path, contexts: Sequence[BatchContext]) -> tuple[int, int]:
    """How many contexts the partial output already answers, and the bytes of those complete lines."""
    if not partial.is_file():
        return 0, 0
    done = kept = 0
    with partial.open("rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # cut off mid-line by the interruption
            try:
                line = json.loads(raw)["line"]
            except (ValueError, RecursionError, KeyError, TypeError):  # not one of the lines written here
                break
            if done >= len(contexts) or line != contexts[done].line:
                raise InputError(
                    "this partial output does not belong to this input; delete it or run without --resume",
                    path=partial,
                    line=done + 1,
                )
            done += 1
            kept += len(raw)
    return done, kept


def ranked_lines(recommender: Recommender, contexts: Sequence[BatchContext], config: BatchOutputConfig) -> str:
    """The output lines of `contexts`, ranked together as one step of a run (config.chunk contexts at most)."""
    queries = [Query(c.query.left) if config.left_only else c.query for c in contexts]
    found = recommender.recommend(queries, config.k)
    return "".join(_output_line(c, f) for c, f in zip(contexts, found))


def _output_line(context: BatchContext, found: list[ScoredQuote]) -> str:
    record: dict[str, Any] = {"line": context.line}
    if context.id is not None:
        record["id"] = context.id
    record["results"] = [
        {"id": q.id, "quote": q.record.text, "source": q.record.source, "score": q.score, "probability": q.probability}
        for q in found
    ]
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError:  # a score or probability, the id being checked when read: what JSON cannot hold
        raise QuoterError(
            f"input line {context.line}: the model scored a quote NaN or infinite, which JSON cannot hold; is the "
            "bundle damaged?"
        ) from None


def run_batch(
    recommender: Recommender,
    contexts: Sequence[BatchContext],
    output: str | Path,
    config: BatchOutputConfig = BatchOutputConfig(),
    resume: bool = False,
    progress: bool = True,
) -> int:
    """Write the top k quotes of every context to `output` (JSON lines, input order; checked beforehand by
    check_batch_output); return how many contexts this run ranked (fewer than all when it resumed). A full
    disk or a file size limit stops the run in one line that says how to resume it."""
    output = Path(output)
    partial = partial_path(output)
    record = run_record(recommender, contexts, config.k, config.left_only)
    if resume and partial.exists():
        check_resumable(partial, record)
    done, kept = _kept_prefix(partial, contexts) if resume else (0, 0)
    output.parent.mkdir(parents=True, exist_ok=True)
    recorded = False
    try:
        with partial.open("r+b" if done else "wb") as handle:
            # Recorded once an older partial output is emptied: a record never vouches for another run's lines.
            write_json_atomic(run_record_path(partial), record)
            recorded = True
            handle.truncate(kept)
            handle.seek(kept)
            with progress_bar(total=len(contexts), initial=done, unit="context", enabled=progress) as bar:
                for begin in range(done, len(contexts), config.chunk):
                    chunk = contexts[begin : begin + config.chunk]
                    handle.write(ranked_lines(recommender, chunk, config).encode("utf-8"))
                    handle.flush()
                    bar.update(len(chunk))
            os.fsync(handle.fileno())
    except OSError as error:
        if error.errno not in OUT_OF_ROOM:
            raise
        raise _out_of_room(partial, error, recorded) from None
    os.replace(partial, output)
    run_record_path(partial).unlink(missing_ok=True)
    return len(contexts) - done


def _out_of_room(partial: Path, error: OSError, recorded: bool) -> QuoterError:
    """The one line for a run stopped by a full disk or a file size limit. Once its run record is written,
    its complete lines are kept for --resume to go on from."""
    if not recorded:
        return QuoterError(f"{partial}: {error.strerror} before the run began; make room, then run it again")
    return QuoterError(
        f"{partial}: {error.strerror}; the complete lines written so far are kept: make room (or lift the file "
        "size limit), then run the same command with --resume to go on"
    )
