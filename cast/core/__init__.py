"""The turn core: typed records, stages and their settings, the registry, configs and the pipeline of batch steps."""
