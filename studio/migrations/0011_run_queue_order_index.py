"""The run queue indexed in claim order: by status, then oldest first.

A claim asks for the oldest due pending run whose thread is free. The index it
had, ``(status, not_before, created_at)``, cannot hand rows back in
``created_at`` order past the ``not_before`` range: Postgres walked the index of
all runs by ``created_at`` instead, reading past every finished run older than
the queue (14 ms a claim with 100,000 finished runs, growing with the studio's
history), and SQLite read every pending run and sorted them. With ``(status,
created_at)`` both read the pending runs in order from the oldest and stop at
the first that can go: no finished run is read, nothing is sorted. It replaces
the old index, so a run costs as many index entries as before. Not a partial
index of pending runs: a plan made for a parameter (``status = $1``) could not
use it.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("studio", "0010_run_event_kind_indexes"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="run",
            name="studio_run_status_b7149e_idx",
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                fields=["status", "created_at"], name="studio_run_queue_order"
            ),
        ),
    ]
