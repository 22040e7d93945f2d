"""Accounts for the review pages: Argon2 password hashes, roles, lockout after failed logins."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional

import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from bot.storage import db
from bot.storage.schema import users

ROLES = ("advocate", "maintainer")
#: Failed logins before the account is locked, and for how long.
MAX_FAILED_LOGINS = 5
LOCKOUT_SECONDS = 15 * 60
MIN_PASSWORD_LENGTH = 12

_hasher = PasswordHasher()


class AccountError(ValueError):
    """A request about accounts that cannot be done; the message says why."""


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str

    @property
    def is_maintainer(self) -> bool:
        return self.role == "maintainer"


def _valid_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > 64 or not all(c.isalnum() or c in "._-@" for c in name):
        raise AccountError("a user name is 1 to 64 letters, digits or . _ - @")
    return name


def add_user(name: str, role: str, password: str, url: Optional[str] = None) -> User:
    name = _valid_name(name)
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}")
    if len(password or "") < MIN_PASSWORD_LENGTH:
        raise AccountError(f"the password needs at least {MIN_PASSWORD_LENGTH} characters")
    db.migrate(url)
    with db.engine(url).begin() as connection:
        if connection.execute(sa.select(users.c.id).where(users.c.name == name)).first():
            raise AccountError(f"user {name!r} already exists")
        result = connection.execute(
            sa.insert(users).values(
                name=name, role=role, password_hash=_hasher.hash(password), failed_logins=0, created_at=time.time()
            )
        )
        return User(int(result.inserted_primary_key[0]), name, role)


def list_users(url: Optional[str] = None) -> List[User]:
    db.migrate(url)
    with db.engine(url).connect() as connection:
        rows = connection.execute(sa.select(users.c.id, users.c.name, users.c.role).order_by(users.c.name)).all()
    return [User(r.id, r.name, r.role) for r in rows]


def remove_user(name: str, url: Optional[str] = None) -> bool:
    db.migrate(url)
    with db.engine(url).begin() as connection:
        return bool(connection.execute(sa.delete(users).where(users.c.name == name)).rowcount)


def get_user(user_id: int, url: Optional[str] = None) -> Optional[User]:
    with db.engine(url).connect() as connection:
        row = connection.execute(sa.select(users.c.id, users.c.name, users.c.role).where(users.c.id == user_id)).first()
    return User(row.id, row.name, row.role) if row else None


class LoginRefused(Exception):
    """Wrong name or password, or a locked account (the message is safe to show)."""


def authenticate(name: str, password: str, url: Optional[str] = None, now: Optional[float] = None) -> User:
    """The user, or LoginRefused. Every failure counts towards the lockout."""
    now = now if now is not None else time.time()
    refusal: Optional[str] = None
    user: Optional[User] = None
    with db.engine(url).begin() as connection:  # committed before any refusal is raised
        row = connection.execute(sa.select(users).where(users.c.name == (name or "").strip())).first()
        if row is None:
            _hasher.hash(password or "x")  # same work as a real check: no timing hint that the name is unknown
            refusal = "Wrong user name or password."
        elif row.locked_until and row.locked_until > now:
            refusal = "This account is locked after too many failed logins. Try again later."
        else:
            try:
                _hasher.verify(row.password_hash, password or "")
            except (VerifyMismatchError, VerificationError, InvalidHashError):
                failed = (row.failed_logins or 0) + 1
                locked = now + LOCKOUT_SECONDS if failed >= MAX_FAILED_LOGINS else None
                connection.execute(
                    sa.update(users)
                    .where(users.c.id == row.id)
                    .values(failed_logins=0 if locked else failed, locked_until=locked)
                )
                refusal = (
                    "This account is locked after too many failed logins. Try again later."
                    if locked
                    else "Wrong user name or password."
                )
            else:
                updates = {"failed_logins": 0, "locked_until": None}
                if _hasher.check_needs_rehash(row.password_hash):
                    updates["password_hash"] = _hasher.hash(password)
                connection.execute(sa.update(users).where(users.c.id == row.id).values(**updates))
                user = User(row.id, row.name, row.role)
    if refusal or user is None:
        raise LoginRefused(refusal or "Wrong user name or password.")
    return user
