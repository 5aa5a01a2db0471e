#!/usr/bin/env bash
# Install everything kafkaops and its lab need, idempotently, on a fresh Debian machine:
#   Debian packages (etcd, OpenSSH server, tcpdump, kcat, ab, a JDK, Maven, Prometheus, Alertmanager),
#   the project with its extras (pip), the jars (Maven Central, cached outside git): Kafka 3.9 broker (and MirrorMaker 2)
#   and Kafka 4.x (the KRaft lab)
#   + CLI tools + log4j binding, Prometheus' JMX exporter agent (the lab's broker metrics), Spark's Kafka
#   connector matching pyspark, and the post-check's own
#   Spark reader, compiled here against pyspark.
# Re-running it only checks; it downloads nothing that is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
CACHE=${KAFKAOPS_CACHE:-$HOME/.cache/kafkaops}
say() { printf '\033[1m[install]\033[0m %s\n' "$*"; }

# 1. Debian packages -------------------------------------------------------------------------------
debs=(etcd-server etcd-client openssh-server openssh-client tcpdump kcat openjdk-17-jdk-headless maven procps iproute2
      apache2-utils  # apache2-utils: ab, for `kafkaops service bench` (the runbook's throughput test)
      prometheus prometheus-alertmanager  # the lab's monitoring: every lab runs its own (lab/kafkaops_lab/monitoring.py)
      iptables)  # the lab's network faults: `kafkaops lab net partition` (lab/kafkaops_lab/net.py)
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  say "apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts etcd/sshd as system services where it can; the lab runs its own on loopback.
# Prometheus and Alertmanager too, listening on every address at :9090/:9093 — the ports each lab's own
# instances take on its loopback addresses (a wildcard listener would make `lab up` refuse them), and
# a system Prometheus nobody configured is noise. Stop and disable them, on every run (an upgrade of
# the packages enables them again); with no service manager (a container) there is nothing to stop.
for unit in prometheus prometheus-alertmanager prometheus-node-exporter; do
  dpkg -s "$unit" >/dev/null 2>&1 || continue
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
  if [ -d /run/systemd/system ]; then
    if systemctl -q is-enabled "$unit" 2>/dev/null || systemctl -q is-active "$unit" 2>/dev/null; then
      say "systemctl disable --now $unit (the lab runs its own)"
      $SUDO systemctl disable --now "$unit" >/dev/null 2>&1 || true
    fi
  elif [ -x "/etc/init.d/$unit" ] && "/etc/init.d/$unit" status >/dev/null 2>&1; then
    say "stopping the system $unit (the lab runs its own)"
    $SUDO "/etc/init.d/$unit" stop >/dev/null 2>&1 || true
    $SUDO update-rc.d "$unit" disable >/dev/null 2>&1 || true
  fi
done

# 2. Python: the project, the post-check extra (pyspark), the dev tools, and the lab (kafkaops-lab: its own
#    distribution, lab/, which an admin host never installs) -------------------------------------------
if ! $PYTHON -c 'import kafkaops, kafkaops_lab, pyspark, confluent_kafka, kazoo, paramiko, conftool, pytest, pytest_timeout, xdist, hypothesis, build, pipx' 2>/dev/null \
   || [ pyproject.toml -nt "$CACHE/.pip-installed" ] || [ lab/pyproject.toml -nt "$CACHE/.pip-installed" ]; then
  say "pip install -e .[spark,batches,dev] -e ./lab"
  $PYTHON -m pip install -q --disable-pip-version-check -e ".[spark,batches,dev]" -e ./lab
  mkdir -p "$CACHE" && touch "$CACHE/.pip-installed"
fi
# An editable install is not byte-compiled, and where PYTHONDONTWRITEBYTECODE is set (as on these
# machines) Python never caches it either: every `kafkaops` start would recompile the modules it uses
# (~25 ms of `kafkaops status`). Compile them once, as pip does for a regular install.
$PYTHON -m compileall -q kafkaops lab/kafkaops_lab >/dev/null

# 3. Jars from Maven Central -------------------------------------------------------------------------
resolve() {  # resolve POM OUTDIR [extra mvn args]
  local pom=$1 out=$2; shift 2
  say "mvn copy-dependencies $(basename "$pom") -> $out"
  rm -rf "$out.tmp"
  mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out.tmp" "$@"
  rm -rf "$out" && mv "$out.tmp" "$out"
}
kafka_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/maven/kafka.pom.xml)
if [ ! -f "$CACHE/jars/kafka/kafka_2.13-$kafka_version.jar" ] || [ ! -f "$CACHE/jars/kafka/kafka-tools-$kafka_version.jar" ] \
   || [ ! -f "$CACHE/jars/kafka/connect-mirror-$kafka_version.jar" ]; then
  resolve scripts/maven/kafka.pom.xml "$CACHE/jars/kafka"
fi
kafka4_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' scripts/maven/kafka4.pom.xml)
if [ ! -f "$CACHE/jars/kafka4/kafka_2.13-$kafka4_version.jar" ] || [ ! -f "$CACHE/jars/kafka4/kafka-tools-$kafka4_version.jar" ]; then
  resolve scripts/maven/kafka4.pom.xml "$CACHE/jars/kafka4"  # the KRaft lab (lab up --mode kraft)
fi
jmx_version=$(sed -n 's:.*<jmx.version>\(.*\)</jmx.version>.*:\1:p' scripts/maven/jmx.pom.xml)
if [ ! -f "$CACHE/jars/jmx/jmx_prometheus_javaagent-$jmx_version.jar" ]; then
  resolve scripts/maven/jmx.pom.xml "$CACHE/jars/jmx"  # Prometheus' JMX exporter, in every lab Kafka JVM
fi
spark_version=$($PYTHON -c 'import pyspark; print(pyspark.__version__)')
if [ ! -f "$CACHE/jars/spark/spark-sql-kafka-0-10_2.13-$spark_version.jar" ]; then
  # Spark's own Kafka source, matching pyspark: the baseline bench/bench_spark_scan.py measures our
  # reader against, and `spark.read.format("kafka")` for ad-hoc digging (docs/health-check.md).
  # pyspark ships Hadoop, Scala, slf4j, snappy, lz4, spark-tags... itself (other patch versions would
  # clash): copy only what the Kafka source adds.
  resolve scripts/maven/spark-kafka.pom.xml "$CACHE/jars/spark" -Dspark.version="$spark_version" \
    -DexcludeGroupIds=org.apache.hadoop,org.scala-lang,org.slf4j,org.xerial.snappy,org.lz4 \
    -DexcludeArtifactIds=spark-tags_2.13,scala-parallel-collections_2.13,jsr305
fi
# 4. The post-check's Spark reader (kafkaops/health/jvm), built against this pyspark + kafka-clients --
# The reader's kafka-clients is kafkaops' own, pinned by version and sha256 (kafkaops/health/scan_jar.py): the
# lab's copy of the same version seeds the cache, so nothing is downloaded twice (the digest is still checked).
mkdir -p "$CACHE/jars/reader"
cp -n "$CACHE/jars/kafka/kafka-clients-$kafka_version.jar" "$CACHE/jars/reader/" 2>/dev/null || true
scan_jar=$($PYTHON -m kafkaops.health.scan_jar)
say "ready: kafka $kafka_version and $kafka4_version (KRaft) jars, JMX exporter $jmx_version, spark connector $spark_version, scan reader $(basename "$scan_jar"), $($PYTHON -m kafkaops.cli.main --version)"
