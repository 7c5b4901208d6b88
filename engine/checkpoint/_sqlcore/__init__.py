"""What the SQLite and Postgres savers share: statements, operations, the saver base.

The savers' behaviour is written once, as *sans-I/O operations*
(:mod:`.reads`, :mod:`.writes`, :mod:`.retention`): generators that yield the
SQL statements to run and receive their rows. Each backend supplies only a
dialect (placeholders, how to pass a set of keys, its schema) and a driver that
runs one operation in one transaction on its connection. So the four SQL savers
(SQLite and Postgres, sync and async) cannot drift apart, and the conformance
suite proves the one implementation against each database.
"""

from __future__ import annotations
