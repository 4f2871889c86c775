# Stateful JobSet controller image.
#
#   docker build --build-arg GIT_COMMIT=$(git rev-parse HEAD) -t stateful-jobset:0.1.0 .
#
# The tag is the version (controller.__version__); GIT_COMMIT is written into the package as
# controller/COMMIT, which `python -m controller --version`, the first log line and
# stateful_jobset_build_info report (without it: "unknown"; .git is not part of the context).
# Two stages: the builder installs the locked *runtime* dependencies (no test or dev extras) and
# the package into a virtualenv; the final image gets only that virtualenv, on the same base image
# (so the venv's python symlink and shebangs stay valid), and runs as the non-root user 65532.
# tests/integration/test_entrypoint_venv.py carries these instructions out without a container
# engine and runs the result as the Deployment does (read-only, as user 65532).
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml requirements.lock README.md ./
COPY controller ./controller
ARG GIT_COMMIT=""
# Always written: a COMMIT file left in the build context must not name another commit.
RUN printf '%s\n' "$GIT_COMMIT" > controller/COMMIT
RUN pip install --no-cache-dir -c requirements.lock . \
    && pip uninstall --yes pip setuptools \
    && find /opt/venv -name '__pycache__' -type d -prune -exec rm -rf {} +

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin nonroot
COPY --from=builder /opt/venv /opt/venv
# An empty working directory: `python -m` puts the current directory first on sys.path.
WORKDIR /app
USER 65532:65532
EXPOSE 8443 8081
ENTRYPOINT ["python", "-m", "controller"]
