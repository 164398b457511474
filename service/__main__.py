"""Command line: `python -m service keys create|list|revoke` (admin of API keys)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from service.api.keys import generate_key, parse_scopes
from service.config import get_settings
from service.db import migrate
from service.db.base import utc_now
from service.db.engine import Database
from service.db.repositories import ApiKeyRepository
from service.db.tables import ApiKey


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m service")
    groups = parser.add_subparsers(dest="group", required=True)
    keys = groups.add_parser("keys", help="manage API keys").add_subparsers(
        dest="action", required=True
    )
    create = keys.add_parser("create", help="create a key and print it once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--scopes", required=True, help="comma-separated: estimate,billing,...")
    revoke = keys.add_parser("revoke", help="revoke a key by its prefix")
    revoke.add_argument("prefix")
    keys.add_parser("list", help="list keys (prefixes only)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = get_settings()
    if settings.run_migrations_on_start:
        migrate.upgrade(settings.database_url)
    database = Database(settings)
    try:
        with database.sessions.begin() as session:
            repository = ApiKeyRepository(session)
            if args.action == "create":
                try:
                    scopes = parse_scopes(args.scopes)
                except ValueError as error:
                    print(f"error: {error}", file=sys.stderr)
                    return 2
                new = generate_key()
                repository.add(
                    ApiKey(
                        tenant=args.tenant,
                        scopes=",".join(sorted(scopes)),
                        prefix=new.prefix,
                        key_sha256=new.sha256,
                        created_at=utc_now(),
                    )
                )
                print(new.secret)
                print(
                    f"prefix {new.prefix} tenant {args.tenant} scopes {','.join(sorted(scopes))}"
                    " (the key is shown only once)",
                    file=sys.stderr,
                )
            elif args.action == "revoke":
                row = repository.by_prefix(args.prefix)
                if row is None:
                    print(f"error: no key with prefix {args.prefix!r}", file=sys.stderr)
                    return 1
                row.revoked_at = row.revoked_at or utc_now()
                print(f"revoked {row.prefix} (tenant {row.tenant})")
            else:
                for row in repository.all():
                    state = f"revoked {row.revoked_at.isoformat()}" if row.revoked_at else "active"
                    print(
                        f"{row.prefix}\t{row.tenant}\t{row.scopes}\t"
                        f"{row.created_at.isoformat()}\t{state}"
                    )
    finally:
        database.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
