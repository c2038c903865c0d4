"""Batch scheduling: Kueue and JobSet, queues and quotas, workloads and experiments."""
