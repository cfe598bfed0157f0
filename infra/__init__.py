"""The CDK app that deploys the endpoint: `stack` (resources), `config` (knobs), `bundling` (the Lambda asset), `app`.

See infra/README.md for the knobs, the decisions and how to deploy.
"""
