# Issue 14: an alert when file expiry deletes messages a group had not consumed.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("alerts", "0001_initial"),
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
                ],
                max_length=16,
            ),
        ),
    ]
