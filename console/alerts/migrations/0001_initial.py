# The lag alerts (issue 7).

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Alert",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("cluster", models.CharField(max_length=64)),
                ("group", models.CharField(max_length=255)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("lag", "messages behind"),
                            ("seconds_behind", "seconds behind"),
                            ("growing", "lag growing"),
                            ("clients", "clients online"),
                        ],
                        max_length=16,
                    ),
                ),
                ("threshold", models.FloatField()),
                ("value", models.FloatField()),
                ("last_value", models.FloatField()),
                ("message", models.TextField()),
                ("raised_at", models.DateTimeField()),
                ("resolved_at", models.DateTimeField(blank=True, null=True)),
                ("resolution", models.TextField(blank=True, default="")),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("webhook_status", models.CharField(default="none", max_length=16)),
                ("webhook_attempts", models.PositiveIntegerField(default=0)),
                ("webhook_error", models.TextField(blank=True, default="")),
            ],
            options={
                "ordering": ["-raised_at", "-id"],
                "indexes": [models.Index(fields=["cluster", "resolved_at"], name="alerts_cluster_open")],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("resolved_at__isnull", True)),
                        fields=("cluster", "group", "kind"),
                        name="alerts_one_open_per_group_kind",
                    )
                ],
            },
        ),
    ]
