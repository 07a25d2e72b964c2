"""Operations: config, identities and limits, Prometheus metrics, status data, config reload."""
