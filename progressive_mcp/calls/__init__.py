"""Running a call: arguments, the upstream client, the response cache, shaping answers, and code mode's sandbox."""
