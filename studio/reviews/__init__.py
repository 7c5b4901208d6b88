"""The reviewer console: governed graphs, the decision protocol, the ledger, the queue, the audit log.

- ``governance``: what a graph declares only the console may do (``GOVERNANCE``
  in the graph's module) and the guards every state-changing path calls.
- ``decisions``: the one decision protocol, used by the page and the JSON API.
- ``ledger``: what the side effect trusts (approving rows, re-run hard checks).
- ``queue``: the pending reviews a user may decide, kept in step with checkpoints.
- ``audit``: the append-only record of decisions and refusals, and its CSV export.
- ``views`` / ``urls`` / ``consumers``: the pages and the live count badge.
"""
