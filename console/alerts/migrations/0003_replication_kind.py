# A replication alert: a slave disconnected from its master, or too far behind it.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0002_expired_kind"),
    ]

    operations = [
        migrations.AlterField(
            model_name="alert",
            name="kind",
            field=models.CharField(
                choices=[
                    ("lag", "messages behind"),
                    ("seconds_behind", "seconds behind"),
                    ("growing", "lag growing"),
                    ("clients", "clients online"),
                    ("expired", "unconsumed messages deleted by expiry"),
                    ("replication", "slave disconnected or behind"),
                ],
                max_length=16,
            ),
        ),
    ]
