"""Embedded local AWS stack: kinesalite (Kinesis) and moto (DynamoDB, S3) as child processes.

``node_modules`` for kinesalite live beside this file; install them with
``lander local-stack --install`` (``make emulators`` in a clone) or
:func:`install_node_modules`.
"""

from consumer.cli.emulators.stack import (
    DUMMY_CREDENTIAL,
    REGION,
    LocalStack,
    LocalStackError,
    Provision,
    install_node_modules,
    run_local_stack,
)

__all__ = [
    "DUMMY_CREDENTIAL",
    "REGION",
    "LocalStack",
    "LocalStackError",
    "Provision",
    "install_node_modules",
    "run_local_stack",
]
