"""kafkaops: Kafka operators' runbooks as safe, idempotent, resumable state machines.

Import nothing heavy here: ``kafkaops --help`` must stay instant, so client libraries
(confluent_kafka, kazoo, paramiko, pyspark) are imported lazily inside ``kafkaops.systems``.
"""

__version__ = "0.1.0"
