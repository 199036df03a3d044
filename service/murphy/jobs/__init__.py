"""Training jobs: records and their state machine, the JobService, the supervisor loop."""
