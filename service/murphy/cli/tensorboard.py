"""``murphy tensorboard export <trial> <logdir>``: a trial's tensors as TensorBoard event files."""

from __future__ import annotations

import argparse
from typing import Any


def _export(args: argparse.Namespace) -> int:
    from murphy.exceptions import MissingCollectionFiles
    from murphy.ui.tbexport import export

    try:
        total = export(args.trial, args.logdir, follow=args.follow, poll_s=args.poll)
    except MissingCollectionFiles as e:
        print(f"murphy tensorboard export: {args.trial} holds no trial: {e}")
        return 1
    print(f"{total} new step(s); view with: tensorboard --logdir {args.logdir}")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("tensorboard", help="TensorBoard output of saved tensors")
    tsub = p.add_subparsers(dest="tensorboard_command", required=True)
    e = tsub.add_parser("export", help="write a trial (path or s3:// URI) as TensorBoard event files; "
                                       "incremental: a second run adds only new steps")
    e.add_argument("trial", help="the trial: a directory or s3://bucket/prefix (smdebug or murphy format)")
    e.add_argument("logdir", help="the TensorBoard logdir to write (one run per mode)")
    e.add_argument("--follow", action="store_true", help="keep exporting new steps until training ends")
    e.add_argument("--poll", type=float, default=2.0, help="seconds between checks with --follow (default 2)")
    e.set_defaults(func=_export)
