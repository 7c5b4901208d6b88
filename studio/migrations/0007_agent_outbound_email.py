# The outbox of the tool agent's approved emails (studio.reviews.outbound_email).

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("studio", "0006_worker_heartbeat"),
    ]

    operations = [
        migrations.CreateModel(
            name="OutboundEmail",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("thread_id", models.CharField(max_length=64)),
                ("tool_call_id", models.CharField(max_length=128)),
                ("to", models.CharField(max_length=320)),
                ("subject", models.CharField(max_length=300)),
                ("body", models.TextField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("executions", models.PositiveIntegerField(default=1)),
                (
                    "decision",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="emails",
                        to="studio.approvaldecision",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("thread_id", "tool_call_id"),
                        name="one_email_per_tool_call",
                    )
                ],
            },
        ),
    ]
