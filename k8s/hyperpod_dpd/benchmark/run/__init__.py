"""Running a level: the Job and its clients, the traffic, the target, readiness, and reading the files back."""
