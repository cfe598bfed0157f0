"""Where tools come from: each source turns a description of an API into the common catalog model."""
