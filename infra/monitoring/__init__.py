"""Monitoring of the fleet: a Cloud Monitoring dashboard, and Managed Prometheus collection of Kueue's metrics."""
