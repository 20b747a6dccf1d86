# kinesis-lander images. Three targets from one file:
#
#   docker build -t kinesis-lander .                        # the worker (default: last stage)
#   docker build --target spark -t kinesis-lander-spark \
#       --build-context s3a-jars=deploy/spark/jars .        # compact/analyse (S3A jars, below)
#   docker build --target bootstrap -t kinesis-lander-bootstrap .   # compose's bootstrap/smoke
#
# Every stage starts from the same pinned Python image, so the virtualenv built in a
# builder stage (its shebangs and its compiled wheels) is valid in the stage it is copied
# to. Bookworm rather than trixie: Debian 13 no longer ships OpenJDK 17, which the Spark
# stage needs (PySpark 4 runs on Java 17 or 21; 17 is what the project tests with).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --------------------------------------------------------------------------------------
# wheel: build the project's wheel once; the venv stages install from it, never from the
# source tree, so an image holds exactly what installing that wheel would. The landing
# hot path is compiled with mypyc (KINESIS_LANDER_MYPYC=1, setup.py): a C compiler and the
# pinned build requirements live in this stage only.
FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
# The compiler is not version-pinned, for the reason the spark stage gives for its JRE
# (bookworm replaces security-updated packages); it builds the wheel and stays here.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install --yes --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY deploy/docker/requirements-build.txt ./
RUN python -m pip install --no-deps --requirement requirements-build.txt
COPY pyproject.toml setup.py README.md ./
COPY consumer ./consumer
COPY sparkjobs ./sparkjobs
RUN KINESIS_LANDER_MYPYC=1 python -m pip wheel --no-deps --no-build-isolation --wheel-dir /dist . \
    && ls /dist/kinesis_lander-*.whl
# The exact versions CI tested (pyproject.toml gives ranges): every venv installs with it.
COPY constraints.txt /dist/

# --------------------------------------------------------------------------------------
# venv-*: one virtualenv per image, at the same path (/opt/lander) in every stage.
FROM ${PYTHON_IMAGE} AS venv-worker
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY --from=wheel /dist /dist
RUN python -m venv /opt/lander \
    && /opt/lander/bin/pip install -c /dist/constraints.txt /dist/kinesis_lander-*.whl

FROM ${PYTHON_IMAGE} AS venv-spark
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY --from=wheel /dist /dist
# The `spark` extra names PySpark (the lock pins it); PySpark carries Spark's and Hadoop's jars itself.
RUN python -m venv /opt/lander \
    && /opt/lander/bin/pip install -c /dist/constraints.txt "$(ls /dist/kinesis_lander-*.whl)[spark]"

FROM ${PYTHON_IMAGE} AS venv-bootstrap
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY --from=wheel /dist /dist
# The `compose` extra is boto3 (clients aimed at the local stack's endpoints).
RUN python -m venv /opt/lander \
    && /opt/lander/bin/pip install -c /dist/constraints.txt "$(ls /dist/kinesis_lander-*.whl)[compose]" \
    && /opt/lander/bin/python -c "import boto3"

# --------------------------------------------------------------------------------------
# base: what every runtime image shares. No compiler, no pip cache, no build tools: the
# slim image plus a venv copied in. A fixed, unprivileged UID/GID (10001) so that
# Kubernetes' runAsNonRoot/runAsUser and file ownership agree with the image.
FROM ${PYTHON_IMAGE} AS base
RUN groupadd --system --gid 10001 lander \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/lander --create-home \
       --shell /usr/sbin/nologin lander
ENV PATH=/opt/lander/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LANDER_LOG_FORMAT=json
WORKDIR /home/lander

# --------------------------------------------------------------------------------------
# s3a-jars: Spark's S3A filesystem (hadoop-aws) and the AWS SDK v2 bundle it was built
# against. PySpark ships Hadoop's client but not these, and the project reaches no Maven
# repository from its build, so they come in as a named build context:
#
#   docker build --target spark --build-context s3a-jars=deploy/spark/jars .
#
# where deploy/spark/jars holds hadoop-aws-<V>.jar with V the version of
# hadoop-client-api-<V>.jar inside PySpark (3.5.0 for pyspark 4.3.0; checked below) and
# the software.amazon.awssdk bundle-<v>.jar that hadoop-aws <V> depends on (see
# deploy/README.md). Why not an official Spark image: it carries no hadoop-aws either,
# its Python is not 3.11, and the jobs are launched by `lander`, not spark-submit.
# Without that build context this empty stage is used and the build of `spark` fails
# below, unless S3A_JARS_REQUIRED=false (file:// archives only).
FROM scratch AS s3a-jars

# --------------------------------------------------------------------------------------
# object-reader: the compaction's object reader (sparkjobs/compaction/jvm/LandedObjectLines.java,
# sparkjobs/compaction/objectreader.py) compiled against the image's own PySpark jars. The JDK stays
# in this stage; the spark image gets the jar and keeps its JRE. Not version-pinned, for
# the reason the spark stage gives for its JRE.
FROM ${PYTHON_IMAGE} AS object-reader
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jdk-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=venv-spark /opt/lander /opt/lander
RUN /opt/lander/bin/python -c "from pathlib import Path; from sparkjobs.compaction.objectreader import build; \
assert build(Path('/out/object-reader.jar'))" \
    && ls -l /out/object-reader.jar

