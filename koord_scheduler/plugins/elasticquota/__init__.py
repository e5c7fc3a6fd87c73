"""Koordinator ElasticQuota: a quota tree with runtime quota, admission and quota-scoped preemption."""
