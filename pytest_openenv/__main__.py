"""``python -m pytest_openenv push DIR REPO``: upload an output folder to the Hub;
``python -m pytest_openenv view DIR``: serve its run report on 127.0.0.1;
``python -m pytest_openenv inspect-log DIR [--out OUTDIR]``: write its inspect eval logs;
``python -m pytest_openenv rescore DIR --out DIR2``: decide its episodes again (``report/rescore``);
``python -m pytest_openenv merge OUT DIR... [--allow-partial]``: merge a sharded run's folders
(exit code: the merged run's, or 4 when the folders are not the shards of one run).

``push`` is the retry for a run whose upload failed, and the way to publish earlier runs.
Exit codes: 0 pushed, 1 the upload failed (local files untouched), 2 bad
arguments, a folder that is not an output folder or that a live run still writes, or
no token, 130 Ctrl-C. An unfinished folder (its run was killed) is pushed with a warning
that says how to finish it.
``view`` exits 0 when stopped with Ctrl-C, 2 for a folder that is not an output folder,
a host that is not loopback (without ``--allow-remote``) or a port in use.
``inspect-log`` exits 0 with the logs written (a torn last line a killed run left is
skipped with a warning), 2 for a folder that is not an output folder, a line in it that
is no episode record, an ``--out`` that is a file, or without inspect-ai installed.
Every Hub request gives up after ``PYTEST_OPENENV_HUB_TIMEOUT`` seconds without
progress (default 60); a failed or interrupted push prints the command to retry.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .dataset.lock import RunLock

EXIT_OK = 0
EXIT_UPLOAD_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # what a shell reports for a command stopped by Ctrl-C


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_openenv",
        description="Tools for pytest-openenv output folders.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    push = commands.add_parser(
        "push",
        help="upload an output folder to the Hugging Face Hub as a dataset repo",
        description=(
            "Create the dataset repo REPO if needed and upload results.jsonl, failures.jsonl, "
            "metadata.json, summary.json and README.md from DIR in one commit. The token "
            "comes from HF_TOKEN or `hf auth login`. Each Hub request gives up after "
            "PYTEST_OPENENV_HUB_TIMEOUT seconds without progress (default 60)."
        ),
    )
    push.add_argument("folder", metavar="DIR", type=Path, help="output folder of a run")
    push.add_argument("repo_id", metavar="REPO", help="dataset repo id, owner/name")
    push.add_argument(
        "--private", action="store_true", help="create the repo private (if it is new)"
    )
    push.add_argument("--commit-message", metavar="MSG", help="commit message (default: auto)")
    push.add_argument(
        "--license",
        metavar="ID",
        help="Hub license id for the card's front-matter, e.g. mit or cc-by-4.0",
    )
    view = commands.add_parser(
        "view",
        help="serve an output folder's run report on 127.0.0.1, every transcript on demand",
        description=(
            "Serve the run report of DIR (the page report.html shows) with every episode's "
            "transcript read on demand from results.jsonl and failures.jsonl, for folders "
            "too large to embed them all. Binds a loopback address only, unless "
            "--allow-remote is given."
        ),
    )
    view.add_argument("folder", metavar="DIR", type=Path, help="output folder of a run")
    view.add_argument(
        "--port", type=int, default=None, metavar="P", help="port (default 8765; 0: any free)"
    )
    view.add_argument("--host", default="127.0.0.1", metavar="H", help="default 127.0.0.1")
    view.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host that is not loopback (serves the transcripts to your network)",
    )
    inspect_log = commands.add_parser(
        "inspect-log",
        help="write an output folder's episodes as inspect-ai eval logs, one per group",
        description=(
            "Write one inspect-ai eval log per group (test function, env, model or policy) "
            "of the episodes in DIR's results.jsonl and failures.jsonl (a resumed run's "
            "included), as --openenv-inspect-log does at the end of a run. Open them with "
            "`inspect view --log-dir OUTDIR`. Needs the inspect extra."
        ),
    )
    inspect_log.add_argument("folder", metavar="DIR", type=Path, help="output folder of a run")
    inspect_log.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="OUTDIR",
        help="folder of the logs (default: DIR/inspect-logs)",
    )
    from .report.rescore import add_arguments as add_rescore_arguments

    add_rescore_arguments(
        commands.add_parser(
            "rescore",
            help="decide an output folder's saved episodes again (a judge, a rubric, a "
            "threshold), with no policy call, into a new folder paired with the first",
            description=(
                "Re-judge the transcripts of DIR's results.jsonl and failures.jsonl with a "
                "judge model and rubric, or another --openenv-min-reward, without calling the "
                "policy; write DIR2 with every figure recomputed and paired with DIR."
            ),
        )
    )
    merge = commands.add_parser(
        "merge",
        help="merge the output folders of a sharded run (--openenv-shard) into one",
        description=(
            "Check that DIR... are the shards of one run (same identity but the shard, none "
            "twice, none missing), then write OUT: their rows once each in id order, and "
            "summary, gate, card, report and preference pairs recomputed from the rows, as "
            "the run on one machine writes them. Exits with the code that run would give "
            "(0 passed, 1 failed), 4 when the folders are refused (nothing is written)."
        ),
    )
    merge.add_argument("out", metavar="OUT", type=Path, help="the merged folder (new or empty)")
    merge.add_argument("folders", metavar="DIR", type=Path, nargs="+", help="shard folders")
    merge.add_argument(
        "--allow-partial",
        action="store_true",
        help="merge with shards missing; the figures and the gate then say partial",
    )
    return parser


#: ``merge``'s exit code for folders it refuses: pytest's usage error
EXIT_MERGE_REFUSED = 4


def merge(args: argparse.Namespace) -> int:
    import pytest

    from .errors import CorruptLine, ShardsRefused
    from .report.merge import merge_shards

    try:
        result = merge_shards(args.out, list(args.folders), allow_partial=args.allow_partial)
    except (ShardsRefused, CorruptLine, pytest.UsageError) as exc:
        # a UsageError: the run's --openenv-baseline cannot be read here as the run read it
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_MERGE_REFUSED
    figures = result.summary["figures"]
    shards = result.summary["shards"]
    partial = (
        f" (PARTIAL: shard(s) {', '.join(str(i) for i in shards['missing'])} of "
        f"{shards['count']} missing)"
        if shards["partial"]
        else ""
    )
    print(
        f"merged {len(shards['merged'])} of {shards['count']} shards into {result.folder}"
        f"{partial}: {figures['passed']} passed, {figures['failed']} failed, "
        f"{figures['errored']} errored"
    )
    if result.verdict is not None:
        for line in result.verdict.lines():
            print(line)
    print(f"exit code {result.exit_status} (as the run on one machine)")
    return result.exit_status


def write_inspect_log(args: argparse.Namespace) -> int:
    import importlib.util

    from .dataset.hub import upload_files
    from .errors import NotAnOutputFolder
    from .util.secrets import KnownSecrets

    folder = args.folder.resolve()
    try:
        upload_files(folder)  # the files an output folder must have
    except NotAnOutputFolder as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if importlib.util.find_spec("inspect_ai") is None:
        print(
            "error: writing inspect eval logs needs inspect-ai: "
            "pip install 'pytest-openenv[inspect]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from .errors import CorruptLine
    from .report.inspect_log.write import write_inspect_logs

    out = args.out.resolve() if args.out is not None else None
    if out is not None and out.exists() and not out.is_dir():
        print(
            f"error: --out {args.out} is a file: OUTDIR is the folder the logs are written "
            "to; name a folder (an existing one keeps its other files) or a new path",
            file=sys.stderr,
        )
        return EXIT_USAGE

    def warn(message: str) -> None:
        print(f"warning: {message}", file=sys.stderr)

    try:
        written = write_inspect_logs(folder, out, KnownSecrets.collect(), warn=warn)
    except CorruptLine as exc:
        print(
            f"error: cannot read {exc}; fix or move that line's file (only a run killed "
            "mid-write leaves a broken line, and only as the last one)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except (FileExistsError, NotADirectoryError) as exc:  # a file where a folder must go
        print(f"error: --out {args.out}: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return EXIT_USAGE
    for log in written:
        print(f"{log.path}  ({log.samples} episodes: {log.group.label})")
    if not written:
        print(f"no episodes in {folder}: no log written")
    return EXIT_OK


def view(args: argparse.Namespace) -> int:
    from .report.view import DEFAULT_PORT, ViewError, serve

    port = DEFAULT_PORT if args.port is None else args.port
    if not 0 <= port <= 65535:
        print(f"error: --port {port} is invalid: expected 0..65535", file=sys.stderr)
        return EXIT_USAGE
    try:
        return serve(args.folder.resolve(), args.host, port, allow_remote=args.allow_remote)
    except ViewError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def push(args: argparse.Namespace) -> int:
    from .config.convert import license_problem, repo_id_problem
    from .dataset.hub import find_token, hub_timeout, push_folder, refresh_card, retry_command
    from .dataset.lock import FolderLocked
    from .errors import NotAnOutputFolder, PushError

    problem = repo_id_problem(args.repo_id)
    if problem:
        print(f"error: REPO {args.repo_id!r} is invalid: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.license is not None and license_problem(args.license):
        print(
            f"error: --license {args.license!r}: {license_problem(args.license)}", file=sys.stderr
        )
        return EXIT_USAGE
    folder = args.folder.resolve()
    try:
        hub_timeout()
    except PushError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not find_token():
        print(
            "error: pushing to the Hub needs a token with write access: set HF_TOKEN or "
            "run `hf auth login`",
            file=sys.stderr,
        )
        return EXIT_USAGE
    again = retry_command(
        folder, args.repo_id, private=args.private, commit_message=args.commit_message
    )
    try:
        lock = hold_for_push(folder)
    except (NotAnOutputFolder, FolderLocked) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        warn_if_unfinished(folder)
        refresh_card(folder, args.repo_id, args.license)
        result = push_folder(
            folder, args.repo_id, private=args.private, commit_message=args.commit_message
        )
    except NotAnOutputFolder as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PushError as exc:
        print(f"error: push to {args.repo_id} failed: {exc}", file=sys.stderr)
        print(f"every local file is intact in {folder}; retry with:\n    {again}", file=sys.stderr)
        return EXIT_UPLOAD_FAILED
    except KeyboardInterrupt:
        print(
            f"interrupted: push to {args.repo_id} stopped before the Hub confirmed it; every "
            f"local file is intact in {folder}; retry with:\n    {again}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        if lock is not None:
            lock.release()
    print(f"pushed {', '.join(result.files)} to {result.url}")
    return EXIT_OK


def hold_for_push(folder: Path) -> RunLock | None:
    """The folder's run lock, held while its card is refreshed and its files uploaded.

    A live run still appends rows and rewrites the card at its end: pushing then would
    upload part of a run (and the card rewrite would race it), so it is refused; holding
    the lock keeps a run from starting there meanwhile. None: a folder we may not write
    (a read-only copy), which no run can be writing either.
    """
    from .dataset.folder import LOCK
    from .dataset.hub import upload_files
    from .dataset.lock import FolderLocked, RunLock

    upload_files(folder)  # not an output folder: say so before touching it
    lock = RunLock(folder / LOCK)
    try:
        lock.acquire()
    except FolderLocked as exc:
        holder: str | None = str(exc)
    except OSError:
        holder = lock.live_holder()
        lock = None
    else:
        holder = None
    if holder is not None:
        raise FolderLocked(
            f"{folder} is being written by a live run ({holder}): its rows are not all there "
            "yet and its card is rewritten at its end. Push once that run has ended (or pass "
            "--openenv-push-to-hub to the run itself)"
        )
    return lock


def warn_if_unfinished(folder: Path) -> None:
    """A run killed or stopped before its end left rows unsorted and a card of part of it."""
    from .dataset.folder import read_metadata

    metadata = read_metadata(folder)
    if metadata is None or metadata.get("finished_at") is not None:
        return
    print(
        f"warning: the run that wrote {folder} did not finish (metadata.json has no "
        "finished_at: it was killed or interrupted), so its rows may be unsorted and its "
        "summary and card describe only part of it. To finish it, run the same pytest "
        "command again with --openenv-resume, then push; pushing it as it is",
        file=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "push":
        return push(args)
    if args.command == "view":
        return view(args)
    if args.command == "inspect-log":
        return write_inspect_log(args)
    if args.command == "rescore":
        from .report.rescore import run as rescore

        return rescore(args)
    if args.command == "merge":
        return merge(args)
    return EXIT_USAGE  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
