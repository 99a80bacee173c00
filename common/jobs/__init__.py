"""Jobs and queued runs: services (job records and the reporter), the run lifecycle
(``runs``: execute, cancel, retry), selectors and the job API."""
