"""How each kind of Kafka client is told a cluster's security, and what a refusal from the brokers means.

One :class:`~kafkaops.model.KafkaSecurity` (inventory ``kafka.security``) becomes, here and only here:

* librdkafka settings (:func:`librdkafka_config`): the admin, consumer and producer clients;
* Java client properties (:func:`java_properties`): Kafka's own tools, through a ``--command-config`` file
  (:mod:`kafkaops.systems.command_config`), and the Spark post-check's readers (``kafka.``-prefixed);
* TLS for the hand-written broker probe (:func:`tls_context`).

The password is read from its file or variable right here, when a client is built, and goes nowhere else:
not into a model object, a plan, a journal or an argv. A librdkafka configuration is handed to the C
library and dropped; a Java one is written to a private file the tool reads and is removed.

Refusals are not outages. A wrong password, a CA that does not sign the brokers' certificates, an expired
certificate or a missing ACL never heal by waiting, so they are :class:`~kafkaops.errors.AuthError` (exit
14, never retried), naming the cluster and what was refused, and never the secret.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kafkaops.errors import AuthError, ConfigError
from kafkaops.model import KafkaEndpoint, KafkaSecurity
from kafkaops.policy.kafka_acls import Acl, lacking
from kafkaops.systems.credentials import reveal

if TYPE_CHECKING:
    import ssl

#: The JAAS login module of each SASL mechanism, as Kafka's Java clients name it.
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def password(security: KafkaSecurity, cluster: str) -> str:
    """The SASL password, read now from where the inventory says it lives.

    Raises:
        ConfigError: The file cannot be read or the variable is not set (named; the value never is).
    """
    secret = security.password
    if secret is None:
        raise ConfigError(f"cluster {cluster}: kafka.security.sasl has no password_file or password_env",
                          hint="name where kafkaops' Kafka password lives")
    return reveal(secret, f"cluster {cluster}", "Kafka password", "check kafka.security.sasl in the inventory, "
                  "and that kafkaops runs as the user who may read it")


def check_files(endpoint: KafkaEndpoint) -> None:
    """Every file ``kafka.security`` names exists, and a secret one (key, password) only its owner reads.

    Called before every client is built, so a missing or exposed file is one line naming it, before
    anything connects (the inventory's load checks what exists; this is the moment that must hold).

    Raises:
        ConfigError: naming the cluster, the key and the fix.
    """
    sec = endpoint.security
    files = [("ca_file", sec.ca_file, False), ("cert_file", sec.cert_file, False), ("key_file", sec.key_file, True),
             ("sasl.password_file", sec.password.file if sec.password else None, True)]
    for key, path, secret in files:
        if path is None:
            continue
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise ConfigError(f"cluster {endpoint.name}: kafka.security.{key} {path}: {exc.strerror}",
                              hint="create it, or fix the path in the inventory") from None
        if secret and mode & 0o077:
            raise ConfigError(f"cluster {endpoint.name}: kafka.security.{key} {path} may be read by other users "
                              f"(mode {mode & 0o777:04o})", hint=f"chmod 600 {path}")


def librdkafka_config(endpoint: KafkaEndpoint) -> dict[str, Any]:
    """``bootstrap.servers`` and the security settings of a confluent-kafka client of ``endpoint``.

    Hostname verification stays on (librdkafka's default ``https``): a broker is trusted for the name or
    address it is reached at, as every other client of the cluster trusts it.
    """
    sec = endpoint.security
    conf: dict[str, Any] = {"bootstrap.servers": endpoint.bootstrap_servers}
    if sec.protocol == "PLAINTEXT":
        return conf
    check_files(endpoint)
    conf["security.protocol"] = sec.protocol
    if sec.tls:
        if sec.ca_file:
            conf["ssl.ca.location"] = sec.ca_file
        if sec.cert_file:
            conf["ssl.certificate.location"] = sec.cert_file
            conf["ssl.key.location"] = sec.key_file
    if sec.sasl:
        conf["sasl.mechanisms"] = sec.sasl_mechanism
        conf["sasl.username"] = sec.username
        conf["sasl.password"] = password(sec, endpoint.name)
    return conf


#: Where librdkafka's log lines go: the debug log and ``-v`` (through the root logger), never logging's
#: last-resort stderr handler (hence the NullHandler).
LIBRDKAFKA_LOG = logging.getLogger("librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())


def build(factory: Any, conf: dict[str, Any], endpoint: KafkaEndpoint) -> Any:
    """``factory(conf)`` (an AdminClient, Consumer or Producer), where librdkafka's refusal of the
    configuration itself — a CA or key file that is not PEM, a key that does not match its certificate —
    is one line naming the cluster (exit 3), not a traceback.

    librdkafka logs through Python's logging (logger ``librdkafka``, served when the client is polled), not
    straight to stderr: what it says lands in a run's debug log and under ``-v``, redacted like the rest, and
    never on the operator's terminal otherwise (a stopped broker's refused connections are expected during
    maintenance)."""
    conf = {"logger": LIBRDKAFKA_LOG, **conf}
    try:
        return factory(conf)
    except Exception as exc:
        detail = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
        raise ConfigError(f"cluster {endpoint.name}: the Kafka client refused kafka.security: {detail}",
                          hint="check the CA, certificate and key files are PEM and belong together") from None


def _jaas_quote(value: str) -> str:
    """A JAAS option value: double-quoted, with ``\\`` and ``"`` escaped (Kafka parses it with a
    StreamTokenizer, which honours backslash escapes in quoted strings)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_properties(endpoint: KafkaEndpoint) -> dict[str, str]:
    """Java client properties for ``endpoint`` (without ``bootstrap.servers``): a ``--command-config``
    file's content, or the ``kafka.*`` options of a Spark reader.

    The truststore is the inventory's PEM CA file as is (Kafka reads PEM since 2.7, KIP-651), so one CA
    file serves librdkafka and the JVM. A client certificate is given inline (``ssl.keystore.key`` and
    ``ssl.keystore.certificate.chain``): the JVM's PEM *file* keystore wants key and chain in one file with
    an encrypted key, which a Puppet-managed admin host rarely has.
    """
    sec = endpoint.security
    if sec.protocol == "PLAINTEXT":
        return {}
    check_files(endpoint)
    props = {"security.protocol": sec.protocol}
    if sec.tls:
        if sec.ca_file:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = sec.ca_file
        if sec.cert_file and sec.key_file:
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.certificate.chain"] = _read(sec.cert_file, endpoint.name)
            props["ssl.keystore.key"] = _read(sec.key_file, endpoint.name)
    if sec.sasl:
        mechanism = sec.sasl_mechanism or ""
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = (f"{_LOGIN_MODULES[mechanism]} required username={_jaas_quote(sec.username or '')} "
                                     f"password={_jaas_quote(password(sec, endpoint.name))};")
    return props


