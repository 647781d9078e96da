# Thresholds for the lag alerts (issue 7): seconds behind, growing lag, a per-group webhook.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("groups", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="groupmonitor",
            name="max_seconds_behind",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="groupmonitor",
            name="growing_minutes",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="groupmonitor",
            name="webhook_url",
            field=models.URLField(blank=True, default="", max_length=500),
        ),
    ]
