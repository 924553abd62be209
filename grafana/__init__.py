"""Build-time generators of the Grafana dashboard and alert provisioning (dev extra only)."""
