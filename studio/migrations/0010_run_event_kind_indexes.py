"""Partial indexes for the run events of rare kinds that pages look up by kind.

The thread page asks for a thread's newest ``token`` event (the live feed's
catch-up point) and, when its newest events hold none, its newest ``run.status``;
the conversation panel reads a run's ``token`` events in order. With only the
``(thread, id)`` and ``(run, id)`` indexes, each of these read back through every
event of the thread or run that was not of that kind: 11 ms on SQLite for a
thread of 40,000 events holding no token, on every render of its page. Each index
holds only its kind's rows, so inserting any other event costs what it did.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("studio", "0009_run_reliability"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="runevent",
            index=models.Index(
                condition=models.Q(("kind", "token")),
                fields=["thread", "id"],
                name="studio_runevent_thread_token",
            ),
        ),
        migrations.AddIndex(
            model_name="runevent",
            index=models.Index(
                condition=models.Q(("kind", "token")),
                fields=["run", "id"],
                name="studio_runevent_run_token",
            ),
        ),
        migrations.AddIndex(
            model_name="runevent",
            index=models.Index(
                condition=models.Q(("kind", "run.status")),
                fields=["thread", "id"],
                name="studio_runevent_thread_status",
            ),
        ),
    ]
