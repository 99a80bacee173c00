"""The demo world: ``scene`` (specs and ground truth), ``figures`` and ``renderer`` (synthetic videos
of walking people), ``coverage`` (tracker coverage of the truth), ``benchmark`` (the demo benchmark
built from rendered scenes) and ``describe_eval`` (describer facts scored against the truth)."""
