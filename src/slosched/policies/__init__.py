"""Cluster routers and engine policies, registered by name (see registry)."""
