"""The local lab: real ZooKeeper, Kafka 3.9 brokers, etcd + conftool, one sshd per host, an
eventbus-like HTTP service per host, a pybal-like load balancer and a load generator.

It exists so that every runbook can be rehearsed (and tested) against real components before it
touches production, and it is described by ``inventory/lab.yaml`` exactly as production is described
by its inventory: kafkaops talks to the lab only through the same adapters it uses in production.
"""