# --------------------------------------------------------------------------------------
# spark: the nightly `lander compact` + `lander analyse` (Kubernetes CronJob, compose's
# on-demand `compaction` service). Spark runs in local mode inside the container.
FROM base AS spark
ARG S3A_JARS_REQUIRED=true
# Java 17 headless JRE from Debian. Not version-pinned on purpose: bookworm's
# openjdk-17 takes security updates as new package versions and drops the old ones from
# the archive, so a pinned version would stop building within weeks; the base image tag
# is the pin. /usr/share/man/man1 must exist for the JRE's postinst on slim images.
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
COPY --from=venv-spark /opt/lander /opt/lander
# The image's Spark defaults are a properties file the jobs read (LANDER_SPARK_PROPERTIES),
# not SPARK_CONF_DIR: Spark puts that folder on the JVM's class path, and the AppCDS
# archive below can be neither written nor used with a non-empty folder there.
ENV SPARK_HOME=/opt/lander/lib/python3.11/site-packages/pyspark \
    LANDER_SPARK_PROPERTIES=/opt/lander/spark-defaults.conf \
    PYSPARK_PYTHON=/opt/lander/bin/python \
    HOME=/home/lander
# The jars go into PySpark's own jars folder: on the classpath of the driver and (same
# image) of every executor, whatever a cluster passes as extraClassPath.
COPY --from=s3a-jars / ${SPARK_HOME}/jars/
COPY deploy/docker/spark-defaults.conf /opt/lander/spark-defaults.conf
# The object reader: each landed object read whole and split in the JVM, 10-15 % less
# CPU for a day of small objects than Spark's text reader (docs/sparkjobs.md).
COPY --from=object-reader /out/object-reader.jar /opt/lander/object-reader.jar
ENV LANDER_SPARK_READER_JAR=/opt/lander/object-reader.jar
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadoop-aws must be the exact version of PySpark's Hadoop client, with an SDK v2 bundle.
RUN hadoop="$(basename "$SPARK_HOME"/jars/hadoop-client-api-*.jar .jar)" \
    && hadoop="${hadoop#hadoop-client-api-}" \
    && if [ "$S3A_JARS_REQUIRED" = "true" ]; then \
        ls "$SPARK_HOME/jars/hadoop-aws-$hadoop.jar" "$SPARK_HOME"/jars/bundle-2.*.jar >/dev/null \
        || { echo "spark target: need hadoop-aws-$hadoop.jar and the AWS SDK bundle-2.*.jar;" \
             "pass --build-context s3a-jars=DIR (deploy/README.md)," \
             "or --build-arg S3A_JARS_REQUIRED=false for file:// only" >&2; exit 1; }; \
    fi \
    && java -version 2>&1 | grep -q '"17\.'
# The AppCDS archive of a compaction's classes, built once here with the image's own
# Java and jars, so every nightly run starts from it (~17 % less CPU on a small day;
# docs/benchmarks.md). An archive that does not match is ignored by the JVM.
# SPARK_LOCAL_IP: a build container's hostname need not resolve (buildah's does not), and
# Spark asks for the local host's address unless told; the classes loaded are the same.
ENV LANDER_SPARK_CDS=/opt/lander/spark-classes.jsa
COPY deploy/docker/class_archive.py /opt/lander/class_archive.py
RUN SPARK_LOCAL_IP=127.0.0.1 python /opt/lander/class_archive.py "$LANDER_SPARK_CDS" \
    && chmod 0444 "$LANDER_SPARK_CDS"
USER 10001:10001
# No daemon here: nothing to health-check, and nothing to wait for on SIGTERM beyond
# the JVM's own shutdown (a killed run publishes nothing; the next run redoes it).
HEALTHCHECK NONE
ENTRYPOINT ["lander"]
CMD ["compact"]

# --------------------------------------------------------------------------------------
# bootstrap: deploy/local/bootstrap.py for docker-compose (create the stream, the lease
# table and the bucket on LocalStack; the smoke check). Not for production.
FROM base AS bootstrap
COPY --from=venv-bootstrap /opt/lander /opt/lander
COPY deploy/local/bootstrap.py /opt/lander/bootstrap.py
USER 10001:10001
HEALTHCHECK NONE
ENTRYPOINT ["python", "/opt/lander/bootstrap.py"]
CMD ["bootstrap"]

# --------------------------------------------------------------------------------------
# runtime (default target): the worker daemon, `lander run`.
FROM base AS runtime
COPY --from=venv-worker /opt/lander /opt/lander
# The metrics/health server must listen on all interfaces in a container (the daemon's
# default is loopback); 9400 is the port every deploy file uses.
ENV LANDER_METRICS_HOST=0.0.0.0 \
    LANDER_METRICS_PORT=9400
EXPOSE 9400
USER 10001:10001
# `lander run` handles SIGTERM itself: stop reading, land what is buffered, checkpoint,
# release its leases, within LANDER_SHUTDOWN_SECONDS (20 s by default). Exec-form
# ENTRYPOINT makes `lander` PID 1, so the signal reaches it and not a shell. Give the
# container a stop timeout above that bound (compose: stop_grace_period 35s).
STOPSIGNAL SIGTERM
# Liveness only (/healthz): /readyz turns 503 while the lease table is unreachable or
# during shutdown, which is not a reason to restart a container. Python, not curl: the
# slim image has no curl and the runtime installs nothing.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os,urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('LANDER_METRICS_PORT', '9400'), timeout=2)"]
ENTRYPOINT ["lander"]
CMD ["run"]
