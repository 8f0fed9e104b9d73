#!/usr/bin/env bash
# WordNet 3.0 for METEOR, offline: Debian's wordnet-base / wordnet-sense-index packages hold the database files;
# arranged with a `lexnames` file they form the corpora/wordnet folder NLTK reads. Idempotent.
# Usage: scripts/setup_wordnet.sh [NLTK_DATA_DIR]   (default: .venv/nltk_data, found by cast.evaluate.wordnet)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-${VENV:-.venv}/nltk_data}/corpora/wordnet
source_dir=${WORDNET_DICT:-/usr/share/wordnet}
files="data.adj data.adv data.noun data.verb index.adj index.adv index.noun index.verb index.sense
  adj.exc adv.exc noun.exc verb.exc cntlist.rev"

if [ ! -f "$source_dir/data.noun" ] || [ ! -f "$source_dir/index.sense" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends wordnet-base wordnet-sense-index \
      >/dev/null || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends wordnet-base wordnet-sense-index >/dev/null; }
  else
    # Not fatal: everything but METEOR works without WordNet (METEOR then says how to install it).
    echo "warning: WordNet is missing from $source_dir, so METEOR is unavailable: install the Debian packages" \
      "wordnet-base and wordnet-sense-index (as root) and rerun $0, or set WORDNET_DICT to a WordNet 3.0" \
      "dict folder" >&2
    exit 0
  fi
fi

mkdir -p "$target"
for f in $files; do
  [ -f "$source_dir/$f" ] || { echo "WordNet file $source_dir/$f is missing" >&2; exit 1; }
  # Copies, not links: NLTK refuses corpus files whose real path lies outside its data folder.
  if [ -L "$target/$f" ] || ! cmp -s "$source_dir/$f" "$target/$f"; then
    rm -f "$target/$f"
    cp "$source_dir/$f" "$target/$f"
  fi
done
# The lexicographer file names and numbers (WordNet 3.0 lexnames(5WN)): number, name, syntactic category.
lexnames=(adj.all:3 adj.pert:3 adv.all:4 noun.Tops:1 noun.act:1 noun.animal:1 noun.artifact:1 noun.attribute:1
  noun.body:1 noun.cognition:1 noun.communication:1 noun.event:1 noun.feeling:1 noun.food:1 noun.group:1
  noun.location:1 noun.motive:1 noun.object:1 noun.person:1 noun.phenomenon:1 noun.plant:1 noun.possession:1
  noun.process:1 noun.quantity:1 noun.relation:1 noun.shape:1 noun.state:1 noun.substance:1 noun.time:1
  verb.body:2 verb.change:2 verb.cognition:2 verb.communication:2 verb.competition:2 verb.consumption:2
  verb.contact:2 verb.creation:2 verb.emotion:2 verb.motion:2 verb.perception:2 verb.possession:2 verb.social:2
  verb.stative:2 verb.weather:2 adj.ppl:3)
tmp="$target/lexnames.tmp"
: > "$tmp"
for i in "${!lexnames[@]}"; do
  printf '%02d\t%s\t%s\n' "$i" "${lexnames[$i]%:*}" "${lexnames[$i]#*:}" >> "$tmp"
done
mv "$tmp" "$target/lexnames"
echo "WordNet ready for NLTK in $target"
