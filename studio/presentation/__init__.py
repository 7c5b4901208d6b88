"""Pure presentation helpers: values to text, JSON and form fields.

Nothing here imports Django or the engine (an import contract checks it), so
services, views and tests use these as plain functions: ``diff`` (state diffs
and value summaries), ``fork_edits`` (the fork form's fields and their
parsing), ``api_json`` (the API's JSON encoding).
"""
