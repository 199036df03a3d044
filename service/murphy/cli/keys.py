"""``murphy keys``: access keys for ``murphy server --auth sigv4``, like ``aws iam`` manages them.

Works on the server's database directly (``--data-dir`` / ``--database-url`` / ``MURPHY_*``, as
``murphy server`` takes them), so the first key can be made before any server runs. ``create``
prints the secret once, as ``aws iam create-access-key`` does; nothing else ever shows it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

#: ``create --from-env``: the id and secret to store (environment, not argv, which ``ps`` shows).
ID_ENV, SECRET_ENV = "MURPHY_NEW_ACCESS_KEY_ID", "MURPHY_NEW_SECRET_ACCESS_KEY"


def _ring(args: argparse.Namespace) -> Any:
    from murphy.auth.keys import KeyRing
    from murphy.settings import Settings
    from murphy.store import open_job_store
    from murphy.store.base import AccessKeyStore

    overrides = {k: v for k, v in {"data_dir": args.data_dir, "database_url": args.database_url}.items() if v}
    settings = Settings(**overrides)
    store = open_job_store(settings.resolved_database_url)
    assert isinstance(store, AccessKeyStore)
    return KeyRing(store, settings)


def _actions(text: str | None) -> tuple[str, ...] | None:
    return None if not text else tuple(a.strip() for a in text.split(",") if a.strip())


def cmd_keys(args: argparse.Namespace) -> int:
    from murphy.exceptions import AccessKeyNotFound, ValidationException

    ring = _ring(args)
    try:
        if args.action == "create":
            given = None
            if args.from_env:
                given = (os.environ.get(ID_ENV, ""), os.environ.get(SECRET_ENV, ""))
                if args.exist_ok and given[0] in {k["AccessKeyId"] for k in ring.list()["AccessKeyMetadata"]}:
                    return 0
            out: Any = ring.create(args.account, args.name or "default", _actions(args.actions), given)
        elif args.action == "session":
            out = ring.create_session(args.account, args.name or "session", args.duration_seconds, _actions(args.actions))
        elif args.action == "list":
            out = ring.list(args.account)
        elif args.action == "delete":
            ring.delete(args.access_key_id)
            out = None
        else:
            ring.set_status(args.access_key_id, "Inactive" if args.action == "disable" else "Active")
            out = None
    except (ValidationException, AccessKeyNotFound) as e:
        print(f"murphy keys: {e}", file=sys.stderr)
        return 2
    finally:
        ring.store.close()
    if out is not None:
        print(json.dumps(out, indent=4))
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("keys", help="access keys for murphy server --auth sigv4 (create, list, disable, delete)")
    p.add_argument("--data-dir", help="the server's data dir (default $MURPHY_DATA_DIR or ~/.murphy)")
    p.add_argument("--database-url", help="the server's database (default SQLite under the data dir)")
    ks = p.add_subparsers(dest="action", required=True)
    c = ks.add_parser("create", help="a new key; prints its secret once (aws iam create-access-key)")
    s = ks.add_parser("session", help="temporary credentials with a session token (aws sts get-session-token)")
    for q in (c, s):
        q.add_argument("--account", required=True, help="the 12-digit account the key acts in")
        q.add_argument("--name", help="a name for the key (its IAM-style user name)")
        q.add_argument("--actions", help="comma-separated actions it may call, e.g. 'sagemaker:Describe*,logs:*' "
                                         "(default: all)")
    c.add_argument("--from-env", action="store_true",
                   help=f"store the key in ${ID_ENV} / ${SECRET_ENV} instead of generating one")
    c.add_argument("--exist-ok", action="store_true", help="with --from-env: nothing to do if that id exists")
    s.add_argument("--duration-seconds", type=int, default=43200, help="lifetime (900..129600, default 43200)")
    lst = ks.add_parser("list", help="every key, without secrets (aws iam list-access-keys)")
    lst.add_argument("--account", help="only this account's keys")
    for name, text in (("disable", "refuse requests signed with the key"), ("enable", "accept the key again"),
                       ("delete", "remove the key for good")):
        q = ks.add_parser(name, help=text)
        q.add_argument("access_key_id")
    p.set_defaults(func=cmd_keys)
