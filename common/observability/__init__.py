"""What operators read off a running deployment: health and readiness (``health``), Prometheus
metrics (``metrics``), request ids on every log line and in the tasks a request queues
(``requests``, ``logs``, ``tasks``)."""
