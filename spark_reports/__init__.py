"""Spark reports: traffic and lag built by PySpark from the message log and offset history.

Launched by a Celery task as ``python -m spark_reports``; reads messages through the
remoting protocol (never the store's files), locally by default or on a Spark cluster.
"""
