"""CDK app for deploying the endpoint (built in the AWS issue)."""
