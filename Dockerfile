# syntax=docker/dockerfile:1
# Multi-stage: compile TypeScript with the dev dependencies, then ship only the compiled
# operator and its production dependencies on a slim Node 24 image, as a non-root user.
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# npm ci needs every workspace's manifest (the client package is not part of the image).
# --ignore-scripts: the client's `prepare` (tsc) would run on a manifest without its sources,
# and no dependency needs its install script in the image.
COPY client/package.json client/
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json tsconfig.image.json ./
COPY framework framework
COPY crds crds
COPY providers providers
COPY health health
COPY book book
COPY discovery discovery
COPY gateway gateway
COPY handlers handlers
COPY charts charts
COPY cmd cmd
# The operator only: no framework/testing, no demo (tsconfig.image.json, .dockerignore).
RUN npx tsc -p tsconfig.image.json

FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY client/package.json client/
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force

FROM node:24-bookworm-slim
ENV NODE_ENV=production
# The memory settings the Deployment sets too (charts/operator-chart.ts OPERATOR_RUNTIME_ENV),
# so `docker run` behaves like the Pod; test/foundation/image.unit.test.ts holds them equal.
ENV NODE_OPTIONS="--max-old-space-size=160 --max-semi-space-size=4" MALLOC_ARENA_MAX=2
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY --from=build /src/build build
COPY package.json ./
# The node image's unprivileged user (uid 1000); the Deployment also sets runAsNonRoot.
USER 1000:1000
EXPOSE 8080 8090
ENTRYPOINT ["node", "build/cmd/operator.js"]
