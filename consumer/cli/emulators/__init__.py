"""Embedded local AWS stack: kinesalite (Kinesis) and moto (DynamoDB, S3) as child processes.

``node_modules`` for kinesalite live beside this file; install them with
``make emulators`` or :func:`install_node_modules`.
"""

from consumer.cli.emulators.stack import (
    DUMMY_CREDENTIAL,
    REGION,
    LocalStack,
    LocalStackError,
    install_node_modules,
    run_local_stack,
)

__all__ = [
    "DUMMY_CREDENTIAL",
    "REGION",
    "LocalStack",
    "LocalStackError",
    "install_node_modules",
    "run_local_stack",
]
