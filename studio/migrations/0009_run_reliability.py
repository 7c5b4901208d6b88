"""One running run per thread, kept by the database (a partial unique index), and
idempotency keys on run creation (one run per key and user).

Before the index is built, a thread that somehow has more than one running run
keeps the one that started first; the others go back to the queue (their
worker's heartbeat finds them gone and the next claim continues them from
their last checkpoint).
"""

from typing import Any

from django.conf import settings
from django.db import migrations, models


def requeue_extra_running(apps: Any, schema_editor: Any) -> None:
    Run = apps.get_model("studio", "Run")
    kept: set[str] = set()
    for run_id, thread_id in (
        Run.objects.filter(status="running")
        .order_by("thread_id", "started_at", "run_id")
        .values_list("run_id", "thread_id")
    ):
        if thread_id in kept:
            Run.objects.filter(pk=run_id).update(
                status="pending", lease_owner="", lease_expires_at=None
            )
        else:
            kept.add(thread_id)


class Migration(migrations.Migration):
    dependencies = [
        ("studio", "0008_run_status_cancelled"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(requeue_extra_running, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status", "running")),
                fields=("thread",),
                name="studio_run_one_running_per_thread",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="idempotency_key",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AddField(
            model_name="run",
            name="request_hash",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                condition=models.Q(("idempotency_key", ""), _negated=True),
                fields=("created_by", "idempotency_key"),
                name="studio_run_idempotency_key_per_user",
            ),
        ),
    ]
