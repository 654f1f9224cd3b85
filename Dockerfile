# An Airflow 3.3 runtime image with Java 17 (for Spark) and Sluice installed.
FROM apache/airflow:3.3.2-python3.11

USER root
# JAVA_HOME through a link without the architecture, so the image builds on amd64 and arm64 alike.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture)" /usr/lib/jvm/java-17
ENV JAVA_HOME=/usr/lib/jvm/java-17

USER airflow
WORKDIR /usr/local/airflow
COPY --chown=airflow:root pyproject.toml README.md ./
COPY --chown=airflow:root runtime ./runtime
# The same pins as pyproject.toml, so the image runs what the tests ran.
RUN pip install --no-cache-dir -e .
COPY --chown=airflow:root dags ./dags
COPY --chown=airflow:root plugins ./plugins
COPY --chown=airflow:root include ./include
# Byte-compiled in the image: an editable install compiles nothing, and each driver, Python worker
# and task process would otherwise compile the engine's modules from source as it imports them.
RUN python -m compileall -q runtime dags plugins include
# Not loaded at start: `astro dev start` loads it itself; on a plain Airflow run
# `python -m include.local_airflow.settings` (from /usr/local/airflow) once `airflow db migrate`
# has created the database.
COPY --chown=airflow:root airflow_settings.yaml ./
ENV AIRFLOW__CORE__DAGS_FOLDER=/usr/local/airflow/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=/usr/local/airflow/plugins \
    SLUICE_WAREHOUSE=/usr/local/airflow/warehouse