def _read(path: str, cluster: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError(f"cluster {cluster}: cannot read {path}: {exc.strerror}",
                          hint="check kafka.security in the inventory") from None


def properties_text(props: dict[str, str]) -> str:
    """``props`` as a Java ``.properties`` file: backslashes, line breaks and non-Latin-1 characters escaped,
    so a password holding any of them reaches the JVM unchanged."""

    def esc(text: str, key: bool) -> str:
        out = []
        for i, ch in enumerate(text):
            if ch == "\\":
                out.append("\\\\")
            elif ch in "\n\r\t\f":
                out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[ch])
            elif (key and ch in "=: #!") or (not key and i == 0 and ch in " #!"):
                out.append("\\" + ch)
            elif ord(ch) > 0xFF:
                out.append("".join(f"\\u{u:04x}" for u in _utf16(ch)))
            else:
                out.append(ch)
        return "".join(out)

    return "".join(f"{esc(k, True)}={esc(v, False)}\n" for k, v in props.items())


def _utf16(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def tls_context(security: KafkaSecurity) -> ssl.SSLContext:
    """The TLS context of a raw connection to a broker: the inventory's CA (or the system's), hostname
    checked, the client certificate when the cluster wants mutual TLS."""
    import ssl  # here: librdkafka does its own TLS, and every Kafka command imports this module

    ctx = ssl.create_default_context(cafile=security.ca_file) if security.ca_file else ssl.create_default_context()
    if security.cert_file and security.key_file:
        ctx.load_cert_chain(security.cert_file, security.key_file)
    return ctx


#: librdkafka error names that say the brokers refused *who we are*, not that they are down.
REFUSED = {
    "_AUTHENTICATION": "authentication failed",
    "_SSL": "TLS handshake failed",
    "SASL_AUTHENTICATION_FAILED": "authentication failed",
    "TOPIC_AUTHORIZATION_FAILED": "not authorized on a topic",
    "GROUP_AUTHORIZATION_FAILED": "not authorized on a consumer group",
    "CLUSTER_AUTHORIZATION_FAILED": "not authorized on the cluster",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "not authorized on a transactional id",
    "DELEGATION_TOKEN_AUTHORIZATION_FAILED": "not authorized on delegation tokens",
    "UNSUPPORTED_SASL_MECHANISM": "the brokers do not offer the inventory's SASL mechanism",
    "ILLEGAL_SASL_STATE": "the brokers' listener does not expect SASL here",
}


class RefusalWatch:
    """librdkafka's ``error_cb``: keeps the last refusal (authentication, TLS) reported outside a request.

    A failed TLS handshake or SASL exchange is reported through the error callback, while the request
    that needed the connection only times out; without this, a wrong password would read as "Kafka did
    not answer" (exit 4, retried for minutes) instead of "authentication failed" (exit 14, at once).
    """

    def __init__(self) -> None:
        self.refusal: str | None = None

    def __call__(self, err: Any) -> None:
        name = err.name() if hasattr(err, "name") else ""
        if name in REFUSED:
            self.refusal = f"{REFUSED[name]}: {err.str()}"

    def check(self, endpoint: KafkaEndpoint, what: str, client: Any = None) -> None:
        """Raise :class:`AuthError` if a refusal was seen while doing ``what``. ``client``'s queued callbacks
        are served first (librdkafka calls ``error_cb`` only from ``poll``)."""
        if client is not None and self.refusal is None:
            try:
                client.poll(0)
            except Exception:
                pass
        if self.refusal is not None:
            raise refused(endpoint, what, self.refusal)


def refused(endpoint: KafkaEndpoint, what: str, detail: str, lacks: Acl | None = None) -> AuthError:
    """The one-line error of a refusal by ``endpoint``'s brokers while doing ``what``; ``lacks``: the ACL an
    authorizer's refusal says is missing."""
    sec = endpoint.security
    needs = f" (it needs {lacks})" if lacks else ""
    return AuthError(f"cluster {endpoint.name}: Kafka ({sec.protocol}, as {sec.principal}) refused {what}: "
                     f"{detail}{needs}", hint=_hint(detail, sec, lacks))


def _hint(detail: str, sec: KafkaSecurity, lacks: Acl | None = None) -> str:
    lowered = detail.lower()
    if "certificate verify failed" in lowered or ("ssl" in lowered and "verify" in lowered):
        return (f"the brokers' certificate does not verify against {sec.ca_file or 'the system CAs'} "
                "(wrong CA, expired, or issued for another name): fix kafka.security.ca_file or the certificate")
    if "authoriz" in lowered:
        return (f"grant {sec.principal} {lacks or 'the ACL named above'} (`kafkaops docs security` lists what each "
                "command needs)")
    if "authentication" in lowered or "sasl" in lowered:
        where = sec.password.where if sec.password else "the inventory"
        return f"check kafka.security.sasl (mechanism {sec.sasl_mechanism}, user {sec.username}, password in {where})"
    return "check kafka.security in the inventory"


def classify(endpoint: KafkaEndpoint, what: str, exc: BaseException, needs: Sequence[Acl] = ()) -> AuthError | None:
    """An :class:`AuthError` when ``exc`` (a confluent-kafka exception) is a refusal, else None. ``needs``:
    the ACLs the request needs (:mod:`kafkaops.policy.kafka_acls`), so an authorizer's refusal names the one
    it lacked."""
    err: Any = exc.args[0] if exc.args else None
    name = err.name() if hasattr(err, "name") else ""
    if name in REFUSED:
        return refused(endpoint, what, f"{REFUSED[name]}: {err.str()}", lacking(name, needs))
    return None
