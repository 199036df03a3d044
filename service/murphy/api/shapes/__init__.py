"""Wire shapes: pydantic models named and shaped after botocore's SageMaker and CloudWatch Logs
models (field names are the AWS member names verbatim)."""
