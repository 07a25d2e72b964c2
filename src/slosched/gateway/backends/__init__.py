"""Backends: the hand-written upstream HTTP client, one backend's health, scrape and outlier ejection, and
forwarding a call's body and stream."""
