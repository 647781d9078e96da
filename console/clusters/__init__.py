"""Clusters and brokers: the cluster list, the dashboard (brokers, health, live TPS, top groups
and topics, delay schedule), broker settings, ACL accounts and traffic charts.

The pages, API and live socket of what ``nameserver`` (the cluster model, lookup and
topology reads this app stands on) knows of each cluster.
"""
