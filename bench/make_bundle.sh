#!/usr/bin/env bash
# Packs what the BEAM needs to run the benchmarks on a machine without Erlang/Elixir (the lent
# H200 host): Debian's OTP tree (without apps the benchmarks never load), the Elixir build, and
# the compiled apps (MIX_ENV=prod) with the NIF, as .dev/nxv_bundle.tar.xz. bench/h200_run.sh
# unpacks it there. .dev/ is git-ignored (carried to the device, never committed).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
MIX_ENV=prod mix compile >/dev/null
stage=$(mktemp -d)
mkdir -p "$stage/erlang" "$stage/elixir/lib" "$stage/apps" .dev
skip='wx|megaco|snmp|diameter|jinterface|odbc|common_test|observer|debugger|dialyzer|et-|reltool|eldap|ftp|tftp|erl_docgen|edoc|ssh|mnesia|erl_interface'
(cd /usr/lib/erlang && tar -cf - --exclude='*/src' --exclude='*/doc' --exclude='*/examples' --exclude=man \
   $(ls -d * | grep -v '^lib$') $(ls -d lib/* | grep -Ev "lib/($skip)")) | tar -xf - -C "$stage/erlang"
elixir_root=$(dirname "$(dirname "$(command -v elixir)")")
cp -r "$elixir_root/bin" "$stage/elixir/"
for app in "$elixir_root"/lib/*; do mkdir -p "$stage/elixir/lib/$(basename "$app")"; cp -r "$app/ebin" "$stage/elixir/lib/$(basename "$app")/"; done
for app in _build/prod/lib/*; do
  name=$(basename "$app"); mkdir -p "$stage/apps/$name"
  cp -r "$app/ebin" "$stage/apps/$name/"
  [ -e "$app/priv" ] && cp -rL "$app/priv" "$stage/apps/$name/"
done
# Written aside and moved into place: a call carrying .dev/ meanwhile takes the old one whole.
tar -cJf .dev/nxv_bundle.tar.xz.new -C "$stage" .
mv .dev/nxv_bundle.tar.xz.new .dev/nxv_bundle.tar.xz
rm -rf "$stage"
ls -la .dev/nxv_bundle.tar.xz
